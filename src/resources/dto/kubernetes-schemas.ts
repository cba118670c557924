import type { SchemaObject } from '@nestjs/swagger';

/**
 * The shapes of what a cluster answers on resource routes, as OpenAPI schemas. They are open to extra
 * properties (each kind has its own content), but declare what every object has, so generated clients get
 * `metadata.name` typed. `completeDocument()` adds them to `components.schemas`.
 */
const STRING_MAP: SchemaObject = { type: 'object', additionalProperties: { type: 'string' } };

const ObjectMeta: SchemaObject = {
  type: 'object',
  description: "Kubernetes `ObjectMeta`: the object's name, namespace, version and labels.",
  additionalProperties: true,
  properties: {
    name: { type: 'string' },
    generateName: { type: 'string' },
    namespace: { type: 'string' },
    uid: { type: 'string' },
    resourceVersion: { type: 'string', description: 'Send it back on PUT; a stale one is a 409' },
    generation: { type: 'integer', format: 'int64' },
    creationTimestamp: { type: 'string', format: 'date-time' },
    deletionTimestamp: { type: 'string', format: 'date-time' },
    deletionGracePeriodSeconds: { type: 'integer', format: 'int64' },
    labels: STRING_MAP,
    annotations: STRING_MAP,
    finalizers: { type: 'array', items: { type: 'string' } },
    ownerReferences: { type: 'array', items: { type: 'object', additionalProperties: true } },
    managedFields: { type: 'array', items: { type: 'object', additionalProperties: true } },
  },
};

const ListMeta: SchemaObject = {
  type: 'object',
  description: 'Kubernetes `ListMeta`: `continue` fetches the next page (with `limit`).',
  additionalProperties: true,
  properties: {
    resourceVersion: { type: 'string' },
    continue: { type: 'string' },
    remainingItemCount: { type: 'integer', format: 'int64' },
    selfLink: { type: 'string' },
  },
};

const KubernetesObject: SchemaObject = {
  type: 'object',
  description: 'A Kubernetes object as the cluster returns it; the rest of its content depends on its kind.',
  additionalProperties: true,
  required: ['apiVersion', 'kind', 'metadata'],
  properties: {
    apiVersion: { type: 'string', example: 'v1' },
    kind: { type: 'string', example: 'ConfigMap' },
    metadata: { $ref: '#/components/schemas/ObjectMeta' },
  },
};

const KubernetesListItem: SchemaObject = {
  type: 'object',
  description: 'An object inside a List: built-in kinds leave out `apiVersion` and `kind` there (the List names them).',
  additionalProperties: true,
  required: ['metadata'],
  properties: {
    apiVersion: { type: 'string' },
    kind: { type: 'string' },
    metadata: { $ref: '#/components/schemas/ObjectMeta' },
  },
};

const KubernetesList: SchemaObject = {
  type: 'object',
  description: "The cluster's List object, verbatim.",
  additionalProperties: true,
  required: ['apiVersion', 'kind', 'metadata', 'items'],
  properties: {
    apiVersion: { type: 'string', example: 'v1' },
    kind: { type: 'string', example: 'ConfigMapList' },
    metadata: { $ref: '#/components/schemas/ListMeta' },
    items: { type: 'array', items: { $ref: '#/components/schemas/KubernetesListItem' } },
    total: {
      type: 'integer',
      minimum: 0,
      description: 'Paged query only: how many objects match (this page and every other)',
      example: 1234,
    },
    page: { type: 'integer', minimum: 1, description: 'Paged query only: this page, from 1', example: 1 },
    size: { type: 'integer', minimum: 1, maximum: 500, description: 'Paged query only: objects per page', example: 50 },
  },
};

const KubernetesObjectInput: SchemaObject = {
  type: 'object',
  description:
    'An object to create or replace. `apiVersion` and `kind` are filled from discovery when absent; the namespace comes from the path. PUT needs `metadata.name` and `metadata.resourceVersion`.',
  additionalProperties: true,
  properties: {
    apiVersion: { type: 'string', example: 'v1' },
    kind: { type: 'string', example: 'ConfigMap' },
    metadata: { $ref: '#/components/schemas/ObjectMeta' },
  },
};

const JsonPatchOperation: SchemaObject = {
  type: 'object',
  description: 'One RFC 6902 operation (`patchType=json`).',
  required: ['op', 'path'],
  additionalProperties: false,
  properties: {
    op: { type: 'string', enum: ['add', 'remove', 'replace', 'move', 'copy', 'test'] },
    path: { type: 'string', example: '/data/key' },
    from: { type: 'string' },
    value: {},
  },
};

const KubernetesStatus: SchemaObject = {
  type: 'object',
  description:
    "A Kubernetes `Status`: the cluster's own error (and some delete answers), passed through with the cluster's status code. Tell it from the service's error by `kind: \"Status\"`.",
  additionalProperties: true,
  required: ['kind', 'apiVersion'],
  properties: {
    kind: { type: 'string', enum: ['Status'] },
    apiVersion: { type: 'string', example: 'v1' },
    metadata: { $ref: '#/components/schemas/ListMeta' },
    status: { type: 'string', enum: ['Success', 'Failure'] },
    message: { type: 'string' },
    reason: { type: 'string', example: 'NotFound' },
    details: {
      type: 'object',
      additionalProperties: true,
      properties: {
        name: { type: 'string' },
        group: { type: 'string' },
        kind: { type: 'string' },
        uid: { type: 'string' },
        causes: {
          type: 'array',
          items: {
            type: 'object',
            additionalProperties: true,
            properties: { reason: { type: 'string' }, message: { type: 'string' }, field: { type: 'string' } },
          },
        },
        retryAfterSeconds: { type: 'integer' },
      },
    },
    code: { type: 'integer', example: 404 },
  },
};

export const KUBERNETES_SCHEMAS: Record<string, SchemaObject> = {
  ObjectMeta,
  ListMeta,
  KubernetesObject,
  KubernetesListItem,
  KubernetesList,
  KubernetesObjectInput,
  JsonPatchOperation,
  KubernetesStatus,
};

/** `$ref` to one of the schemas above. */
export function kubernetesRef(name: keyof typeof KUBERNETES_SCHEMAS & string): { $ref: string } {
  return { $ref: `#/components/schemas/${name}` };
}

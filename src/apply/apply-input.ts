// What a server-side apply takes in: the documents of a body (YAML stream, JSON object, array or List),
// read within bounds, and a PATCH as it goes to the cluster. Pure: no I/O.
import { BadRequestException, ServiceUnavailableException } from '@nestjs/common';
import type { Caller } from '../access/caller.js';
import type { YamlBounds } from '../common/bounded-yaml.js';
import { parseYamlStream, YamlParserBusyError } from '../common/yaml-thread.js';
import type { PatchResourceQueryDto } from '../resources/dto/resource-query.dto.js';
import { PATCH_CONTENT_TYPES, patchContentType } from '../k8s/resource-path.js';
import { assertOwnFieldManager, defaultFieldManager } from './field-manager.js';

/** Documents in one apply request. */
export const MAX_APPLY_DOCUMENTS = 500;

/**
 * Bounds of an apply body's YAML: the resource routes' 10 MiB, JSON's nesting, indentation for deep
 * CRD schemas, and at most this many lines and collections (each costs the parser alike; a hostile
 * body at the bounds parses in about a second). Large imports parse far faster as JSON.
 */
export const APPLY_YAML_BOUNDS: YamlBounds = {
  maxLength: 10 * 1024 * 1024,
  maxFlowDepth: 64,
  maxIndent: 256,
  maxNodes: 100_000,
  maxCollections: 100_000,
  maxAliasCount: 100,
  maxExpandedChars: 20 * 1024 * 1024,
};

/** The documents of a YAML text, or a 400 naming the line (503 when every parser thread is busy and the queue full). */
async function yamlDocuments(text: string) {
  let parsed;
  try {
    parsed = await parseYamlStream(text, APPLY_YAML_BOUNDS, 'body');
  } catch (error) {
    if (!(error instanceof YamlParserBusyError)) throw error;
    throw new ServiceUnavailableException({
      message: 'too many large YAML bodies are being parsed; try again in a moment (or send JSON)',
      retryAfter: 1,
    });
  }
  if ('problem' in parsed) throw new BadRequestException([parsed.problem.message]);
  return parsed.documents;
}

/** One document of an apply body, and where it came from (1-based: its position, and its line in YAML). */
export interface ApplyDocument {
  object: unknown;
  index: number;
  line?: number;
}

function isList(value: unknown): value is { items: unknown[] } {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
  const { kind, items } = value as { kind?: unknown; items?: unknown };
  return typeof kind === 'string' && kind.endsWith('List') && Array.isArray(items);
}

/**
 * The documents of a body: a YAML stream (text), or JSON (an object, an array, or a `List` whose items
 * are applied one by one, as kubectl does). At most MAX_APPLY_DOCUMENTS; invalid YAML is a 400 naming
 * the line, and nothing is applied.
 */
export async function documentsOf(body: unknown): Promise<ApplyDocument[]> {
  const found: Array<{ object: unknown; line?: number }> = [];
  if (typeof body === 'string') {
    for (const doc of await yamlDocuments(body)) {
      if (isList(doc.value)) for (const item of doc.value.items) found.push({ object: item, line: doc.line });
      else found.push({ object: doc.value, line: doc.line });
    }
  } else if (Array.isArray(body)) {
    for (const item of body) found.push({ object: item });
  } else if (isList(body)) {
    for (const item of body.items) found.push({ object: item });
  } else if (body !== undefined && body !== null) {
    found.push({ object: body });
  }
  if (found.length === 0) {
    throw new BadRequestException(['body has no documents: send YAML documents, or a JSON object, array or List']);
  }
  if (found.length > MAX_APPLY_DOCUMENTS) {
    throw new BadRequestException([`body has ${found.length} documents: at most ${MAX_APPLY_DOCUMENTS} per request`]);
  }
  return found.map((doc, i) => ({ ...doc, index: i + 1 }));
}

/** The one object of a PATCH with server-side apply: YAML (text) or JSON, a mapping. */
export async function applyPatchObject(body: unknown): Promise<Record<string, unknown>> {
  let object = body;
  if (typeof body === 'string') {
    const documents = await yamlDocuments(body);
    if (documents.length !== 1) {
      throw new BadRequestException([`body must be one YAML document, not ${documents.length}`]);
    }
    object = documents[0].value;
  }
  if (object === null || typeof object !== 'object' || Array.isArray(object)) {
    throw new BadRequestException(['body must be the object to apply: a mapping with apiVersion, kind and metadata']);
  }
  return object as Record<string, unknown>;
}

/**
 * A PATCH of an object or subresource, as it goes to the cluster: the content type (from `patchType`
 * or the request's Content-Type), the body, and the query. A server-side apply takes YAML or JSON and
 * the caller's field manager unless `fieldManager` names one; `force` is for apply only.
 */
export async function patchRequest(
  caller: Caller,
  body: unknown,
  q: PatchResourceQueryDto,
  requestContentType: string | undefined,
): Promise<{ contentType: string; body: Buffer; query: Omit<PatchResourceQueryDto, 'patchType'> }> {
  const contentType = patchContentType(q.patchType, requestContentType);
  const apply = contentType === PATCH_CONTENT_TYPES.apply;
  if (q.force !== undefined && !apply) throw new BadRequestException(['force needs patchType=apply']);
  let patch: unknown = body;
  if (apply) patch = await applyPatchObject(body);
  else if (body === undefined || body === null || typeof body !== 'object') {
    throw new BadRequestException([
      'body must be the patch: a JSON object, or an array of operations for a JSON patch',
    ]);
  }
  assertOwnFieldManager(caller, q.fieldManager);
  const { patchType: _patchType, ...query } = q;
  if (apply) query.fieldManager ??= defaultFieldManager(caller);
  return { contentType, body: Buffer.from(JSON.stringify(patch), 'utf8'), query };
}

import { decodeMessage, encodeMessage, ProtobufError, type Schema, unwrap, wrap } from './protobuf.js';

/**
 * The self reviews the service answers, read from and written to protobuf (authorization.k8s.io and
 * authentication.k8s.io `generated.proto`): only their own fields, as the JSON the rest of the code
 * reads. Field numbers are the API's, which never change within a version.
 */

const RESOURCE_ATTRIBUTES: Schema = {
  1: ['namespace', 'string'],
  2: ['verb', 'string'],
  3: ['group', 'string'],
  4: ['version', 'string'],
  5: ['resource', 'string'],
  6: ['subresource', 'string'],
  7: ['name', 'string'],
};
const NON_RESOURCE_ATTRIBUTES: Schema = { 1: ['path', 'string'], 2: ['verb', 'string'] };
/** SelfSubjectAccessReview: metadata 1, spec 2, status 3; its spec: resourceAttributes 1, nonResourceAttributes 2. */
const ACCESS_REVIEW: Schema = {
  2: [
    'spec',
    {
      message: {
        1: ['resourceAttributes', { message: RESOURCE_ATTRIBUTES }],
        2: ['nonResourceAttributes', { message: NON_RESOURCE_ATTRIBUTES }],
      },
    },
  ],
};
/** SelfSubjectRulesReview: metadata 1, spec 2 (namespace 1), status 3. */
const RULES_REVIEW: Schema = { 2: ['spec', { message: { 1: ['namespace', 'string'] } }] };
/** SelfSubjectReview: metadata 1, status 2; nothing of it is read. */
const SUBJECT_REVIEW: Schema = {};

export type ReviewKind = 'SelfSubjectAccessReview' | 'SelfSubjectRulesReview' | 'SelfSubjectReview';
const SCHEMAS: Record<ReviewKind, Schema> = {
  SelfSubjectAccessReview: ACCESS_REVIEW,
  SelfSubjectRulesReview: RULES_REVIEW,
  SelfSubjectReview: SUBJECT_REVIEW,
};

/** A review sent as protobuf, as the JSON object it stands for. */
export function decodeReview(kind: ReviewKind, body: Buffer): Record<string, unknown> {
  const object = unwrap(body);
  if (object.kind !== kind) {
    throw new ProtobufError(`the protobuf body is a ${object.kind.slice(0, 64) || 'object of no kind'}, not a ${kind}`);
  }
  return { apiVersion: object.apiVersion, kind, ...decodeMessage(object.raw, SCHEMAS[kind]) };
}

type Json = Record<string, unknown>;
const str = (value: unknown) => (typeof value === 'string' ? value : undefined);
const strs = (value: unknown) => (Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : []);
const obj = (value: unknown): Json => (value !== null && typeof value === 'object' ? (value as Json) : {});

function attributes(value: unknown, schema: Schema): Buffer | undefined {
  if (value === undefined) return undefined;
  const json = obj(value);
  return encodeMessage(Object.entries(schema).map(([field, [name]]) => [Number(field), str(json[name])]));
}

function accessReview(answer: Json): Buffer {
  const spec = obj(answer.spec);
  const status = obj(answer.status);
  return encodeMessage([
    [1, Buffer.alloc(0)],
    [
      2,
      encodeMessage([
        [1, attributes(spec.resourceAttributes, RESOURCE_ATTRIBUTES)],
        [2, attributes(spec.nonResourceAttributes, NON_RESOURCE_ATTRIBUTES)],
      ]),
    ],
    // SubjectAccessReviewStatus: allowed 1, reason 2, evaluationError 3, denied 4.
    [
      3,
      encodeMessage([
        [1, status.allowed === true],
        [2, str(status.reason) ?? ''],
        [3, str(status.evaluationError)],
        [4, status.denied === true ? true : undefined],
      ]),
    ],
  ]);
}

function rulesReview(answer: Json): Buffer {
  const spec = obj(answer.spec);
  const status = obj(answer.status);
  const list = (value: unknown) => (Array.isArray(value) ? value.map(obj) : []);
  return encodeMessage([
    [1, Buffer.alloc(0)],
    [2, encodeMessage([[1, str(spec.namespace) ?? '']])],
    // SubjectRulesReviewStatus: resourceRules 1, nonResourceRules 2, incomplete 3, evaluationError 4.
    [
      3,
      encodeMessage([
        [
          1,
          list(status.resourceRules).map((rule) =>
            encodeMessage([
              [1, strs(rule.verbs)],
              [2, strs(rule.apiGroups)],
              [3, strs(rule.resources)],
              [4, strs(rule.resourceNames)],
            ]),
          ),
        ],
        [
          2,
          list(status.nonResourceRules).map((rule) =>
            encodeMessage([
              [1, strs(rule.verbs)],
              [2, strs(rule.nonResourceURLs)],
            ]),
          ),
        ],
        [3, status.incomplete === true],
        [4, str(status.evaluationError) ?? ''],
      ]),
    ],
  ]);
}

function subjectReview(answer: Json): Buffer {
  const user = obj(obj(answer.status).userInfo);
  // UserInfo: username 1, uid 2, groups 3, extra 4 (a map: entries of key 1 and ExtraValue 2, whose items are 1).
  const extra = Object.entries(obj(user.extra)).map(([key, values]) =>
    encodeMessage([
      [1, key],
      [2, encodeMessage([[1, strs(values)]])],
    ]),
  );
  const userInfo = encodeMessage([
    [1, str(user.username) ?? ''],
    [2, str(user.uid) ?? ''],
    [3, strs(user.groups)],
    [4, extra],
  ]);
  return encodeMessage([
    [1, Buffer.alloc(0)],
    [2, encodeMessage([[1, userInfo]])],
  ]);
}

/** A review's answer (the JSON object the service built) as protobuf in the Kubernetes envelope. */
export function encodeReview(answer: Json & { kind: ReviewKind; apiVersion: string }): Buffer {
  const raw =
    answer.kind === 'SelfSubjectAccessReview'
      ? accessReview(answer)
      : answer.kind === 'SelfSubjectRulesReview'
        ? rulesReview(answer)
        : subjectReview(answer);
  return wrap(answer.apiVersion, answer.kind, raw);
}

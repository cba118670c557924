// kubectl ≥ 1.32 sends its self reviews as application/vnd.kubernetes.protobuf: the service reads the
// envelope and these messages' fields by hand (src/kube/protobuf.ts, review-codec.ts), bounded, and
// writes its answers in the same encoding. The end-to-end proof with real kubectls is
// test/e2e/kubectl-versions.test.ts; here, the reader's refusals and the round trips.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  decodeMessage,
  encodeMessage,
  prefersProtobuf,
  ProtobufError,
  readFields,
  type Schema,
  unwrap,
  wrap,
} from '../../src/kube/protobuf.js';
import { decodeReview, encodeReview } from '../../src/kube/review-codec.js';

/** An access review as client-go writes it: metadata, spec{resourceAttributes{namespace, verb, resource}}, status. */
function accessReviewBody(): Buffer {
  const attributes = encodeMessage([
    [1, 'shop'],
    [2, 'get'],
    [3, ''],
    [4, ''],
    [5, 'pods'],
    [6, ''],
    [7, ''],
  ]);
  const raw = encodeMessage([
    [1, Buffer.alloc(0)],
    [2, encodeMessage([[1, attributes]])],
    [3, encodeMessage([[1, false]])],
  ]);
  return wrap('authorization.k8s.io/v1', 'SelfSubjectAccessReview', raw);
}

describe('the protobuf envelope and the self reviews', () => {
  test('an access review decodes to the JSON it stands for', () => {
    assert.deepEqual(decodeReview('SelfSubjectAccessReview', accessReviewBody()), {
      apiVersion: 'authorization.k8s.io/v1',
      kind: 'SelfSubjectAccessReview',
      spec: {
        resourceAttributes: {
          namespace: 'shop',
          verb: 'get',
          group: '',
          version: '',
          resource: 'pods',
          subresource: '',
          name: '',
        },
      },
    });
  });

  test('a rules review: its namespace; another kind in the envelope is refused by name', () => {
    const body = wrap(
      'authorization.k8s.io/v1',
      'SelfSubjectRulesReview',
      encodeMessage([[2, encodeMessage([[1, 'shop']])]]),
    );
    assert.deepEqual(decodeReview('SelfSubjectRulesReview', body).spec, { namespace: 'shop' });
    assert.throws(
      () => decodeReview('SelfSubjectAccessReview', body),
      /is a SelfSubjectRulesReview, not a SelfSubjectAccessReview/,
    );
  });

  test('answers round-trip: allowed and reason, rules, a user with groups and extra', () => {
    const access = encodeReview({
      kind: 'SelfSubjectAccessReview',
      apiVersion: 'authorization.k8s.io/v1',
      spec: { resourceAttributes: { verb: 'get', resource: 'pods', namespace: 'shop' } },
      status: { allowed: false, denied: true, reason: 'no rule' },
    });
    const unwrapped = unwrap(access);
    assert.equal(unwrapped.kind, 'SelfSubjectAccessReview');
    const status = decodeMessage(unwrapped.raw, {
      3: [
        'status',
        {
          message: { 1: ['allowed', 'bool'], 2: ['reason', 'string'], 4: ['denied', 'bool'] },
        },
      ],
    }).status;
    assert.deepEqual(status, { allowed: false, reason: 'no rule', denied: true });

    const rules = unwrap(
      encodeReview({
        kind: 'SelfSubjectRulesReview',
        apiVersion: 'authorization.k8s.io/v1',
        spec: { namespace: 'shop' },
        status: {
          resourceRules: [{ verbs: ['get', 'list'], apiGroups: [''], resources: ['pods', 'pods/log'] }],
          nonResourceRules: [{ verbs: ['get'], nonResourceURLs: ['/api'] }],
          incomplete: false,
        },
      }),
    );
    const rule: Schema = { 1: ['verbs', 'strings'], 2: ['apiGroups', 'strings'], 3: ['resources', 'strings'] };
    const decoded = decodeMessage(rules.raw, {
      3: ['status', { message: { 1: ['resourceRule', { message: rule }] } }],
    }).status as { resourceRule: unknown };
    assert.deepEqual(decoded.resourceRule, {
      verbs: ['get', 'list'],
      apiGroups: [''],
      resources: ['pods', 'pods/log'],
    });

    const who = unwrap(
      encodeReview({
        kind: 'SelfSubjectReview',
        apiVersion: 'authentication.k8s.io/v1',
        status: {
          userInfo: {
            username: 'cas:ann',
            groups: ['cas:role:dev', 'system:authenticated'],
            extra: { 'cas-key': ['7'] },
          },
        },
      }),
    );
    const user = decodeMessage(who.raw, {
      2: [
        'status',
        {
          message: {
            1: [
              'userInfo',
              {
                message: {
                  1: ['username', 'string'],
                  3: ['groups', 'strings'],
                  4: [
                    'extra',
                    { message: { 1: ['key', 'string'], 2: ['value', { message: { 1: ['items', 'strings'] } }] } },
                  ],
                },
              },
            ],
          },
        },
      ],
    }).status;
    assert.deepEqual(user, {
      userInfo: {
        username: 'cas:ann',
        groups: ['cas:role:dev', 'system:authenticated'],
        extra: { key: 'cas-key', value: { items: ['7'] } },
      },
    });
  });

  test('malformed bodies are refused with a reason, never read past their end', () => {
    const cases: Array<[Buffer, RegExp]> = [
      [Buffer.from('{"kind":"SelfSubjectAccessReview"}'), /must begin with the Kubernetes envelope/],
      [Buffer.from([0x6b, 0x38, 0x73, 0x00, 0x0a, 0x7f]), /longer than the body/],
      [Buffer.from([0x6b, 0x38, 0x73, 0x00, 0x0a]), /ends inside a number/],
      [Buffer.from([0x6b, 0x38, 0x73, 0x00, 0x0b]), /wire type 3/],
      [Buffer.from([0x6b, 0x38, 0x73, 0x00, 0x02, 0x00]), /numbered 0/],
      [Buffer.from([0x6b, 0x38, 0x73, 0x00, 0x12, 0xff, 0xff, 0xff, 0xff, 0x0f]), /longer than the body/],
      [Buffer.concat([Buffer.from([0x6b, 0x38, 0x73, 0x00]), Buffer.alloc(11, 0xff)]), /longer than 10 bytes/],
      [Buffer.concat([Buffer.from([0x6b, 0x38, 0x73, 0x00]), encodeMessage([[3, 'gzip']])]), /content encoding/],
      [
        Buffer.concat([Buffer.from([0x6b, 0x38, 0x73, 0x00]), encodeMessage([[2, Buffer.from([0x0a, 0x01, 0xff])]])]),
        /not a/,
      ],
    ];
    for (const [body, reason] of cases) {
      assert.throws(
        () => decodeReview('SelfSubjectAccessReview', body),
        (error: unknown) => error instanceof ProtobufError && reason.test(error.message),
        `${body.toString('hex')} → ${reason}`,
      );
    }
    // Invalid UTF-8 in a string field is named.
    const bad = wrap(
      'authorization.k8s.io/v1',
      'SelfSubjectRulesReview',
      encodeMessage([[2, encodeMessage([[1, Buffer.from([0xc3, 0x28])]])]]),
    );
    assert.throws(() => decodeReview('SelfSubjectRulesReview', bad), /namespace is not valid UTF-8/);
    // Too many fields in one message.
    assert.throws(
      () => readFields(Buffer.from(Array.from({ length: 1025 }, () => [0x08, 0x00]).flat())),
      /more than 1024 fields/,
    );
  });

  test('Accept: protobuf when it comes before JSON or any type, else JSON', () => {
    assert.equal(prefersProtobuf('application/vnd.kubernetes.protobuf, */*'), true);
    assert.equal(prefersProtobuf('application/vnd.kubernetes.protobuf;q=1,application/json'), true);
    assert.equal(prefersProtobuf('application/json, application/vnd.kubernetes.protobuf'), false);
    assert.equal(prefersProtobuf('*/*'), false);
    assert.equal(prefersProtobuf(undefined), false);
    assert.equal(prefersProtobuf('application/yaml'), false);
  });
});

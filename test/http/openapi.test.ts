import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { after, before, describe, test } from 'node:test';
import { startTestApp, type TestApp } from '../support/app.js';
import { request } from '../support/http.js';

/** CONTRACT §8: generated clients name their methods after these. */
const CONTRACT_OPERATION_IDS = [
  'createSuperUser',
  'listUsers',
  'createUser',
  'updateUser',
  'deleteUser',
  'resetUserPassword',
  'setUserEnabled',
  'setUserRoles',
  'listRoles',
  'login',
  'logout',
  'getCurrentUser',
  'listApiKeys',
  'createApiKey',
  'deleteApiKey',
  'listClusters',
  'createCluster',
  'updateCluster',
  'deleteCluster',
  'importClusters',
  'listAvailableClusters',
  'listResources',
  'getResource',
  'createResource',
  'replaceResource',
  'patchResource',
  'deleteResource',
  'listObjectEvents',
];
const HEALTH_OPERATION_IDS = ['getHealth', 'getReadiness'];
const PUBLIC_OPERATIONS = new Set(['createSuperUser', 'login', ...HEALTH_OPERATION_IDS]);

describe('OpenAPI document', () => {
  let t: TestApp;
  let served: any;
  before(async () => {
    t = await startTestApp();
    const res = await request(t.app, 'GET', '/api/docs/openapi.json');
    assert.equal(res.status, 200);
    served = res.body;
  });
  after(() => t.close());

  test('the committed openapi.json equals the served document (regenerate with `npm run openapi`)', async () => {
    const committed = JSON.parse(await readFile(new URL('../../../openapi.json', import.meta.url), 'utf8'));
    assert.deepEqual(served, committed);
  });

  test('every operation: a CONTRACT operationId (unique), a tag, security unless public, documented errors', () => {
    assert.match(served.openapi, /^3\./);
    const ids: string[] = [];
    for (const [path, item] of Object.entries<any>(served.paths)) {
      for (const [method, op] of Object.entries<any>(item)) {
        const label = `${method.toUpperCase()} ${path}`;
        ids.push(op.operationId);
        assert.ok(
          [...CONTRACT_OPERATION_IDS, ...HEALTH_OPERATION_IDS].includes(op.operationId),
          `${label}: ${op.operationId}`,
        );
        assert.ok(op.tags?.length > 0, `${label} has a tag`);
        const codes = Object.keys(op.responses);
        assert.ok(
          codes.some((c) => /^2/.test(c)),
          `${label} documents success`,
        );
        if (PUBLIC_OPERATIONS.has(op.operationId)) {
          assert.ok(!op.security || op.security.length === 0, `${label} is public`);
        } else {
          assert.deepEqual(op.security, [{ apiKey: [] }, { bearer: [] }, { session: [] }], `${label} security`);
          assert.ok(codes.includes('401') && codes.includes('403'), `${label} documents 401 and 403`);
        }
        if (op.operationId !== 'getHealth') {
          assert.ok(
            codes.some((c) => /^[45]/.test(c)),
            `${label} documents its errors`,
          );
        }
        if (['post', 'put', 'patch'].includes(method) && op.operationId !== 'logout') {
          assert.ok(op.requestBody, `${label} documents its body`);
        }
      }
    }
    assert.equal(new Set(ids).size, ids.length, 'operationIds are unique');
    for (const id of CONTRACT_OPERATION_IDS) assert.ok(ids.includes(id), `missing ${id}`);
    for (const scheme of ['apiKey', 'bearer', 'session']) assert.ok(served.components.securitySchemes[scheme], scheme);
  });

  test('request schemas carry the validation rules', () => {
    const create = served.components.schemas.CreateUserDto;
    assert.deepEqual(create.required.sort(), ['password', 'username']);
    assert.equal(create.properties.username.minLength, 3);
    assert.equal(create.properties.username.maxLength, 64);
    assert.equal(create.properties.password.minLength, 8);
    const list = served.paths['/api/v1/admin/users']?.get ?? served.paths['/api/v1/admin/users/']?.get;
    const names = list.parameters.map((p: { name: string }) => p.name).sort();
    assert.deepEqual(names, ['page', 'role', 'search', 'size', 'sortBy', 'sortOrder']);
  });
});

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { shouldAudit } from '../../src/audit/audit-row.js';

test('which calls become audit rows', () => {
  const cases: Array<[string, number, boolean, boolean]> = [
    // method, status, anonymous → recorded
    ['POST', 201, false, true],
    ['PUT', 200, false, true],
    ['PATCH', 409, false, true],
    ['DELETE', 504, false, true],
    ['POST', 400, false, true],
    ['GET', 200, false, false],
    ['HEAD', 200, false, false],
    ['OPTIONS', 204, false, false],
    ['GET', 403, false, true],
    ['GET', 401, false, true],
    ['POST', 401, false, true], // a failed login names the username tried
    ['POST', 401, true, false], // no credentials, no username: nothing to attribute
    ['GET', 401, true, false],
    ['POST', 201, true, true], // first-time setup
    ['POST', 400, true, false],
    ['POST', 413, true, false],
    ['GET', 403, true, true],
  ];
  for (const [method, statusCode, anonymous, expected] of cases) {
    assert.equal(
      shouldAudit({ method, statusCode, anonymous }),
      expected,
      `${method} ${statusCode} anonymous=${anonymous}`,
    );
  }
});

// Generates the typed TypeScript client (fetch-based, @hey-api/openapi-ts) from the committed openapi.json
// into test/client/generated/. `npm run client`; the end-to-end test test/e2e/client-scenario.test.ts drives
// the service through it, and test/http/openapi-client.test.ts fails when the committed client is stale.
// @hey-api/openapi-ts is pinned to 0.95.0, its last release that supports Node 20 (test/unit/engines.test.ts).
// Usage: node scripts/generate-client.mjs [output directory]
import { createClient } from '@hey-api/openapi-ts';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const output = process.argv[2] ?? `${root}test/client/generated`;
await createClient({
  input: `${root}openapi.json`,
  output: { path: output, postProcess: [] },
  plugins: ['@hey-api/client-fetch', '@hey-api/typescript', '@hey-api/sdk'],
  logs: { level: 'silent' },
});
console.log(`wrote ${output}`);

// Writes the served OpenAPI document to openapi.json at the repository root (run after `npm run build`).
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createApp } from '../dist/app.js';
import { loadConfig } from '../dist/config/config.js';

const dataDir = await mkdtemp(join(tmpdir(), 'cas-openapi-'));
const app = await createApp(loadConfig({ CAS_DATA_DIR: dataDir, LOG_LEVEL: 'silent' }));
const res = await app.inject({ method: 'GET', url: '/api/docs/openapi.json' });
await writeFile(new URL('../openapi.json', import.meta.url), JSON.stringify(JSON.parse(res.body), null, 2) + '\n');
await app.close();
await rm(dataDir, { recursive: true, force: true });
console.log('wrote openapi.json');

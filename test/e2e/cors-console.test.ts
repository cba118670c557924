/**
 * A console on another origin, as a browser runs it: headless Chromium loads a page from a second
 * origin listed in CORS_ORIGINS, and its script creates, replaces, patches (with each Kubernetes patch
 * content type) and deletes a ConfigMap on the real control plane through the service.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { BrowserContext } from 'playwright-core';
import { kubeRequest } from '../harness/control-plane.js';
import { CHROMIUM, launchChromium } from '../support/browser.js';
import { type ClusterApp, startClusterApp } from '../support/cluster-app.js';

describe(
  'a console on a second origin (CORS) in headless Chromium',
  { skip: existsSync(CHROMIUM) ? false : `${CHROMIUM} missing` },
  () => {
    let c: ClusterApp;
    let consoleServer: http.Server;
    let consoleOrigin: string;
    let profile: string;
    let browser: BrowserContext;
    const ns = `cors-${process.pid}`;

    before(async () => {
      consoleServer = http.createServer((_req, res) => {
        res.setHeader('content-type', 'text/html');
        res.end('<!doctype html><title>console</title><p>console</p>');
      });
      await new Promise<void>((resolve) => consoleServer.listen(0, '127.0.0.1', resolve));
      // The same host with another port is another origin.
      consoleOrigin = `http://localhost:${(consoleServer.address() as AddressInfo).port}`;
      c = await startClusterApp({ cluster: 'cors', namespace: ns, listen: true, env: { CORS_ORIGINS: consoleOrigin } });
      profile = await mkdtemp(join(tmpdir(), 'cas-chromium-cors-'));
      browser = await launchChromium(profile);
    });
    after(async () => {
      await browser?.close();
      if (c) {
        await kubeRequest(c.cp, 'DELETE', `/api/v1/namespaces/${ns}`);
        await c.t.close();
      }
      consoleServer?.close();
      if (profile) await rm(profile, { recursive: true, force: true });
    });

    test(
      'PUT, PATCH (each patch content type) and DELETE with authorization and x-cluster-name work cross-origin',
      {
        timeout: 120_000,
      },
      async () => {
        const page = browser.pages()[0] ?? (await browser.newPage());
        await page.goto(`${consoleOrigin}/`, { waitUntil: 'load' });
        const results = await page.evaluate(
          async ({ base, token, ns }) => {
            const headers = (contentType: string) => ({
              authorization: `Bearer ${token}`,
              'content-type': contentType,
              'x-cluster-name': 'cors',
            });
            const url = `${base}/api/v1/configmaps/${ns}/cm`;
            const out: Record<string, unknown> = {};
            const call = async (name: string, method: string, target: string, contentType: string, body?: unknown) => {
              const res = await fetch(target, {
                method,
                headers: headers(contentType),
                body: body === undefined ? undefined : JSON.stringify(body),
              });
              const json = await res.json();
              out[name] = { status: res.status, requestId: res.headers.get('x-request-id'), body: json };
              return json;
            };
            await call('create', 'POST', `${base}/api/v1/configmaps/${ns}`, 'application/json', {
              metadata: { name: 'cm' },
              data: { a: '1', list: 'x' },
            });
            const read = await call('get', 'GET', url, 'application/json');
            await call('replace', 'PUT', url, 'application/json', { ...(read as object), data: { a: '2' } });
            await call('merge', 'PATCH', url, 'application/merge-patch+json', { data: { b: '3' } });
            await call('json', 'PATCH', url, 'application/json-patch+json', [
              { op: 'add', path: '/data/c', value: '4' },
            ]);
            await call('strategic', 'PATCH', url, 'application/strategic-merge-patch+json', { data: { d: '5' } });
            await call('contradiction', 'PATCH', `${url}?patchType=merge`, 'application/json-patch+json', [
              { op: 'add', path: '/data/e', value: '6' },
            ]);
            await call('delete', 'DELETE', `${url}?wait=false`, 'application/json');
            return out;
          },
          { base: c.base, token: c.admin, ns },
        );
        const status = (name: string) => (results[name] as { status: number }).status;
        assert.equal(status('create'), 201, JSON.stringify(results.create));
        assert.equal(status('replace'), 200, JSON.stringify(results.replace));
        assert.equal(status('merge'), 200, JSON.stringify(results.merge));
        assert.equal(
          status('json'),
          200,
          `a JSON patch named by its Content-Type alone: ${JSON.stringify(results.json)}`,
        );
        assert.equal(status('strategic'), 200, JSON.stringify(results.strategic));
        const contradiction = results.contradiction as { status: number; body: { message: string[] } };
        assert.equal(contradiction.status, 400);
        assert.match(contradiction.body.message.join(' '), /patchType 'merge' contradicts Content-Type/);
        assert.ok([200, 202].includes(status('delete')), JSON.stringify(results.delete));
        // The browser let the script read the exposed request id.
        assert.match(String((results.get as { requestId: string }).requestId), /^[0-9a-f-]{36}$/);
        const patched = (results.strategic as { body: { data: Record<string, string> } }).body.data;
        assert.deepEqual(patched, { a: '2', b: '3', c: '4', d: '5' });
      },
    );

    test('the preflight names every method and the headers a console sends; another origin gets no CORS headers', async () => {
      const preflight = await fetch(`${c.base}/api/v1/configmaps/${ns}/cm`, {
        method: 'OPTIONS',
        headers: {
          origin: consoleOrigin,
          'access-control-request-method': 'PATCH',
          'access-control-request-headers': 'authorization,content-type,x-cluster-name',
        },
      });
      assert.ok(preflight.status < 300, String(preflight.status));
      assert.equal(preflight.headers.get('access-control-allow-origin'), consoleOrigin);
      const methods = String(preflight.headers.get('access-control-allow-methods'));
      for (const m of ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'])
        assert.match(methods, new RegExp(`\\b${m}\\b`));
      const allowed = String(preflight.headers.get('access-control-allow-headers')).toLowerCase();
      for (const h of ['authorization', 'content-type', 'x-cluster-name', 'last-event-id', 'x-request-id']) {
        assert.ok(allowed.includes(h), `${h} in ${allowed}`);
      }
      const other = await fetch(`${c.base}/api/v1/configmaps/${ns}/cm`, {
        method: 'OPTIONS',
        headers: { origin: 'http://elsewhere.example', 'access-control-request-method': 'PATCH' },
      });
      assert.equal(other.headers.get('access-control-allow-origin'), null);
    });
  },
);

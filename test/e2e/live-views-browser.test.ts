/**
 * A console on a second origin in headless Chromium, with live views as a browser opens them:
 * - `EventSource` cannot send `x-cluster-name`: it names the cluster with `?cluster=` and receives a watch event;
 * - over the service's own TLS, ten live views (SSE read with fetch(), bearer token) all load and a plain GET
 *   answers in < 200 ms meanwhile: HTTP/2 carries them on one connection, where HTTP/1.1's six connections per
 *   host left views 7–10 and the GET waiting.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { createHash, X509Certificate } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { BrowserContext, Page } from 'playwright-core';
import { makeCertificates } from '../harness/certs.js';
import { kubeRequest } from '../harness/control-plane.js';
import { CHROMIUM, launchChromium } from '../support/browser.js';
import { type ClusterApp, startClusterApp } from '../support/cluster-app.js';
import { createUser } from '../support/factories.js';

/** A static page on its own origin: the console. */
async function consolePage(): Promise<{ server: http.Server; origin: string }> {
  const server = http.createServer((_req, res) => {
    res.setHeader('content-type', 'text/html');
    res.end('<!doctype html><title>console</title><p>console</p>');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, origin: `http://localhost:${(server.address() as AddressInfo).port}` };
}

describe(
  'live views in a console on a second origin (headless Chromium)',
  {
    skip: existsSync(CHROMIUM) ? false : `${CHROMIUM} missing`,
  },
  () => {
    describe('EventSource names the cluster with ?cluster=', () => {
      let c: ClusterApp;
      let console_: { server: http.Server; origin: string };
      let profile: string;
      let browser: BrowserContext;
      let page: Page;
      const ns = `es-cluster-${process.pid}`;

      before(async () => {
        console_ = await consolePage();
        c = await startClusterApp({
          cluster: 'es-cluster',
          namespace: ns,
          listen: true,
          env: { CORS_ORIGINS: console_.origin },
        });
        profile = await mkdtemp(join(tmpdir(), 'cas-chromium-es-'));
        browser = await launchChromium(profile);
        page = browser.pages()[0] ?? (await browser.newPage());
        await page.goto(`${console_.origin}/`, { waitUntil: 'load' });
      });
      after(async () => {
        await browser?.close();
        if (c) {
          await kubeRequest(c.cp, 'DELETE', `/api/v1/namespaces/${ns}`);
          await c.t.close();
        }
        console_?.server.close();
        if (profile) await rm(profile, { recursive: true, force: true });
      });

      test(
        'signed in with the session cookie (same site), EventSource with ?cluster= receives the watch event',
        {
          timeout: 60_000,
        },
        async () => {
          // localhost:<service> and localhost:<console> are two origins of one site: the Lax cookie goes along.
          const base = c.base.replace('127.0.0.1', 'localhost');
          const { username, password } = await createUser(c.t, { role: 'admin' });
          const opened = page.evaluate(
            async ({ base, ns, username, password }) => {
              const login = await fetch(`${base}/api/v1/auth/login`, {
                method: 'POST',
                credentials: 'include',
                headers: { 'content-type': 'application/json' },
                body: JSON.stringify({ username, password }),
              });
              if (login.status !== 200) return { error: `login ${login.status} ${await login.text()}` };
              return await new Promise<{ error?: string; type?: string; name?: string }>((resolve) => {
                const source = new EventSource(`${base}/api/v1/configmaps/${ns}?watch=true&cluster=es-cluster`, {
                  withCredentials: true,
                });
                const timer = setTimeout(() => (source.close(), resolve({ error: 'no event within 20 s' })), 20_000);
                source.addEventListener('error', () => {
                  if (source.readyState === EventSource.CLOSED) {
                    clearTimeout(timer);
                    resolve({ error: 'the stream was refused' });
                  }
                });
                source.addEventListener('ADDED', (event) => {
                  const { object } = JSON.parse((event as MessageEvent).data as string) as {
                    object: { metadata: { name: string } };
                  };
                  if (object.metadata.name !== 'made-after') return;
                  clearTimeout(timer);
                  source.close();
                  resolve({ type: event.type, name: object.metadata.name });
                });
              });
            },
            { base, ns, username, password },
          );
          await sleep(1_500);
          const made = await kubeRequest(c.cp, 'POST', `/api/v1/namespaces/${ns}/configmaps`, {
            metadata: { name: 'made-after' },
          });
          assert.equal(made.status, 201);
          const event = await opened;
          assert.equal(event.error, undefined, JSON.stringify(event));
          assert.equal(event.name, 'made-after');
        },
      );
    });

    describe('ten live views over the service’s TLS', () => {
      let c: ClusterApp;
      let console_: { server: http.Server; origin: string };
      let dir: string;
      let browser: BrowserContext;
      let page: Page;
      const ns = `views-h2-${process.pid}`;

      before(async () => {
        console_ = await consolePage();
        dir = await mkdtemp(join(tmpdir(), 'cas-chromium-h2-'));
        const pki = await makeCertificates(dir, 'views-h2');
        c = await startClusterApp({
          cluster: 'views-h2',
          namespace: ns,
          listen: true,
          env: { CORS_ORIGINS: console_.origin, CAS_TLS_CERT_FILE: pki.serverCert, CAS_TLS_KEY_FILE: pki.serverKey },
        });
        await kubeRequest(c.cp, 'POST', `/api/v1/namespaces/${ns}/configmaps`, { metadata: { name: 'seen' } });
        // The test CA is not the system's: Chromium is told to trust the service's key. (With
        // --ignore-certificate-errors it keeps the connection marked as failing and speaks HTTP/1.1 on it.)
        const spki = createHash('sha256')
          .update(new X509Certificate(await readFile(pki.serverCert)).publicKey.export({ type: 'spki', format: 'der' }))
          .digest('base64');
        browser = await launchChromium(join(dir, 'profile'), {
          args: [`--ignore-certificate-errors-spki-list=${spki}`],
        });
        page = browser.pages()[0] ?? (await browser.newPage());
        await page.goto(`${console_.origin}/`, { waitUntil: 'load' });
      });
      after(async () => {
        await browser?.close();
        if (c) {
          await kubeRequest(c.cp, 'DELETE', `/api/v1/namespaces/${ns}`);
          await c.t.close();
        }
        console_?.server.close();
        if (dir) await rm(dir, { recursive: true, force: true });
      });

      test(
        'every view loads, and a plain GET answers in < 200 ms while they stay open',
        { timeout: 90_000 },
        async (ctx) => {
          const base = c.base.replace('http://127.0.0.1', 'https://localhost');
          // What the service saw: each request's HTTP version.
          const versions = new Map<string, number>();
          const server = c.t.app.getHttpServer() as import('node:events').EventEmitter;
          const count = (req: { httpVersion: string }) =>
            versions.set(req.httpVersion, (versions.get(req.httpVersion) ?? 0) + 1);
          server.on('request', count);
          const result = await page.evaluate(
            async ({ base, token, ns }) => {
              const headers = { authorization: `Bearer ${token}`, 'x-cluster-name': 'views-h2' };
              const controller = new AbortController();
              // Once before the views, so that the timed call below is one request (its preflight is kept: Max-Age).
              const plainGet = () =>
                fetch(`${base}/api/v1/clusters`, { headers: { authorization: `Bearer ${token}` } }).then(
                  (r) => r.status,
                );
              await plainGet();
              // A live view: its watch as Server-Sent Events, loaded once its first event has come.
              const view = async (i: number) => {
                const res = await fetch(`${base}/api/v1/configmaps/${ns}?watch=true&labelSelector=view!%3D${i}`, {
                  headers: { ...headers, accept: 'text/event-stream' },
                  signal: controller.signal,
                });
                const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
                let text = '';
                while (!text.includes('event: ADDED')) {
                  const { value, done } = await reader.read();
                  if (done) return false;
                  text += value;
                }
                return true;
              };
              const deadline = (ms: number) =>
                new Promise<'timeout'>((resolve) => setTimeout(() => resolve('timeout'), ms));
              const views = Array.from({ length: 10 }, (_, i) => view(i).catch(() => false));
              const loaded = await Promise.race([Promise.all(views), deadline(20_000)]);
              const started = performance.now();
              const plain = await Promise.race([plainGet(), deadline(10_000)]);
              const ms = performance.now() - started;
              controller.abort();
              return { loaded, plain, ms };
            },
            { base, token: c.admin, ns },
          );
          assert.notEqual(result.loaded, 'timeout', `not every view loaded: ${JSON.stringify(result)}`);
          assert.deepEqual(result.loaded, Array(10).fill(true));
          assert.equal(result.plain, 200, JSON.stringify(result));
          assert.ok(result.ms < 200, `the plain GET took ${result.ms.toFixed(0)} ms`);
          server.off('request', count);
          ctx.diagnostic(
            `plain GET with 10 views open: ${Math.round(result.ms)} ms; requests by HTTP version: ${JSON.stringify([...versions])}`,
          );
          assert.deepEqual([...versions.keys()], ['2.0'], JSON.stringify([...versions]));
        },
      );
    });
  },
);

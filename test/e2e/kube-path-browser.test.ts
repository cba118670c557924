/**
 * A pod's page opened through the Kubernetes path never runs with the service's origin, in headless
 * Chromium against the real apiserver's pod proxy. The pod is a page server on a non-loopback address
 * of this machine (the apiserver refuses to proxy to loopback), named as the pod's `status.podIP`.
 * Its page loads `app.js`, which would call the service's API with the browser's session.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { networkInterfaces, tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { BrowserContext, Page } from 'playwright-core';
import { kubeRequest } from '../harness/control-plane.js';
import { startKubelet, type Kubelet } from '../harness/kubelet.js';
import { CHROMIUM, launchChromium } from '../support/browser.js';
import { type ClusterApp, startClusterApp } from '../support/cluster-app.js';
import { createUser, DEFAULT_PASSWORD } from '../support/factories.js';
import { request } from '../support/http.js';

/** An IPv4 address of this machine the apiserver will proxy to (not loopback, not link-local). */
const podAddress = Object.values(networkInterfaces())
  .flat()
  .find((a) => a && a.family === 'IPv4' && !a.internal && !a.address.startsWith('169.254.'))?.address;

/** What the pod's script does when it runs: marks the page and calls the service's API with the page's session. */
const APP_JS = `window.ran = true;
document.documentElement.dataset.ran = 'yes';
fetch('/api/v1/auth/me').then((r) => r.text()).then((t) => { document.documentElement.dataset.me = t; });`;

describe(
  "a pod's page through the Kubernetes path in headless Chromium",
  {
    skip: !existsSync(CHROMIUM)
      ? `${CHROMIUM} missing`
      : !podAddress && 'no non-loopback IPv4 address for a pod the apiserver proxies to',
  },
  () => {
    const ns = `kube-page-${process.pid}`;
    const nodeName = `kube-page-node-${process.pid}`;
    let c: ClusterApp;
    let kubelet: Kubelet;
    let pod: http.Server;
    let podBase: string;
    /** Requests for the pod's page and script its server received (what the browser asks of it directly is left out). */
    const served: string[] = [];
    let profile: string;
    let browser: BrowserContext;
    let user: { username: string };
    let pagePath: string;

    before(async () => {
      c = await startClusterApp({ cluster: 'alpha', namespace: ns, listen: true });
      pod = http.createServer((req, res) => {
        if (req.url === '/index.html' || req.url === '/app.js') served.push(req.url);
        if (req.url === '/app.js') {
          res.setHeader('content-type', 'text/javascript');
          return res.end(APP_JS);
        }
        res.setHeader('content-type', 'text/html');
        if (req.url === '/link.html') return res.end(`<!doctype html><a id="go" href="${c.base}${pagePath}">open</a>`);
        res.end('<!doctype html><title>pod page</title><script src="app.js"></script><p>hello from the pod</p>');
      });
      await new Promise<void>((resolve) => pod.listen(0, podAddress, resolve));
      const port = (pod.address() as AddressInfo).port;
      podBase = `http://${podAddress}:${port}`;
      pagePath = `/api/v1/clusters/alpha/k8s/api/v1/namespaces/${ns}/pods/web:${port}/proxy/index.html`;

      kubelet = await startKubelet(c.cp, nodeName);
      const created = await kubeRequest(c.cp, 'POST', `/api/v1/namespaces/${ns}/pods`, {
        metadata: { name: 'web' },
        spec: {
          nodeName,
          automountServiceAccountToken: false,
          containers: [{ name: 'app', image: 'example.invalid/web', ports: [{ containerPort: port }] }],
        },
      });
      assert.equal(created.status, 201, JSON.stringify(created.body));
      const status = await kubeRequest(
        c.cp,
        'PATCH',
        `/api/v1/namespaces/${ns}/pods/web/status`,
        {
          status: { phase: 'Running', podIP: podAddress, podIPs: [{ ip: podAddress }] },
        },
        { contentType: 'application/merge-patch+json' },
      );
      assert.equal(status.status, 200, JSON.stringify(status.body));
      // The apiserver proxies to the pod: the page is there (the admin's bearer credential, outside a browser).
      const direct = await c.t.app.inject({
        method: 'GET',
        url: pagePath,
        headers: { authorization: `Bearer ${c.admin}` },
      });
      assert.equal(direct.statusCode, 200, direct.body);
      assert.match(direct.body, /hello from the pod/);
      served.length = 0;

      user = await createUser(c.t, { role: 'admin' });
      profile = await mkdtemp(join(tmpdir(), 'cas-chromium-kube-page-'));
      browser = await launchChromium(profile);
    });

    after(async () => {
      await browser?.close();
      await kubelet?.stop();
      if (c) {
        await kubeRequest(c.cp, 'DELETE', `/api/v1/namespaces/${ns}`).catch(() => undefined);
        await c.t.close();
      }
      pod?.close();
      if (profile) await rm(profile, { recursive: true, force: true });
    });

    /** What the page's own script would have left behind, and what its origin is. */
    const traces = (page: Page) =>
      page.evaluate<{ origin: string; ran: boolean | null; marked: string | null }>(
        '({ origin: window.origin, ran: window.ran ?? null, marked: document.documentElement.dataset.ran ?? null })',
      );

    test('an administrator signed in (cookie) follows a link to the pod page: 401 Status, nothing proxied, no script', async () => {
      const page = await browser.newPage();
      await page.goto(`${c.base}/api/v1/healthz`);
      const signedIn = await page.evaluate(
        async ([username, password]) => {
          const login = await fetch('/api/v1/auth/login', {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ username, password }),
          });
          return [login.status, (await fetch('/api/v1/auth/me')).status];
        },
        [user.username, DEFAULT_PASSWORD],
      );
      assert.deepEqual(signedIn, [200, 200], 'the session cookie works on the service');

      // Another site links to the pod's page: a top-level navigation, which carries the SameSite=Lax cookie.
      await page.goto(`${podBase}/link.html`);
      const [response] = await Promise.all([
        page.waitForResponse((r) => r.url().endsWith('/proxy/index.html')),
        page.click('#go'),
      ]);
      await page.waitForLoadState();
      assert.match(String(await response.request().headerValue('cookie')), /cas_session=/, 'the cookie was sent');
      assert.equal(response.status(), 401);
      assert.match(String(response.headers()['content-security-policy']), /\bsandbox\b/);
      const status = JSON.parse(await response.text());
      assert.deepEqual([status.kind, status.reason, status.code], ['Status', 'Unauthorized', 401]);
      assert.match(status.message, /session cookie is not accepted on the Kubernetes API path/);
      assert.deepEqual(served, [], 'nothing reached the pod through the service');
      assert.deepEqual(await traces(page), { origin: 'null', ran: null, marked: null });
      await page.close();
    });

    test('with a bearer credential the pod page is a download; rendered anyway, it is sandboxed: no script, no origin', async () => {
      const key = await request(c.t.app, 'POST', '/api/v1/auth/apikeys', {
        token: c.admin,
        body: { name: `page-${process.pid}`, roles: ['admin'] },
      });
      assert.equal(key.status, 201, key.text);
      const page = await browser.newPage();
      // A client that adds Authorization to every request, as a header-injecting extension or proxy would.
      await page.setExtraHTTPHeaders({ authorization: `Bearer ${key.body.key}` });
      served.length = 0;
      const [download] = await Promise.all([
        page.waitForEvent('download'),
        page.goto(`${c.base}${pagePath}`).catch(() => undefined),
      ]);
      assert.match(await readFile((await download.path())!, 'utf8'), /hello from the pod/);
      assert.deepEqual(served, ['/index.html'], 'the page was fetched, never rendered: app.js was not asked for');

      // Rendered anyway (something between drops Content-Disposition, nothing else): the CSP sandbox holds.
      await page.route(`${c.base}${pagePath}`, async (route) => {
        const answer = await route.fetch();
        const headers = { ...answer.headers() };
        delete headers['content-disposition'];
        await route.fulfill({ response: answer, headers });
      });
      served.length = 0;
      const response = await page.goto(`${c.base}${pagePath}`);
      assert.equal(response?.status(), 200);
      assert.equal(await page.textContent('p'), 'hello from the pod');
      assert.match(String(response?.headers()['content-security-policy']), /\bsandbox\b/);
      await new Promise((r) => setTimeout(r, 500)); // time for a script that would run
      assert.deepEqual(await traces(page), { origin: 'null', ran: null, marked: null });
      assert.deepEqual(served, ['/index.html'], 'app.js was never fetched');
      const reach = await page.evaluate<{ cookie: string; me: string }>(`(async () => {
        let cookie;
        try {
          cookie = document.cookie;
        } catch (error) {
          cookie = 'refused: ' + error.name;
        }
        const me = await fetch('/api/v1/auth/me').then(
          (r) => 'status ' + r.status,
          (error) => 'refused: ' + error.name,
        );
        return { cookie, me };
      })()`);
      assert.deepEqual(reach, { cookie: 'refused: SecurityError', me: 'refused: TypeError' });
      await page.close();
    });
  },
);

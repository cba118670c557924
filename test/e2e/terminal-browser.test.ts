// Issue 31 in a browser: headless Chromium loads a console page (an origin in CORS_ORIGINS) with
// xterm.js, signs in (the session cookie), opens exec over the REST route's WebSocket, types
// `echo hello`, sees `hello`, resizes, and exits with a code the page shows.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { BrowserContext } from 'playwright-core';
import { kubeRequest } from '../harness/control-plane.js';
import { startKubelet, type Kubelet } from '../harness/kubelet.js';
import { CHROMIUM, launchChromium } from '../support/browser.js';
import { type ClusterApp, startClusterApp } from '../support/cluster-app.js';
import { createUser, DEFAULT_PASSWORD } from '../support/factories.js';
import { request } from '../support/http.js';
import { openShell, serveTerminalPage, untilOnScreen as until } from '../support/terminal-page.js';

describe(
  'a browser terminal: xterm.js in headless Chromium over the REST route',
  { skip: existsSync(CHROMIUM) ? false : `${CHROMIUM} missing` },
  () => {
    const ns = `term-web-${process.pid}`;
    const nodeName = `term-web-node-${process.pid}`;
    let c: ClusterApp;
    let kubelet: Kubelet;
    let pageServer: { origin: string; close(): void };
    let origin: string;
    let profile: string;
    let browser: BrowserContext;
    let user: { username: string };

    before(async () => {
      pageServer = await serveTerminalPage();
      origin = pageServer.origin;
      c = await startClusterApp({ cluster: 'alpha', namespace: ns, listen: true, env: { CORS_ORIGINS: origin } });
      kubelet = await startKubelet(c.cp, nodeName);
      const created = await kubeRequest(c.cp, 'POST', `/api/v1/namespaces/${ns}/pods`, {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name: 'box', namespace: ns },
        spec: {
          nodeName,
          automountServiceAccountToken: false,
          containers: [{ name: 'app', image: 'example.invalid/x' }],
        },
      });
      assert.equal(created.status, 201, JSON.stringify(created.body));
      const role = await request(c.t.app, 'POST', '/api/v1/admin/roles', {
        token: c.admin,
        body: {
          name: 'web-term',
          rules: [{ clusters: ['alpha'], namespaces: [ns], resources: ['pods'], verbs: ['get', 'exec'] }],
        },
      });
      assert.equal(role.status, 201, role.text);
      user = await createUser(c.t, { role: 'web-term' as never });
      profile = await mkdtemp(join(tmpdir(), 'cas-chromium-term-'));
      browser = await launchChromium(profile);
    });

    after(async () => {
      await browser?.close();
      await kubelet?.stop();
      if (c) {
        await kubeRequest(c.cp, 'DELETE', `/api/v1/namespaces/${ns}`).catch(() => undefined);
        await c.t.close();
      }
      pageServer?.close();
      if (profile) await rm(profile, { recursive: true, force: true });
    });

    test('type echo hello, see hello; resize; exit 4 shows on the page', { timeout: 120_000 }, async () => {
      const page = browser.pages()[0] ?? (await browser.newPage());
      await page.goto(`${origin}/`, { waitUntil: 'load' });
      const path = `/api/v1/pods/${ns}/box/exec?cluster=alpha&command=sh&stdin=true&stdout=true&tty=true`;
      await openShell(page, c.base, user.username, DEFAULT_PASSWORD, path);
      await until(page, /\$ $/m);
      await page.keyboard.type('echo hello');
      await page.keyboard.press('Enter');
      const text = await until(page, /^hello$/m);
      assert.match(text, /\$ echo hello\n/);

      await page.evaluate('window.term.resize(100, 30)');
      await page.keyboard.type('size');
      await page.keyboard.press('Enter');
      await until(page, /^100x30$/m);

      await page.keyboard.type('exit 4');
      await page.keyboard.press('Enter');
      await page.waitForFunction("document.getElementById('exit').textContent === 'exit code 4'", undefined, {
        timeout: 15_000,
      });
      await page.waitForFunction('window.closeCode === 1000', undefined, { timeout: 15_000 });
    });
  },
);

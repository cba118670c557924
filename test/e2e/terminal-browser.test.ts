// Issue 31 in a browser: headless Chromium loads a console page (an origin in CORS_ORIGINS) with
// xterm.js, signs in (the session cookie), opens exec over the REST route's WebSocket, types
// `echo hello`, sees `hello`, resizes, and exits with a code the page shows.
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { BrowserContext, Page } from 'playwright-core';
import { kubeRequest } from '../harness/control-plane.js';
import { startKubelet, type Kubelet } from '../harness/kubelet.js';
import { CHROMIUM, launchChromium } from '../support/browser.js';
import { type ClusterApp, startClusterApp } from '../support/cluster-app.js';
import { createUser, DEFAULT_PASSWORD } from '../support/factories.js';
import { request } from '../support/http.js';

const XTERM_JS = readFileSync(join('node_modules', '@xterm', 'xterm', 'lib', 'xterm.js'));
const XTERM_CSS = readFileSync(join('node_modules', '@xterm', 'xterm', 'css', 'xterm.css'));

/** The console page: what README's browser example does, plus hooks for the test. */
const PAGE = `<!doctype html><meta charset="utf-8"><title>terminal</title>
<link rel="stylesheet" href="/xterm.css"><script src="/xterm.js"></script>
<div id="term"></div><p id="exit"></p>
<script>
window.openShell = async (base, username, password, path) => {
  const login = await fetch(base + '/api/v1/auth/login', {
    method: 'POST', credentials: 'include', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ username, password }),
  });
  if (login.status !== 200) throw new Error('login ' + login.status);
  const term = new Terminal({ cols: 80, rows: 24 });
  term.open(document.getElementById('term'));
  window.term = term;
  const ws = new WebSocket(base.replace(/^http/, 'ws') + path, ['v4.channel.k8s.io']);
  ws.binaryType = 'arraybuffer';
  const send = (channel, text) => ws.send(new Uint8Array([channel, ...new TextEncoder().encode(text)]));
  ws.onmessage = (e) => {
    const data = new Uint8Array(e.data);
    if (data[0] === 1 || data[0] === 2) term.write(data.subarray(1));
    if (data[0] === 3) {
      const status = JSON.parse(new TextDecoder().decode(data.subarray(1)));
      const code = status.status === 'Success' ? 0 : status.details.causes.find((c) => c.reason === 'ExitCode').message;
      document.getElementById('exit').textContent = 'exit code ' + code;
    }
  };
  ws.onclose = (e) => (window.closeCode = e.code);
  term.onData((data) => send(0, data));
  term.onResize(({ cols, rows }) => send(4, JSON.stringify({ Width: cols, Height: rows })));
  await new Promise((resolve, reject) => { ws.onopen = resolve; ws.onerror = reject; });
  term.focus();
};
window.screenText = () => {
  const buffer = window.term.buffer.active;
  const lines = [];
  for (let i = 0; i < buffer.length; i++) lines.push(buffer.getLine(i).translateToString(true));
  return lines.join('\\n');
};
</script>`;

describe(
  'a browser terminal: xterm.js in headless Chromium over the REST route',
  { skip: existsSync(CHROMIUM) ? false : `${CHROMIUM} missing` },
  () => {
    const ns = `term-web-${process.pid}`;
    const nodeName = `term-web-node-${process.pid}`;
    let c: ClusterApp;
    let kubelet: Kubelet;
    let pageServer: http.Server;
    let origin: string;
    let profile: string;
    let browser: BrowserContext;
    let user: { username: string };

    before(async () => {
      pageServer = http.createServer((req, res) => {
        const [type, body] =
          req.url === '/xterm.js'
            ? ['text/javascript', XTERM_JS]
            : req.url === '/xterm.css'
              ? ['text/css', XTERM_CSS]
              : ['text/html', Buffer.from(PAGE)];
        res.setHeader('content-type', type);
        res.end(body);
      });
      await new Promise<void>((resolve) => pageServer.listen(0, '127.0.0.1', resolve));
      origin = `http://127.0.0.1:${(pageServer.address() as AddressInfo).port}`;
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

    const screen = (page: Page) => page.evaluate<string>('window.screenText()');
    const until = async (page: Page, what: RegExp) => {
      const deadline = Date.now() + 15_000;
      for (;;) {
        const text = await screen(page);
        if (what.test(text)) return text;
        if (Date.now() > deadline) assert.fail(`${what} not on the screen:\n${text}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    };

    test('type echo hello, see hello; resize; exit 4 shows on the page', { timeout: 120_000 }, async () => {
      const page = browser.pages()[0] ?? (await browser.newPage());
      await page.goto(`${origin}/`, { waitUntil: 'load' });
      const path = `/api/v1/pods/${ns}/box/exec?cluster=alpha&command=sh&stdin=true&stdout=true&tty=true`;
      const args = [c.base, user.username, DEFAULT_PASSWORD, path].map((v) => JSON.stringify(v)).join(', ');
      await page.evaluate(`window.openShell(${args})`);
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

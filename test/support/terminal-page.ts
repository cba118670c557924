import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { Page } from 'playwright-core';

const XTERM_JS = readFileSync(join('node_modules', '@xterm', 'xterm', 'lib', 'xterm.js'));
const XTERM_CSS = readFileSync(join('node_modules', '@xterm', 'xterm', 'css', 'xterm.css'));

/**
 * A console page with xterm.js: what README's browser example does, plus hooks for the tests
 * (`window.screenText()`, the exit code in `#exit`, `window.statusText` — the last error-channel
 * Status — and `window.closeCode` / `window.closeReason`).
 */
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
      window.statusText = new TextDecoder().decode(data.subarray(1));
      const status = JSON.parse(window.statusText);
      const cause = (status.details?.causes ?? []).find((c) => c.reason === 'ExitCode');
      if (status.status === 'Success' || cause) {
        document.getElementById('exit').textContent = 'exit code ' + (cause ? cause.message : 0);
      }
    }
  };
  ws.onclose = (e) => {
    window.closeCode = e.code;
    window.closeReason = e.reason;
  };
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

/** Serves the console page on loopback; its origin is what the service's CORS_ORIGINS must list. */
export async function serveTerminalPage(): Promise<{ origin: string; close(): void }> {
  const server = http.createServer((req, res) => {
    const [type, body] =
      req.url === '/xterm.js'
        ? ['text/javascript', XTERM_JS]
        : req.url === '/xterm.css'
          ? ['text/css', XTERM_CSS]
          : ['text/html', Buffer.from(PAGE)];
    res.setHeader('content-type', type);
    res.end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, close: () => server.close() };
}

/** Signs in to the service at `base` (the session cookie) and opens the terminal WebSocket at `path`. */
export async function openShell(page: Page, base: string, username: string, password: string, path: string) {
  const args = [base, username, password, path].map((v) => JSON.stringify(v)).join(', ');
  await page.evaluate(`window.openShell(${args})`);
}

/** What xterm.js shows, scrollback included. */
export const screenText = (page: Page) => page.evaluate<string>('window.screenText()');

/** Resolves with the screen once `what` is on it; fails after `ms` with what is. */
export async function untilOnScreen(page: Page, what: RegExp, ms = 15_000): Promise<string> {
  const deadline = Date.now() + ms;
  for (;;) {
    const text = await screenText(page);
    if (what.test(text)) return text;
    if (Date.now() > deadline) assert.fail(`${what} not on the screen:\n${text}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

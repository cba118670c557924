// Issue 9, finding 7: receiving a request is bounded in time, kept-alive connections end, and one
// address cannot hold every connection; responses that take longer than the request time-out are
// not cut. Real sockets: these are properties of the listening server.
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe, test } from 'node:test';
import { startTestApp, type TestApp } from '../support/app.js';
import { registerCluster } from '../support/clusters.js';
import { signedIn } from '../support/factories.js';
import { b64, kubeconfigYaml, testCertificates } from '../support/kubeconfigs.js';

interface RawResult {
  text: string;
  closedAfterMs: number;
}

/** Opens a connection, writes `head` and then one byte of `trickle` every `everyMs`, and reads until the server closes it. */
function rawExchange(port: number, head: string, trickle = '', everyMs = 500, giveUpMs = 15_000): Promise<RawResult> {
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const socket = net.connect(port, '127.0.0.1');
    let text = '';
    let i = 0;
    const timer = setInterval(() => {
      if (i < trickle.length && !socket.destroyed) socket.write(trickle[i++]);
    }, everyMs);
    const giveUp = setTimeout(() => {
      socket.destroy();
      reject(new Error(`still open after ${giveUpMs} ms; received ${JSON.stringify(text.slice(0, 200))}`));
    }, giveUpMs);
    socket.on('connect', () => socket.write(head));
    socket.on('data', (d) => (text += d.toString('utf8')));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      clearInterval(timer);
      clearTimeout(giveUp);
      resolve({ text, closedAfterMs: Date.now() - started });
    });
  });
}

function parseResponse(text: string): { status: number; headers: Record<string, string>; body: any } {
  const [head, ...rest] = text.split('\r\n\r\n');
  const [statusLine, ...lines] = head.split('\r\n');
  const headers = Object.fromEntries(
    lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]),
  );
  return { status: Number(statusLine.split(' ')[1]), headers, body: JSON.parse(rest.join('\r\n\r\n')) };
}

describe('time-outs and connection limits (finding 7)', () => {
  let t: TestApp;
  let port: number;
  before(async () => {
    t = await startTestApp({
      env: {
        CAS_REQUEST_TIMEOUT_SECONDS: '2',
        CAS_KEEP_ALIVE_TIMEOUT_SECONDS: '1',
        CAS_MAX_CONNECTIONS_PER_ADDRESS: '16',
        CAS_PASSWORD_HASH_CONCURRENCY: '1',
        CAS_PASSWORD_HASH_QUEUE: '100',
        CAS_LOGIN_MAX_FAILURES_PER_ADDRESS: '100000',
      },
    });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    port = (t.app.getHttpServer().address() as net.AddressInfo).port;
  });
  after(() => t.close());

  test('a body sent one byte at a time gets 408 in the service shape and the connection is closed', async () => {
    const head =
      'POST /api/v1/auth/login HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 60\r\n\r\n';
    const result = await rawExchange(port, head, '{"username":"someone","password":"x"}'.padEnd(60, ' '));
    const res = parseResponse(result.text);
    assert.equal(res.status, 408);
    assert.equal(res.body.statusCode, 408);
    assert.equal(res.body.requestId, res.headers['x-request-id']);
    // 2 s time-out, checked every second; before, the connection stayed open indefinitely.
    assert.ok(result.closedAfterMs < 8000, `closed after ${result.closedAfterMs} ms`);
  });

  test('headers sent one byte at a time get 408 too', async () => {
    const result = await rawExchange(port, 'GET /healthz HTTP/1.1\r\n', 'x-slow: ' + 'a'.repeat(100));
    assert.equal(parseResponse(result.text).status, 408);
    assert.ok(result.closedAfterMs < 8000, `closed after ${result.closedAfterMs} ms`);
  });

  test('an idle kept-alive connection is closed after the keep-alive time-out', async () => {
    const result = await rawExchange(port, 'GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n');
    assert.match(result.text, /^HTTP\/1\.1 200/);
    assert.ok(result.closedAfterMs < 6000, `closed after ${result.closedAfterMs} ms`);
  });

  test('one address may hold only the configured number of connections', async () => {
    const open: net.Socket[] = [];
    try {
      for (let i = 0; i < 16; i++) {
        const s = net.connect(port, '127.0.0.1');
        await new Promise((resolve) => s.once('connect', resolve));
        open.push(s);
      }
      const refused = await rawExchange(port, '');
      const res = parseResponse(refused.text);
      assert.equal(res.status, 503);
      assert.match(res.body.message, /too many connections from one address/);
      assert.equal(res.body.requestId, res.headers['x-request-id']);
    } finally {
      for (const s of open) s.destroy();
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
    const again = await fetch(`http://127.0.0.1:${port}/healthz`);
    assert.equal(again.status, 200);
  });
});

describe('the request time-out bounds receiving a request, not answering it (finding 7)', () => {
  let t: TestApp;
  let port: number;
  let silent: net.Server;
  let adminToken: string;
  const sockets: net.Socket[] = [];
  before(async () => {
    // A cluster that accepts connections and never says a word: the answer (504) comes only after the
    // cluster time-out of 3 s, well after the 2 s request time-out.
    silent = net.createServer((socket) => sockets.push(socket));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    t = await startTestApp({
      env: {
        CAS_REQUEST_TIMEOUT_SECONDS: '2',
        CAS_CLUSTER_REQUEST_TIMEOUT_SECONDS: '3',
        CAS_CLUSTER_PROBE_TIMEOUT_MS: '200',
        CAS_CLUSTER_HEALTH_INTERVAL_SECONDS: '0',
      },
    });
    const { token } = await signedIn(t, 'admin');
    const { caData } = await testCertificates();
    const server = `https://127.0.0.1:${(silent.address() as net.AddressInfo).port}`;
    await registerCluster(
      t,
      token,
      'silent',
      kubeconfigYaml([
        { name: 'c', cluster: { server, 'certificate-authority-data': b64(caData) }, user: { token: 'x' } },
      ]),
    );
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    port = (t.app.getHttpServer().address() as net.AddressInfo).port;
    adminToken = token;
  });
  after(async () => {
    for (const socket of sockets) socket.destroy();
    silent.close();
    await t?.close();
  });

  test('an answer that takes longer than the request time-out is not cut', async () => {
    const started = Date.now();
    const res = await fetch(`http://127.0.0.1:${port}/api/v1/configmaps/default`, {
      headers: { authorization: `Bearer ${adminToken}`, 'x-cluster-name': 'silent' },
    });
    const took = Date.now() - started;
    assert.ok([502, 504].includes(res.status), await res.clone().text());
    assert.match(((await res.json()) as { message: string }).message, /cluster 'silent'/);
    assert.ok(took >= 2900, `answered after ${took} ms, past the 2 s request time-out`);
  });
});

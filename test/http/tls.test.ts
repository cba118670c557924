// The service serves TLS itself when CAS_TLS_CERT_FILE and CAS_TLS_KEY_FILE are set (kubectl sends a
// bearer token only over https), and serves a renewed certificate without a restart.
import assert from 'node:assert/strict';
import { copyFile, mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import http2 from 'node:http2';
import https from 'node:https';
import { connect as tlsConnect, type TLSSocket } from 'node:tls';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { makeCertificates } from '../harness/certs.js';
import { drainOf } from '../../src/common/drain.js';
import { startTestApp, type TestApp } from '../support/app.js';

function get(port: number, path: string, ca: Buffer): Promise<{ status: number; issuer: string }> {
  return new Promise((resolve, reject) => {
    const req = https.get({ host: '127.0.0.1', port, path, ca, agent: false }, (res) => {
      const issuer = String((res.socket as import('node:tls').TLSSocket).getPeerCertificate().issuer.CN);
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode ?? 0, issuer }));
    });
    req.on('error', reject);
  });
}

describe('TLS served by the service', () => {
  let dir: string;
  let t: TestApp;
  let port: number;
  let first: { ca: Buffer; cn: string };
  let second: { ca: Buffer; cn: string };
  let live: { cert: string; key: string };
  let nextPair: { serverCert: string; serverKey: string };

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'cas-tls-'));
    await Promise.all(['one', 'two', 'live'].map((d) => mkdir(join(dir, d))));
    const [one, two] = await Promise.all([
      makeCertificates(join(dir, 'one'), 'tls-one'),
      makeCertificates(join(dir, 'two'), 'tls-two'),
    ]);
    const cn = async (file: string) =>
      new (await import('node:crypto')).X509Certificate(await readFile(file)).subject.replace(/^CN=/, '');
    first = { ca: await readFile(one.caCert), cn: await cn(one.caCert) };
    second = { ca: await readFile(two.caCert), cn: await cn(two.caCert) };
    live = { cert: join(dir, 'live', 'tls.crt'), key: join(dir, 'live', 'tls.key') };
    await copyFile(one.serverCert, live.cert);
    await copyFile(one.serverKey, live.key);
    nextPair = two;
    t = await startTestApp({ env: { CAS_TLS_CERT_FILE: live.cert, CAS_TLS_KEY_FILE: live.key } });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    port = (t.app.getHttpServer().address() as AddressInfo).port;
  });
  after(async () => {
    await t?.close();
    await rm(dir, { recursive: true, force: true });
  });

  test('the service answers over https with the configured certificate', async () => {
    const res = await get(port, '/healthz', first.ca);
    assert.equal(res.status, 200);
    assert.equal(res.issuer, first.cn);
    await assert.rejects(get(port, '/healthz', second.ca), /self.signed|unable to verify|certificate/i);
  });

  test('a renewed certificate is served without a restart; a broken pair keeps the old one', async () => {
    const two = nextPair;
    // Half a renewal (the new certificate with the old key) does not load: the old pair keeps serving.
    await copyFile(two.serverCert, live.cert);
    await sleep(2500);
    assert.equal((await get(port, '/healthz', first.ca)).issuer, first.cn);
    await copyFile(two.serverKey, live.key);
    const deadline = Date.now() + 10_000;
    let issuer = '';
    while (Date.now() < deadline) {
      issuer = await get(port, '/healthz', second.ca).then(
        (res) => res.issuer,
        () => '',
      );
      if (issuer === second.cn) break;
      await sleep(250);
    }
    assert.equal(issuer, second.cn, 'the new certificate is served');
  });
});

/** One GET over HTTP/2 (ALPN h2): status, the protocol the server chose, the body. */
function h2Get(port: number, path: string, ca: Buffer): Promise<{ status: number; alpn: string; body: string }> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(`https://127.0.0.1:${port}`, { ca, servername: 'localhost' });
    session.on('error', reject);
    const stream = session.request({ ':path': path });
    let body = '';
    let status = 0;
    stream.setEncoding('utf8');
    stream.on('response', (headers) => (status = Number(headers[':status'])));
    stream.on('data', (chunk: string) => (body += chunk));
    stream.on('end', () => {
      const alpn = String((session.socket as TLSSocket).alpnProtocol);
      session.close();
      resolve({ status, alpn, body });
    });
    stream.on('error', reject);
  });
}

describe('TLS served by the service: HTTP/2 and HTTP/1.1', () => {
  let dir: string;
  let t: TestApp;
  let port: number;
  let ca: Buffer;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'cas-tls-h2-'));
    const pair = await makeCertificates(dir, 'tls-h2');
    ca = await readFile(pair.caCert);
    t = await startTestApp({ env: { CAS_TLS_CERT_FILE: pair.serverCert, CAS_TLS_KEY_FILE: pair.serverKey } });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    port = (t.app.getHttpServer().address() as AddressInfo).port;
  });
  after(async () => {
    await t?.close();
    await rm(dir, { recursive: true, force: true });
  });

  test('a client offering h2 gets HTTP/2; one offering only http/1.1 (or nothing) gets HTTP/1.1', async () => {
    const h2 = await h2Get(port, '/healthz', ca);
    assert.deepEqual([h2.status, h2.alpn], [200, 'h2']);
    const many = await Promise.all(Array.from({ length: 20 }, () => h2Get(port, '/api/v1/auth/me', ca)));
    assert.deepEqual(new Set(many.map((r) => r.status)), new Set([401]));
    assert.match(many[0].body, /"requestId"/);
    const h1 = await new Promise<{ status: number; version: string }>((resolve, reject) => {
      const options = { host: '127.0.0.1', port, path: '/healthz', ca, agent: false, ALPNProtocols: ['http/1.1'] };
      https
        .get(options as https.RequestOptions, (res) => {
          res.resume();
          res.on('end', () => resolve({ status: res.statusCode ?? 0, version: res.httpVersion }));
        })
        .on('error', reject);
    });
    assert.deepEqual(h1, { status: 200, version: '1.1' });
    assert.equal((await get(port, '/healthz', ca)).status, 200, 'a client without ALPN');
  });

  test('draining: an HTTP/2 call gets the 503 and its connection a GOAWAY', async () => {
    const session = http2.connect(`https://127.0.0.1:${port}`, { ca, servername: 'localhost' });
    const goaway = new Promise<void>((resolve) => session.once('goaway', () => resolve()));
    try {
      void drainOf(t.app).drain(1000);
      const answer = await new Promise<{ status: number; body: string }>((resolve, reject) => {
        const stream = session.request({ ':path': '/api/v1/auth/me' });
        let body = '';
        let status = 0;
        stream.setEncoding('utf8');
        stream.on('response', (headers) => (status = Number(headers[':status'])));
        stream.on('data', (chunk: string) => (body += chunk));
        stream.on('end', () => resolve({ status, body }));
        stream.on('error', reject);
      });
      assert.equal(answer.status, 503);
      assert.match(answer.body, /shutting down/);
      await goaway;
    } finally {
      session.destroy();
    }
  });
});

describe('TLS served by the service: one connection too many from an address', () => {
  let dir: string;
  let t: TestApp;
  let port: number;
  let ca: Buffer;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'cas-tls-cap-'));
    const pair = await makeCertificates(dir, 'tls-cap');
    ca = await readFile(pair.caCert);
    t = await startTestApp({
      env: {
        CAS_TLS_CERT_FILE: pair.serverCert,
        CAS_TLS_KEY_FILE: pair.serverKey,
        CAS_MAX_CONNECTIONS_PER_ADDRESS: '2',
      },
    });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    port = (t.app.getHttpServer().address() as AddressInfo).port;
  });
  after(async () => {
    await t?.close();
    await rm(dir, { recursive: true, force: true });
  });

  test('gets the 503 as an https answer in the service error shape, not plaintext on the TLS socket', async () => {
    const held = await Promise.all(
      [1, 2].map(
        () =>
          new Promise<TLSSocket>((resolve, reject) => {
            const socket = tlsConnect({ host: '127.0.0.1', port, ca, servername: 'localhost' }, () => resolve(socket));
            socket.on('error', reject);
          }),
      ),
    );
    try {
      const res = await new Promise<{ status: number; body: any }>((resolve, reject) => {
        const req = https.get({ host: '127.0.0.1', port, path: '/healthz', ca, agent: false }, (r) => {
          let text = '';
          r.setEncoding('utf8');
          r.on('data', (c: string) => (text += c));
          r.on('end', () => resolve({ status: r.statusCode ?? 0, body: JSON.parse(text) }));
        });
        req.on('error', reject);
      });
      assert.equal(res.status, 503);
      assert.match(res.body.message, /too many connections from one address \(at most 2\)/);
      assert.ok(res.body.requestId);
    } finally {
      for (const socket of held) socket.destroy();
    }
    // The held connections gone, the address may connect again.
    await sleep(200);
    assert.equal((await get(port, '/healthz', ca)).status, 200);
  });
});

// Resumable terminal sessions (docs/TERMINAL.md, Resuming a session): a console's socket cut without a
// close frame, resumed with the offset it counted, through the real apiserver to the test kubelet; the
// output is exactly an uninterrupted run's. Refusals before the upgrade; the window's end; plain clients.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { WebSocket } from 'ws';
import { kubeRequest, waitFor } from '../harness/control-plane.js';
import { startKubelet, type Kubelet } from '../harness/kubelet.js';
import * as kubeletStreams from '../harness/kubelet-streams.js';
import { startClusterApp, type ClusterApp } from '../support/cluster-app.js';
import { createUser, login } from '../support/factories.js';
import { request } from '../support/http.js';
import { podOnNode } from '../support/kube.js';

/** What a console keeps across its connections: the session id, the output (channels 1 and 2) and its count. */
class Screen {
  id = '';
  resumeSeconds = 0;
  /** Bytes received on channels 1 and 2 together: the offset to resume from. */
  bytes = 0;
  readonly output: Array<{ channel: number; payload: Buffer }> = [];
  status = '';
  /** Text messages other than the first (there must be none). */
  strayText = 0;

  text(): string {
    return Buffer.concat(this.output.map((o) => o.payload)).toString('utf8');
  }

  /** The output's bytes and the channel of each byte, as one string to compare. */
  tagged(): string {
    return tagged(this.output);
  }
}

function tagged(parts: Array<{ channel: number; payload: Buffer }>): string {
  const bytes = Buffer.concat(parts.map((p) => p.payload)).toString('utf8');
  const channels = parts.map((p) => String(p.channel).repeat(p.payload.length)).join('');
  return `${bytes}/${channels}`;
}

/** The lines `count N … both` prints: 1…N, the even ones on stderr. */
function counter(n: number): string {
  const parts = Array.from({ length: n }, (_, i) => ({
    channel: (i + 1) % 2 === 0 ? 2 : 1,
    payload: Buffer.from(`${i + 1}\n`),
  }));
  return tagged(parts);
}

interface Connection {
  ws: WebSocket;
  closed: Promise<{ code: number; reason: string }>;
  /** Resolves once the screen's text contains `needle`. */
  waitFor(needle: string, ms?: number): Promise<void>;
  send(text: string): void;
}

type Opened = { ok: true; conn: Connection } | { ok: false; status: number; body: string };

/** Opens a terminal WebSocket as a console does, counting output into `screen`. */
function connect(
  url: string,
  screen: Screen,
  options: { headers?: Record<string, string>; protocol?: string } = {},
): Promise<Opened> {
  const protocol = options.protocol ?? 'v4.channel.k8s.io';
  const base64 = protocol.includes('base64');
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, [protocol], { headers: options.headers, perMessageDeflate: false });
    const waiters: Array<() => void> = [];
    let first = true;
    ws.on('unexpected-response', (_req, res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ ok: false, status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString() }));
    });
    ws.on('error', reject);
    ws.on('message', (raw: Buffer, isBinary: boolean) => {
      if (!isBinary && raw[0] === 0x7b) {
        // The one text message that is not the channel protocol: the session's id, first of all.
        if (!first) screen.strayText++;
        const hello = JSON.parse(raw.toString()) as { session: string; resumeSeconds: number };
        screen.id = hello.session;
        screen.resumeSeconds = hello.resumeSeconds;
      } else {
        const channel = base64 ? raw[0] - 0x30 : raw[0];
        const payload = base64 ? Buffer.from(raw.subarray(1).toString(), 'base64') : raw.subarray(1);
        if (channel === 1 || channel === 2) {
          screen.bytes += payload.length;
          if (payload.length > 0) screen.output.push({ channel, payload: Buffer.from(payload) });
        } else if (channel === 3) screen.status += payload.toString();
      }
      first = false;
      for (const w of waiters.splice(0)) w();
    });
    const closed = new Promise<{ code: number; reason: string }>((done) =>
      ws.on('close', (code, reason) => done({ code, reason: reason.toString() })),
    );
    ws.on('open', () =>
      resolve({
        ok: true,
        conn: {
          ws,
          closed,
          send(text) {
            const data = Buffer.from(text);
            if (base64) ws.send('0' + data.toString('base64'));
            else ws.send(Buffer.concat([Buffer.from([0]), data]));
          },
          waitFor(needle, ms = 15_000) {
            return new Promise((done, fail) => {
              const timer = setTimeout(
                () => fail(new Error(`'${needle}' not seen within ${ms} ms; got ${JSON.stringify(screen.text())}`)),
                ms,
              );
              const check = () => {
                if (screen.text().includes(needle)) {
                  clearTimeout(timer);
                  done();
                } else waiters.push(check);
              };
              check();
            });
          },
        },
      }),
    );
  });
}

function opened(result: Opened): Connection {
  assert.ok(result.ok, `the upgrade was refused: ${result.ok ? '' : `${result.status} ${result.body}`}`);
  return result.conn;
}

function refusal(result: Opened): { status: number; message: string } {
  assert.ok(!result.ok, 'the upgrade was accepted');
  const body = JSON.parse(result.body) as { message: string | string[] };
  return { status: result.status, message: ([] as string[]).concat(body.message).join('; ') };
}

/** The socket vanishes: no close frame (a Wi-Fi hiccup, a proxy's cut). */
async function cut(conn: Connection): Promise<void> {
  conn.ws.terminate();
  await conn.closed;
}

describe('resumable terminal sessions', () => {
  const ns = `term-resume-${process.pid}`;
  const nodeName = `term-resume-node-${process.pid}`;
  const windowSeconds = 4;
  const ringBytes = 64 * 1024;
  let app: ClusterApp;
  let kubelet: Kubelet;
  let wsBase: string;

  const url = (query: string) => `${wsBase}/api/v1/pods/${ns}/box/exec?cluster=alpha&${query}`;
  const auth = (token: string) => ({ authorization: `Bearer ${token}` });
  const resumeUrl = (query: string, screen: Screen, offset = screen.bytes) =>
    url(`${query}&resume=${screen.id}&offset=${offset}`);
  /** A user of its own for each test (the per-user session limit is 3). */
  const person = async () => {
    const user = await createUser(app.t, { role: 'term-resume' as never });
    return { ...user, token: await login(app.t, user) };
  };
  const auditRows = async (requestId: string) => {
    const res = await request(app.t.app, 'GET', '/api/v1/admin/audit', {
      token: app.admin,
      query: { operation: 'execPod', size: '100' },
    });
    return (res.body.events as Array<{ requestId: string; detail: Record<string, unknown> }>).filter(
      (e) => e.requestId === requestId,
    );
  };
  const endRow = (requestId: string) =>
    waitFor(
      'the end row',
      async () => (await auditRows(requestId)).find((e) => e.detail.event === 'end')?.detail,
      15_000,
    );
  const execs = () => kubelet.requests.filter((r) => r.startsWith('/exec/')).length;

  before(async () => {
    app = await startClusterApp({
      cluster: 'alpha',
      namespace: ns,
      listen: true,
      env: {
        CAS_SESSION_RESUME_SECONDS: String(windowSeconds),
        CAS_SESSION_RESUME_BYTES: String(ringBytes),
        CAS_EXEC_MAX_SESSIONS_PER_CALLER: '3',
        CAS_WATCH_REAUTH_SECONDS: '1',
      },
    });
    wsBase = app.base.replace(/^http/, 'ws');
    kubelet = await startKubelet(app.cp, nodeName);
    await podOnNode(app.cp, ns, 'box', nodeName);
    const role = await request(app.t.app, 'POST', '/api/v1/admin/roles', {
      token: app.admin,
      body: {
        name: 'term-resume',
        rules: [{ clusters: ['alpha'], namespaces: [ns], resources: ['pods'], verbs: ['get', 'exec', 'attach'] }],
      },
    });
    assert.equal(role.status, 201, role.text);
  });

  after(async () => {
    await kubelet?.stop();
    await kubeRequest(app.cp, 'DELETE', `/api/v1/namespaces/${ns}`).catch(() => undefined);
    await app?.t.close();
  });

  for (const protocol of ['v4.channel.k8s.io', 'v4.base64.channel.k8s.io']) {
    test(`a counter cut three times mid-stream (${protocol}): exactly an uninterrupted run's output, one exec`, async () => {
      const me = await person();
      const lines = 400;
      const command = `command=count&command=${lines}&command=10&command=both&stdout=true&stderr=true`;
      // The uninterrupted run, by a plain client.
      const plain = new Screen();
      const whole = opened(await connect(url(command), plain, { headers: auth(me.token), protocol }));
      assert.equal((await whole.closed).code, 1000);
      assert.equal(plain.id, '', 'a plain client gets no session message');
      assert.equal(plain.tagged(), counter(lines));

      const execsBefore = execs();
      const requestId = randomUUID();
      const screen = new Screen();
      let conn = opened(
        await connect(url(`${command}&resumable=true`), screen, {
          headers: { ...auth(me.token), 'x-request-id': requestId },
          protocol,
        }),
      );
      await conn.waitFor('5\n');
      assert.match(screen.id, /^[A-Za-z0-9_-]{8}\.[A-Za-z0-9_-]{24}$/);
      assert.equal(screen.resumeSeconds, windowSeconds);
      for (const [i, needle] of ['40\n', '100\n', '170\n'].entries()) {
        await conn.waitFor(needle);
        await cut(conn);
        const cutAt = screen.bytes;
        // The counter goes on while no client is there.
        await sleep(300);
        conn = opened(await connect(resumeUrl(command, screen), screen, { headers: auth(me.token), protocol }));
        await conn.waitFor(`${[60, 130, 200][i]}\n`);
        assert.ok(screen.bytes > cutAt);
      }
      const { code } = await conn.closed;
      assert.equal(code, 1000);
      assert.equal(screen.strayText, 0, 'a resumption sends no second session message');
      assert.equal(screen.tagged(), counter(lines), 'no gap and no duplicate, stdout and stderr in order');
      assert.equal(JSON.parse(screen.status).status, 'Success');
      assert.equal(execs(), execsBefore + 1, 'one exec at the kubelet');
      const end = await endRow(requestId);
      assert.equal(end.resumed, 3);
      assert.equal(end.resumable, true);
      assert.equal(end.reason, 'the command ended');
      assert.equal(end.exitCode, 0);
      const rows = await auditRows(requestId);
      assert.deepEqual(rows.map((r) => r.detail.event).sort(), ['end', 'start'], 'the rows of one session');
    });
  }

  test('a shell resumed: typing goes on, and a client whose old socket still looks open takes over', async () => {
    const me = await person();
    const query = 'command=sh&stdin=true&stdout=true&stderr=true';
    const screen = new Screen();
    const first = opened(await connect(url(`${query}&resumable=true`), screen, { headers: auth(me.token) }));
    first.send('echo one\n');
    await first.waitFor('one\n');
    // The old socket is silently dead as far as the service can tell: it is still open.
    const second = opened(await connect(resumeUrl(query, screen), screen, { headers: auth(me.token) }));
    assert.equal((await first.closed).code, 1006, 'the old socket is cut off');
    second.send('echo two\n');
    await second.waitFor('two\n');
    await cut(second);
    const third = opened(await connect(resumeUrl(query, screen), screen, { headers: auth(me.token) }));
    third.send('nosuchcmd\n');
    await third.waitFor('sh: nosuchcmd: not found');
    third.send('exit 4\n');
    assert.equal((await third.closed).code, 1000);
    assert.equal(screen.text(), 'one\ntwo\nsh: nosuchcmd: not found\n');
    assert.match(screen.status, /exit status 4/);
  });

  test('attach resumes too: the same process, typing goes on', async () => {
    const me = await person();
    const query = 'stdin=true&stdout=true';
    const attach = (q: string) => `${wsBase}/api/v1/pods/${ns}/box/attach?cluster=alpha&${q}`;
    const attachesBefore = kubelet.requests.filter((r) => r.startsWith('/attach/')).length;
    const screen = new Screen();
    const conn = opened(await connect(attach(`${query}&resumable=true`), screen, { headers: auth(me.token) }));
    conn.send('write note.txt kept-in-the-process\n');
    conn.send('echo attached\n');
    await conn.waitFor('attached\n');
    await cut(conn);
    const back = opened(
      await connect(attach(`${query}&resume=${screen.id}&offset=${screen.bytes}`), screen, {
        headers: auth(me.token),
      }),
    );
    back.send('cat note.txt\n');
    await back.waitFor('kept-in-the-process\n');
    back.ws.close(1000);
    await back.closed;
    assert.equal(screen.text(), 'attached\nkept-in-the-process\n');
    assert.equal(kubelet.requests.filter((r) => r.startsWith('/attach/')).length, attachesBefore + 1);
  });

  test('a command that ends while the client is away: its last output and exit status still come', async () => {
    const me = await person();
    const query = 'command=count&command=30&command=20&stdout=true';
    const requestId = randomUUID();
    const screen = new Screen();
    const conn = opened(
      await connect(url(`${query}&resumable=true`), screen, {
        headers: { ...auth(me.token), 'x-request-id': requestId },
      }),
    );
    await conn.waitFor('3\n');
    await cut(conn);
    const end = await endRow(requestId);
    assert.equal(end.reason, 'the command ended');
    const back = opened(await connect(resumeUrl(query, screen), screen, { headers: auth(me.token) }));
    assert.equal((await back.closed).code, 1000);
    assert.equal(screen.text(), Array.from({ length: 30 }, (_, i) => `${i + 1}\n`).join(''));
    assert.equal(JSON.parse(screen.status).status, 'Success');
  });

  test('the window ends: the cluster side is closed, the end row says so, and resuming is a 410 naming it', async () => {
    const me = await person();
    const query = 'command=sh&stdin=true&stdout=true';
    const requestId = randomUUID();
    const screen = new Screen();
    const open = kubelet.openStreams();
    const conn = opened(
      await connect(url(`${query}&resumable=true`), screen, {
        headers: { ...auth(me.token), 'x-request-id': requestId },
      }),
    );
    conn.send('echo hi\n');
    await conn.waitFor('hi\n');
    await cut(conn);
    const cutAt = Date.now();
    await sleep(1000);
    assert.equal(kubelet.openStreams(), open + 1, 'kept open within the window');
    await waitFor('the kubelet to see the session closed', async () => kubelet.openStreams() === open, 15_000);
    const elapsed = Date.now() - cutAt;
    assert.ok(elapsed >= windowSeconds * 1000 - 200, `closed after ${elapsed} ms`);
    const end = await endRow(requestId);
    assert.match(String(end.reason), /did not resume it within 4 s \(CAS_SESSION_RESUME_SECONDS\)/);
    assert.equal(end.resumed, 0);
    assert.equal(end.expired, true);
    const late = refusal(await connect(resumeUrl(query, screen), screen, { headers: auth(me.token) }));
    assert.equal(late.status, 410);
    assert.match(late.message, /has ended: the client did not resume it within 4 s/);
  });

  test('an offset older than the output kept is a 410 naming CAS_SESSION_RESUME_BYTES', async () => {
    const me = await person();
    const query = 'command=sh&stdin=true&stdout=true';
    const screen = new Screen();
    const conn = opened(await connect(url(`${query}&resumable=true`), screen, { headers: auth(me.token) }));
    const total = 8 * ringBytes;
    const flooded = kubeletStreams.floodedBytes;
    // Cut at the first output: nearly all of it comes while the client is away.
    conn.ws.on('message', () => conn.ws.terminate());
    conn.send(`flood ${total} 4096\n`);
    await conn.closed;
    await waitFor('the whole flood written', async () => kubeletStreams.floodedBytes - flooded >= total, 20_000);
    await sleep(500);
    const old = refusal(await connect(resumeUrl(query, screen), screen, { headers: auth(me.token) }));
    assert.equal(old.status, 410);
    assert.match(old.message, new RegExp(`older than the output kept .*CAS_SESSION_RESUME_BYTES is ${ringBytes}`));
    // The latest output is still there.
    const fresh = new Screen();
    fresh.id = screen.id;
    const near = opened(await connect(resumeUrl(query, fresh, total - 1000), fresh, { headers: auth(me.token) }));
    await waitFor('the last 1000 bytes', async () => fresh.bytes >= 1000, 10_000);
    assert.match(fresh.text(), /^x*\n$/);
    near.ws.close(1000);
    await near.closed;
  });

  test('refusals before the upgrade: unknown id 410, another user 403, another route 400; the owner’s API key resumes', async () => {
    const me = await person();
    const other = await person();
    const query = 'command=sh&stdin=true&stdout=true';
    const screen = new Screen();
    const conn = opened(await connect(url(`${query}&resumable=true`), screen, { headers: auth(me.token) }));
    conn.send('echo mine\n');
    await conn.waitFor('mine\n');
    await cut(conn);

    const unknown = new Screen();
    unknown.id = `${screen.id.split('.')[0]}.${'A'.repeat(24)}`;
    const gone = refusal(await connect(resumeUrl(query, unknown, 0), unknown, { headers: auth(me.token) }));
    assert.deepEqual([gone.status, /is unknown here/.test(gone.message)], [410, true], gone.message);
    // An id naming a replica that is not registered (gone, or never was): lost, at once.
    unknown.id = `nowhere0.${'A'.repeat(24)}`;
    const lost = refusal(await connect(resumeUrl(query, unknown, 0), unknown, { headers: auth(me.token) }));
    assert.equal(lost.status, 410);
    assert.match(lost.message, /is lost: the replica holding it is gone/);
    const theirs = refusal(await connect(resumeUrl(query, screen), new Screen(), { headers: auth(other.token) }));
    assert.deepEqual([theirs.status, theirs.message], [403, `session '${screen.id}' is another user's`]);
    const anonymous = refusal(await connect(resumeUrl(query, screen), new Screen()));
    assert.equal(anonymous.status, 401);
    const otherRoute = refusal(
      await connect(resumeUrl('command=sh&stdin=true', screen), new Screen(), { headers: auth(me.token) }),
    );
    assert.equal(otherRoute.status, 400);
    assert.match(otherRoute.message, /another route or query/);
    const otherProtocol = refusal(
      await connect(resumeUrl(query, screen), new Screen(), {
        headers: auth(me.token),
        protocol: 'v4.base64.channel.k8s.io',
      }),
    );
    assert.match(otherProtocol.message, /speaks v4.channel.k8s.io/);
    const ahead = refusal(
      await connect(resumeUrl(query, screen, screen.bytes + 1), new Screen(), { headers: auth(me.token) }),
    );
    assert.equal(ahead.status, 400);
    assert.match(ahead.message, /is past the output/);

    const key = await request(app.t.app, 'POST', '/api/v1/auth/apikeys', {
      token: me.token,
      body: { name: `resume-${process.pid}`, roles: ['term-resume'] },
    });
    assert.equal(key.status, 201, key.text);
    const back = opened(await connect(resumeUrl(query, screen), screen, { headers: auth(key.body.key as string) }));
    back.send('echo again\n');
    await back.waitFor('again\n');
    back.ws.close(1000);
    await back.closed;
    assert.equal(screen.text(), 'mine\nagain\n');
  });

  test('a disabled user cannot resume, and the held session ends', async () => {
    const me = await person();
    const query = 'command=sh&stdin=true&stdout=true';
    const requestId = randomUUID();
    const screen = new Screen();
    const conn = opened(
      await connect(url(`${query}&resumable=true`), screen, {
        headers: { ...auth(me.token), 'x-request-id': requestId },
      }),
    );
    conn.send('echo hi\n');
    await conn.waitFor('hi\n');
    await cut(conn);
    const disabled = await request(app.t.app, 'POST', `/api/v1/admin/users/${me.id}/enable`, {
      token: app.admin,
      body: { enabled: false },
    });
    assert.equal(disabled.status, 200, disabled.text);
    const refused = refusal(await connect(resumeUrl(query, screen), screen, { headers: auth(me.token) }));
    assert.equal(refused.status, 401);
    const end = await endRow(requestId);
    assert.match(String(end.reason), /the stream has ended/, 'ended by the re-check, before the window');
  });

  test('plain clients and normal closes: no session message, and the session ends at once', async () => {
    const me = await person();
    const query = 'command=sh&stdin=true&stdout=true';
    const open = kubelet.openStreams();
    // A plain client's dropped socket ends its session as before.
    const plain = new Screen();
    const conn = opened(await connect(url(query), plain, { headers: auth(me.token) }));
    conn.send('echo plain\n');
    await conn.waitFor('plain\n');
    assert.equal(plain.id, '');
    await cut(conn);
    await waitFor('the plain session closed', async () => kubelet.openStreams() === open, 5000);
    // A resumable client that closes with 1000 ends its session: there is nothing to resume.
    const screen = new Screen();
    const closing = opened(await connect(url(`${query}&resumable=true`), screen, { headers: auth(me.token) }));
    closing.send('echo bye\n');
    await closing.waitFor('bye\n');
    closing.ws.close(1000);
    await closing.closed;
    await waitFor('the resumable session closed', async () => kubelet.openStreams() === open, 5000);
    const after = refusal(await connect(resumeUrl(query, screen), screen, { headers: auth(me.token) }));
    assert.equal(after.status, 410);
    assert.match(after.message, /has ended: the client closed the session/);
  });

  test('a held session keeps its slot: the per-user limit counts it', async () => {
    const me = await person();
    const query = 'command=sh&stdin=true&stdout=true';
    const screens = [new Screen(), new Screen(), new Screen()];
    for (const screen of screens) {
      const conn = opened(await connect(url(`${query}&resumable=true`), screen, { headers: auth(me.token) }));
      conn.send('echo up\n');
      await conn.waitFor('up\n');
      await cut(conn);
    }
    const fourth = refusal(await connect(url(query), new Screen(), { headers: auth(me.token) }));
    assert.equal(fourth.status, 429);
    // Resuming needs no new slot.
    const back = opened(await connect(resumeUrl(query, screens[0]), screens[0], { headers: auth(me.token) }));
    back.ws.close(1000);
    await back.closed;
  });
});

// The test kubelet's streaming endpoints over SPDY/3.1, as kubectl 1.20 speaks them through the real
// apiserver (which relays the upgraded connection byte for byte): the same exec, attach and
// port-forward sessions as the WebSocket ones in kubelet-streams.ts, carried by SPDY streams instead
// of numbered WebSocket channels (k8s.io/apimachinery httpstream/spdy; kubelet remotecommand and
// portforward). Exec and attach: the client opens one stream per channel, named by its `streamType`
// header (error, stdin, stdout, stderr, resize); the session starts once every expected stream is
// there. Port-forward: per forwarded connection, an `error` and a `data` stream sharing `requestID`
// and naming the pod `port`; the data stream is relayed to 127.0.0.1:<port>.
import { mkdir } from 'node:fs/promises';
import type { IncomingMessage } from 'node:http';
import net from 'node:net';
import type { Duplex } from 'node:stream';
import { join } from 'node:path';
import { type ChannelIO, finish, lineShell, runCommand, type Session } from './kubelet-streams.js';
import { SpdyServerConnection, type SpdyStream } from './spdy.js';

const EXEC_PROTOCOLS = ['v4.channel.k8s.io', 'v3.channel.k8s.io', 'v2.channel.k8s.io', 'channel.k8s.io'];
const PORTFORWARD_PROTOCOLS = ['portforward.k8s.io'];
const CHANNELS = ['stdin', 'stdout', 'stderr', 'error', 'resize'];
/** How long the kubelet waits for the client's streams (its streamCreationTimeout). */
const STREAM_WAIT_MS = 30_000;

export interface SpdyTarget {
  kind: 'exec' | 'attach' | 'portforward';
  namespace: string;
  pod: string;
  container?: string;
  query: URLSearchParams;
}

/** Answers a SPDY upgrade (`refuse` when no protocol is shared) and serves the session on it. */
export function serveSpdy(
  req: IncomingMessage,
  socket: Duplex,
  head: Buffer,
  target: SpdyTarget,
  workDir: string,
  refuse: (status: number, message: string) => void,
): void {
  const offered = String(req.headers['x-stream-protocol-version'] ?? '')
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean);
  const supported = target.kind === 'portforward' ? PORTFORWARD_PROTOCOLS : EXEC_PROTOCOLS;
  const protocol = offered.find((p) => supported.includes(p));
  if (!protocol) {
    return refuse(
      403,
      `unable to upgrade: unable to negotiate protocol: client supports [${offered.join(' ')}], server supports [${supported.join(' ')}]`,
    );
  }
  socket.write(
    'HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n' +
      `X-Stream-Protocol-Version: ${protocol}\r\n\r\n`,
  );
  if (target.kind === 'portforward') {
    portForward(socket, head, `${target.namespace}/${target.pod}`);
    return;
  }
  const q = target.query;
  const flag = (name: string) => q.get(name) === '1' || q.get(name) === 'true';
  const tty = flag('tty');
  const expected = new Set(['error']);
  if (flag('input')) expected.add('stdin');
  if (flag('output')) expected.add('stdout');
  if (flag('error') && !tty) expected.add('stderr');
  if (tty && protocol !== 'channel.k8s.io' && protocol !== 'v2.channel.k8s.io') expected.add('resize');
  const streams = new Map<string, SpdyStream>();
  let ready: () => void = () => undefined;
  const allThere = new Promise<void>((resolve) => (ready = resolve));
  const conn = new SpdyServerConnection(
    socket,
    (stream) => {
      const type = stream.headers.get('streamtype') ?? '';
      if (!expected.has(type) || streams.has(type)) return void conn.reset(stream.id);
      streams.set(type, stream);
      if (streams.size === expected.size) ready();
    },
    head,
  );
  const timer = setTimeout(() => void conn.close(), STREAM_WAIT_MS);
  void allThere.then(async () => {
    clearTimeout(timer);
    const session: Session = {
      channels: spdyChannels(conn, streams),
      tty,
      v4: protocol.startsWith('v4.'),
      stdin: expected.has('stdin'),
      dir: join(workDir, `${target.namespace}_${target.pod}_${target.container ?? ''}`),
    };
    await mkdir(session.dir, { recursive: true });
    const code = target.kind === 'attach' ? await lineShell(session) : await runCommand(session, q.getAll('command'));
    await finish(session, code);
  });
}

/** The numbered channels of kubelet-streams.ts over SPDY streams named by type. */
function spdyChannels(conn: SpdyServerConnection, streams: Map<string, SpdyStream>): ChannelIO {
  return {
    send(channel, data) {
      const stream = streams.get(CHANNELS[channel]);
      if (!stream) return Promise.resolve();
      return conn.send(stream.id, typeof data === 'string' ? Buffer.from(data, 'utf8') : data);
    },
    onMessage(handler) {
      streams.get('stdin')?.onData((data) => handler(0, data));
      // client-go writes each size as a JSON document followed by a newline.
      streams.get('resize')?.onData((data) =>
        data
          .toString('utf8')
          .split('\n')
          .filter((line) => line.trim() !== '')
          .forEach((line) => handler(4, Buffer.from(line))),
      );
    },
    onInputEnd(handler) {
      let called = false;
      const once = () => {
        if (called) return;
        called = true;
        handler();
      };
      conn.onClose(once);
      streams.get('stdin')?.onEnd(once);
      streams.get('stdin')?.onReset(once);
    },
    get open() {
      return conn.open;
    },
    close() {
      void conn.close();
    },
  };
}

/** Each forwarded connection: its data stream relayed to the pod port on loopback, errors on its error stream. */
function portForward(socket: Duplex, head: Buffer, pod: string): void {
  const errors = new Map<string, SpdyStream>();
  const sockets = new Set<net.Socket>();
  const conn = new SpdyServerConnection(
    socket,
    (stream) => {
      const type = stream.headers.get('streamtype');
      const requestId = stream.headers.get('requestid') ?? '';
      const port = Number(stream.headers.get('port'));
      if (type === 'error') return void errors.set(requestId, stream);
      if (type !== 'data' || !Number.isInteger(port) || port < 1 || port > 65535) return void conn.reset(stream.id);
      const error = errors.get(requestId);
      const done = () => {
        void conn.end(stream.id);
        if (error) void conn.end(error.id);
      };
      const tcp = net.connect(port, '127.0.0.1');
      sockets.add(tcp);
      stream.onData((data) => tcp.write(data));
      stream.onEnd(() => tcp.end());
      stream.onReset(() => tcp.destroy());
      tcp.on('data', (data: Buffer) => {
        tcp.pause();
        void conn.send(stream.id, data).then(() => tcp.resume());
      });
      tcp.on('error', (e) => {
        if (error) {
          void conn.send(
            error.id,
            Buffer.from(`an error occurred forwarding ${port} -> ${port}: ${e.message} (pod ${pod})`),
          );
        }
      });
      tcp.on('close', () => {
        sockets.delete(tcp);
        done();
      });
    },
    head,
  );
  conn.onClose(() => sockets.forEach((s) => s.destroy()));
}

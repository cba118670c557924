// The streaming endpoints of the test kubelet: what the real apiserver proxies `pods/exec`,
// `pods/attach` and `pods/portforward` upgrades to (`/exec/<ns>/<pod>/<container>?command=…&input=1
// &output=1&error=1&tty=1`, `/attach/…`, `/portforward/<ns>/<pod>?port=…`). It speaks the kubelet's
// WebSocket channel protocols (k8s.io/apiserver wsstream): one byte (binary) or one digit (base64) of
// channel before each message; 0 stdin, 1 stdout, 2 stderr, 3 error (v4: a Status with the exit
// code), 4 resize. SPDY/3.1 (kubectl 1.20) is served by kubelet-spdy.ts with the same sessions.
//
// No program of the host ever runs. `exec` knows a fixed set of harmless commands (echo, cat, sleep, count,
// `sh -c <line>`, `sh`, a tiny line shell confined to a temporary directory, `nsenter … -- <command>` for
// node shells, and `test -d` and `tar` for `kubectl cp`); `attach` joins a line shell of the container.
// Port-forward relays each stream to 127.0.0.1:<port>, a loopback
// server the test starts.
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import type { IncomingMessage } from 'node:http';
import net from 'node:net';
import type { Duplex } from 'node:stream';
import { join } from 'node:path';
import { WebSocket, WebSocketServer } from 'ws';
import { serveSpdy, type SpdyTarget } from './kubelet-spdy.js';

const EXEC_PROTOCOLS = ['v4.channel.k8s.io', 'v4.base64.channel.k8s.io', 'channel.k8s.io', 'base64.channel.k8s.io'];
const PORTFORWARD_PROTOCOLS = ['v4.channel.k8s.io', 'v4.base64.channel.k8s.io'];
const STREAM_PATH = /^\/(exec|attach)\/([^/]+)\/([^/]+)\/([^/]+)$|^\/(portforward|portForward)\/([^/]+)\/([^/]+)$/;
const FILE_NAME = /^[A-Za-z0-9._-]{1,64}$/;
const MAX_FLOOD = 256 * 1024 * 1024;

/**
 * A session's numbered channels (0 stdin, 1 stdout, 2 stderr, 3 error, 4 resize), whatever carries
 * them: a WebSocket (below) or SPDY streams (kubelet-spdy.ts).
 */
export interface ChannelIO {
  send(channel: number, data: Buffer | string): Promise<void>;
  /** Every message as (channel, bytes), those that came before first. */
  onMessage(handler: (channel: number, data: Buffer) => void): void;
  /** No more input will come (the connection closed, or the client ended stdin). */
  onInputEnd(handler: () => void): void;
  readonly open: boolean;
  /** Ends the session's connection (after what was sent has left). */
  close(): void;
}

/** One side of a channel-protocol socket. Messages that arrive before a handler is set wait for it. */
class Channels implements ChannelIO {
  private readonly handlers: Array<(channel: number, data: Buffer) => void> = [];
  private readonly early: Array<[number, Buffer]> = [];

  constructor(
    readonly ws: WebSocket,
    readonly base64: boolean,
  ) {
    ws.on('message', (raw: Buffer, isBinary: boolean) => {
      let message: [number, Buffer] | undefined;
      if (this.base64 || !isBinary) {
        const text = raw.toString('utf8');
        if (text.length > 0) message = [Number(text[0]), Buffer.from(text.slice(1), 'base64')];
      } else if (raw.length > 0) {
        message = [raw[0], raw.subarray(1)];
      }
      if (!message) return;
      if (this.handlers.length === 0) this.early.push(message);
      for (const handler of this.handlers) handler(...message);
    });
  }

  send(channel: number, data: Buffer | string): Promise<void> {
    const bytes = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
    const frame = this.base64
      ? String(channel) + bytes.toString('base64')
      : Buffer.concat([Buffer.from([channel]), bytes]);
    return new Promise((resolve) => {
      if (this.ws.readyState !== WebSocket.OPEN) return resolve();
      this.ws.send(frame, { binary: !this.base64 }, () => resolve());
    });
  }

  onMessage(handler: (channel: number, data: Buffer) => void): void {
    this.handlers.push(handler);
    for (const message of this.early.splice(0)) handler(...message);
  }

  onInputEnd(handler: () => void): void {
    if (this.ws.readyState === WebSocket.CLOSED) handler();
    else this.ws.once('close', handler);
  }

  get open(): boolean {
    return this.ws.readyState === WebSocket.OPEN;
  }

  close(): void {
    this.ws.close(1000);
  }
}

export interface Session {
  channels: ChannelIO;
  tty: boolean;
  v4: boolean;
  stdin: boolean;
  /** The container's scratch directory, the only place the line shell touches. */
  dir: string;
}

/** Serves the streaming endpoints on the kubelet's HTTPS server; `requests` records every path. */
export function serveStreams(
  server: import('node:https').Server,
  options: { workDir: string; requests: string[]; authorized(req: IncomingMessage): boolean },
): { close(): void; open(): number; pings(): number } {
  let pings = 0;
  const wss = new WebSocketServer({
    noServer: true,
    handleProtocols: (offered) => {
      for (const p of offered) if (EXEC_PROTOCOLS.includes(p)) return p;
      return false;
    },
  });
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    options.requests.push(req.url ?? '');
    const refuse = (status: number, message: string) => {
      const reason = { 401: 'Unauthorized', 403: 'Forbidden', 404: 'Not Found' }[status] ?? 'Bad Request';
      socket.end(
        `HTTP/1.1 ${status} ${reason}\r\ncontent-type: text/plain\r\n` +
          `content-length: ${Buffer.byteLength(message)}\r\nconnection: close\r\n\r\n${message}`,
      );
    };
    if (!options.authorized(req)) return refuse(401, 'Unauthorized');
    const url = new URL(req.url ?? '/', 'https://kubelet');
    const match = STREAM_PATH.exec(url.pathname);
    if (!match) return refuse(404, '404 page not found');
    const upgrade = (req.headers.upgrade ?? '').toLowerCase();
    if (upgrade === 'spdy/3.1') {
      const [kind, ns, pod, container] = match[5]
        ? ['portforward', match[6], match[7]].map(decodeURIComponent)
        : match.slice(1, 5).map(decodeURIComponent);
      const target = { kind: kind as SpdyTarget['kind'], namespace: ns, pod, container, query: url.searchParams };
      return serveSpdy(req, socket, head, target, options.workDir, refuse);
    }
    if (upgrade !== 'websocket') return refuse(400, `unsupported upgrade '${upgrade}'`);
    const offered = (req.headers['sec-websocket-protocol'] ?? '').split(',').map((p) => p.trim());
    const portForward = match[5] !== undefined;
    const allowed = portForward ? PORTFORWARD_PROTOCOLS : EXEC_PROTOCOLS;
    // The kubelet's port-forward also takes no subprotocol at all (binary channels).
    if (!offered.some((p) => allowed.includes(p)) && !(portForward && offered.join('') === '')) {
      return refuse(400, `unsupported subprotocol: ${offered.join(', ')}`);
    }
    wss.handleUpgrade(req, socket, head, (ws) => {
      ws.on('ping', () => pings++);
      const channels = new Channels(ws, ws.protocol.includes('base64'));
      if (portForward) {
        const [ns, pod] = [match[6], match[7]].map(decodeURIComponent);
        void portForwardSession(
          channels,
          url.searchParams
            .getAll('port')
            .flatMap((p) => p.split(','))
            .map(Number),
          `${ns}/${pod}`,
        );
        return;
      }
      const [kind, ns, pod, container] = match.slice(1, 5).map(decodeURIComponent);
      const q = url.searchParams;
      const session: Session = {
        channels,
        tty: q.get('tty') === '1' || q.get('tty') === 'true',
        v4: ws.protocol.startsWith('v4.'),
        stdin: q.get('input') === '1' || q.get('input') === 'true',
        dir: join(options.workDir, `${ns}_${pod}_${container}`),
      };
      void (async () => {
        await mkdir(session.dir, { recursive: true });
        // The kubelet tells the client the streams are up with an empty message on stdout.
        await channels.send(1, Buffer.alloc(0));
        const code = kind === 'attach' ? await lineShell(session) : await runCommand(session, q.getAll('command'));
        await finish(session, code);
      })().catch(() => ws.terminate());
    });
  });
  return {
    close: () => {
      for (const ws of wss.clients) ws.terminate();
      wss.close();
    },
    open: () => wss.clients.size,
    pings: () => pings,
  };
}

export async function finish(session: Session, code: number): Promise<void> {
  const { channels } = session;
  if (session.v4) {
    const status =
      code === 0
        ? { metadata: {}, status: 'Success' }
        : {
            metadata: {},
            status: 'Failure',
            message: `command terminated with non-zero exit code: exit status ${code}`,
            reason: 'NonZeroExitCode',
            details: { causes: [{ reason: 'ExitCode', message: String(code) }] },
          };
    await channels.send(3, JSON.stringify(status));
  } else if (code !== 0) {
    await channels.send(3, `command terminated with non-zero exit code: exit status ${code}`);
  }
  channels.close();
}

/** Lines typed on stdin (with a tty, echoed back as a terminal does), until the socket closes. */
function lineReader(session: Session, onResize: (cols: number, rows: number) => void) {
  const lines: string[] = [];
  const waiters: Array<(line: string | null) => void> = [];
  let partial = '';
  let closed = false;
  const push = (line: string | null) => {
    const waiter = waiters.shift();
    if (waiter) waiter(line);
    else if (line !== null) lines.push(line);
  };
  session.channels.onMessage((channel, data) => {
    if (channel === 4) {
      try {
        const size = JSON.parse(data.toString('utf8')) as { Width: number; Height: number };
        onResize(size.Width, size.Height);
      } catch {
        // a malformed resize is ignored, as the kubelet does
      }
      return;
    }
    if (channel !== 0) return;
    for (const ch of data.toString('utf8')) {
      if (ch === '\r' || ch === '\n') {
        if (session.tty) void session.channels.send(1, '\r\n');
        push(partial);
        partial = '';
      } else if (ch === '\x7f') {
        if (partial.length > 0) {
          partial = partial.slice(0, -1);
          if (session.tty) void session.channels.send(1, '\b \b');
        }
      } else {
        partial += ch;
        if (session.tty) void session.channels.send(1, ch);
      }
    }
  });
  session.channels.onInputEnd(() => {
    closed = true;
    while (waiters.length) waiters.shift()!(null);
  });
  return {
    next(): Promise<string | null> {
      if (lines.length) return Promise.resolve(lines.shift()!);
      if (closed) return Promise.resolve(null);
      return new Promise((resolve) => waiters.push(resolve));
    },
  };
}

/** `sh`: one command per line, in the container's scratch directory only. */
export async function lineShell(session: Session): Promise<number> {
  let size = 'unknown';
  const reader = lineReader(session, (cols, rows) => (size = `${cols}x${rows}`));
  const nl = session.tty ? '\r\n' : '\n';
  const prompt = () => (session.tty ? session.channels.send(1, '$ ') : Promise.resolve());
  await prompt();
  for (;;) {
    const line = await reader.next();
    if (line === null) return 0;
    const code = await shellLine(session, line.trim(), nl, () => size);
    if (code !== undefined) return code;
    await prompt();
  }
}

/** Runs one line of the line shell; a number when the line ends the shell (`exit N`). */
async function shellLine(session: Session, line: string, nl: string, size: () => string): Promise<number | undefined> {
  const out = (text: string) => session.channels.send(1, text.replace(/\n/g, nl));
  const err = (text: string) => session.channels.send(session.tty ? 1 : 2, text.replace(/\n/g, nl));
  const [command = '', ...args] = line.split(/\s+/).filter(Boolean);
  const rest = line.slice(command.length).trim();
  switch (command) {
    case '':
      return undefined;
    case 'echo':
      await out(rest + '\n');
      return undefined;
    case 'exit':
      return Number(args[0] ?? 0) & 0xff;
    case 'pwd':
      await out('/\n');
      return undefined;
    case 'size':
      await out(size() + '\n');
      return undefined;
    case 'ls':
      await out((await readdir(session.dir)).sort().join('\n') + '\n');
      return undefined;
    case 'write': {
      if (!FILE_NAME.test(args[0] ?? '')) {
        await err('write: a plain file name is needed\n');
        return undefined;
      }
      await writeFile(join(session.dir, args[0]), rest.slice(args[0].length).trim() + '\n');
      return undefined;
    }
    case 'cat': {
      if (!FILE_NAME.test(args[0] ?? '')) {
        await err('cat: a plain file name is needed\n');
        return undefined;
      }
      try {
        await out(await readFile(join(session.dir, args[0]), 'utf8'));
      } catch {
        await err(`cat: ${args[0]}: No such file or directory\n`);
      }
      return undefined;
    }
    case 'flood':
      await flood(session, Math.min(Number(args[0]) || 0, MAX_FLOOD), Number(args[1]) || undefined);
      return undefined;
    default:
      await err(`sh: ${command}: not found\n`);
      return undefined;
  }
}

/** Output bytes `flood` has handed to sockets that took them (their send completed), over all sessions. */
export let floodedBytes = 0;

/** Writes `bytes` of output in messages of `size` (64 KiB, at most 16 MiB), each after the previous one left. */
async function flood(session: Session, bytes: number, size = 64 * 1024): Promise<void> {
  const chunk = Buffer.alloc(Math.min(size, 16 * 1024 * 1024), 'x');
  chunk[chunk.length - 1] = 0x0a;
  for (let sent = 0; sent < bytes; sent += chunk.length) {
    if (!session.channels.open) return;
    const part = bytes - sent < chunk.length ? chunk.subarray(0, bytes - sent) : chunk;
    await session.channels.send(1, part);
    floodedBytes += part.length;
  }
}

export async function runCommand(session: Session, argv: string[]): Promise<number> {
  const [command = '', ...args] = argv;
  const nl = session.tty ? '\r\n' : '\n';
  switch (command) {
    case 'echo':
      await session.channels.send(1, args.join(' ') + nl);
      return 0;
    case 'sleep':
      await new Promise((resolve) => setTimeout(resolve, Math.min(Number(args[0]) || 0, 3600) * 1000));
      return 0;
    case 'nsenter': {
      // A node shell (`nsenter -t 1 -m -u -i -n -p -- sh -l`): the command after `--`, here.
      const at = args.indexOf('--');
      return at < 0 ? 1 : runCommand(session, args.slice(at + 1));
    }
    case 'count': {
      // `count N [ms] [both]`: the lines 1…N, one message each, every `ms`; with `both` the even ones on stderr.
      const [n, ms] = [Math.min(Number(args[0]) || 0, 1_000_000), Math.min(Number(args[1]) || 0, 60_000)];
      for (let i = 1; i <= n && session.channels.open; i++) {
        await session.channels.send(args[2] === 'both' && i % 2 === 0 ? 2 : 1, `${i}${nl}`);
        if (ms > 0) await new Promise((resolve) => setTimeout(resolve, ms));
      }
      return 0;
    }
    case 'sh':
    case '/bin/sh':
    case 'bash':
      if (args[0] === '-c') return (await shellLine(session, args[1] ?? '', nl, () => 'unknown')) ?? 0;
      return lineShell(session);
    case 'cat': {
      if (!session.stdin) return 0;
      session.channels.onMessage((channel, data) => {
        if (channel === 0) void session.channels.send(1, data);
      });
      await new Promise<void>((resolve) => session.channels.onInputEnd(resolve));
      return 0;
    }
    case 'test':
      // `kubectl cp` asks `test -d <destination>`: the scratch directory is the container's only directory.
      return args[0] === '-d' && DIRECTORIES.has(args[1] ?? '') ? 0 : 1;
    case 'tar':
      return tar(session, args);
    default:
      await session.channels.send(
        3,
        session.v4
          ? JSON.stringify({
              metadata: {},
              status: 'Failure',
              message: `exec: "${command}": executable file not found in $PATH`,
              reason: 'InternalError',
            })
          : `exec: "${command}": executable file not found in $PATH`,
      );
      session.channels.close();
      return -1;
  }
}

/** The paths `test -d` says are directories: they all name the scratch directory. */
const DIRECTORIES = new Set(['/', '.', '/tmp', '/tmp/']);
const MAX_TAR_BYTES = 16 * 1024 * 1024;

/**
 * `tar cf - <path>…` (what `kubectl cp pod:<path> …` runs) writes a ustar archive of scratch files named
 * by their base names, each entry under its path without the leading `/`, as GNU tar does; `tar -xmf -
 * [-C <dir>]` (and `--no-same-permissions --no-same-owner`: `kubectl cp … pod:<path>`) reads one from
 * stdin until it ends and writes its regular files into the scratch directory by their base names.
 */
async function tar(session: Session, args: string[]): Promise<number> {
  const flags = args.filter((a) => !a.startsWith('--'));
  const mode = (flags[0] ?? '').replace(/^-/, '');
  if (/^c[a-z]*f$/.test(mode) && flags[1] === '-') {
    const parts: Buffer[] = [];
    for (const path of flags.slice(2)) {
      const base = path.split('/').pop() ?? '';
      let data: Buffer;
      try {
        if (!FILE_NAME.test(base)) throw new Error();
        data = await readFile(join(session.dir, base));
      } catch {
        await session.channels.send(2, `tar: ${path}: Cannot stat: No such file or directory\n`);
        return 2;
      }
      parts.push(
        tarHeader(path.replace(/^\/+/, ''), data.length),
        data,
        Buffer.alloc((512 - (data.length % 512)) % 512),
      );
    }
    await session.channels.send(1, Buffer.concat([...parts, Buffer.alloc(1024)]));
    return 0;
  }
  if (/^x[a-z]*f$/.test(mode) && flags[1] === '-') {
    const chunks: Buffer[] = [];
    let size = 0;
    session.channels.onMessage((channel, data) => {
      if (channel !== 0 || size > MAX_TAR_BYTES) return;
      size += data.length;
      chunks.push(data);
    });
    await new Promise<void>((resolve) => session.channels.onInputEnd(resolve));
    const archive = Buffer.concat(chunks);
    for (let at = 0; at + 512 <= archive.length;) {
      const header = archive.subarray(at, at + 512);
      if (header.every((b) => b === 0)) break;
      const field = (from: number, length: number) =>
        header
          .subarray(from, from + length)
          .toString('latin1')
          .replace(/\0.*$/s, '');
      const name = field(0, 100);
      const length = parseInt(field(124, 12).trim() || '0', 8);
      const type = field(156, 1);
      const base = name.split('/').filter(Boolean).pop() ?? '';
      if ((type === '' || type === '0') && FILE_NAME.test(base)) {
        await writeFile(join(session.dir, base), archive.subarray(at + 512, at + 512 + length));
      }
      at += 512 + Math.ceil(length / 512) * 512;
    }
    return 0;
  }
  await session.channels.send(2, `tar: this container's tar knows only 'cf -' and 'xf -' (got ${args.join(' ')})\n`);
  return 2;
}

/** A ustar header of a regular file (mode 0644, owned by root). */
function tarHeader(name: string, size: number): Buffer {
  const header = Buffer.alloc(512);
  const put = (from: number, value: string) => header.write(value, from, 'latin1');
  const octal = (value: number, width: number) => value.toString(8).padStart(width - 1, '0');
  put(0, name.slice(0, 100));
  put(100, octal(0o644, 8));
  put(108, octal(0, 8));
  put(116, octal(0, 8));
  put(124, octal(size, 12));
  put(136, octal(Math.floor(Date.now() / 1000), 12));
  put(148, '        ');
  put(156, '0');
  put(257, 'ustar\x0000');
  put(265, 'root');
  put(297, 'root');
  const sum = header.reduce((total, byte) => total + byte, 0);
  put(148, `${octal(sum, 7)}\0 `);
  return header;
}

/** Each requested port: its data and error channels, relayed to 127.0.0.1:<port>. */
async function portForwardSession(channels: Channels, ports: number[], pod: string): Promise<void> {
  const sockets: net.Socket[] = [];
  channels.ws.on('close', () => sockets.forEach((s) => s.destroy()));
  channels.onMessage((channel, data) => {
    const socket = sockets[channel / 2];
    if (channel % 2 === 0 && socket) socket.write(data);
  });
  for (const [i, port] of ports.entries()) {
    const header = Buffer.from([port & 0xff, port >> 8]);
    await channels.send(2 * i, header);
    await channels.send(2 * i + 1, header);
    const socket = net.connect(port, '127.0.0.1');
    sockets[i] = socket;
    socket.on('data', (data: Buffer) => {
      socket.pause();
      void channels.send(2 * i, data).then(() => socket.resume());
    });
    socket.on('error', (error) => {
      void channels.send(2 * i + 1, `an error occurred forwarding ${port} -> ${port}: ${error.message} (pod ${pod})`);
    });
    socket.on('close', () => channels.ws.close(1000));
  }
}

import type { IncomingMessage } from 'node:http';
import { StringDecoder } from 'node:string_decoder';
import { WebSocket } from 'ws';

/** A terminal WebSocket as a test sees it: what arrived per channel, the exit status, how it closed. */
export interface TerminalClient {
  ws: WebSocket;
  protocol: string;
  /** Text received so far on a channel (1 stdout, 2 stderr, 3 error). */
  text(channel: number): string;
  /** Raw payloads received per channel, in order. */
  messages(channel: number): Buffer[];
  /** Resolves once `text(channel)` contains `needle` (rejects after `ms`). */
  waitFor(needle: string, channel?: number, ms?: number): Promise<void>;
  /** Sends a payload on a channel in the session's framing. */
  send(channel: number, data: string | Buffer): void;
  /** Resolves with the close code and reason. */
  closed: Promise<{ code: number; reason: string }>;
  /** Pings received from the service. */
  pings(): number;
}

export type Opened =
  | { ok: true; client: TerminalClient }
  | { ok: false; status: number; body: string; headers: IncomingMessage['headers'] };

/**
 * Opens a terminal WebSocket; a refused upgrade resolves with its status and body. `retain: false` keeps
 * nothing that arrives (text() and messages() stay empty): a reader of a long output stream counts it on
 * `ws` itself instead of holding all of it.
 */
export function openTerminal(
  url: string,
  options: { protocols?: string[]; headers?: Record<string, string>; ca?: string; retain?: boolean } = {},
): Promise<Opened> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, options.protocols ?? ['v4.channel.k8s.io'], {
      headers: options.headers,
      ca: options.ca,
      perMessageDeflate: false,
    });
    const channels = new Map<number, Buffer[]>();
    // Text decoded as it arrives (a character split across messages kept whole), so that a waiter's
    // check on every message does not decode the whole history again.
    const texts = new Map<number, { decoder: StringDecoder; text: string }>();
    const waiters: Array<() => void> = [];
    let pings = 0;
    ws.on('ping', () => pings++);
    const closed = new Promise<{ code: number; reason: string }>((done) =>
      ws.on('close', (code, reason) => done({ code, reason: reason.toString() })),
    );
    ws.on('unexpected-response', (_req, res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () =>
        resolve({
          ok: false,
          status: res.statusCode ?? 0,
          body: Buffer.concat(chunks).toString('utf8'),
          headers: res.headers,
        }),
      );
    });
    ws.on('error', (error) => reject(error));
    ws.on('open', () => {
      const base64 = ws.protocol.includes('base64');
      ws.on('message', (raw: Buffer, isBinary: boolean) => {
        if (options.retain === false) return;
        let channel: number;
        let payload: Buffer;
        if (base64 || !isBinary) {
          const text = raw.toString('utf8');
          channel = Number(text[0]);
          payload = Buffer.from(text.slice(1), 'base64');
        } else {
          channel = raw[0];
          payload = raw.subarray(1);
        }
        if (!channels.has(channel)) channels.set(channel, []);
        channels.get(channel)!.push(payload);
        let decoded = texts.get(channel);
        if (!decoded) texts.set(channel, (decoded = { decoder: new StringDecoder('utf8'), text: '' }));
        decoded.text += decoded.decoder.write(payload);
        for (const w of waiters.splice(0)) w();
      });
      const text = (channel: number) => texts.get(channel)?.text ?? '';
      const client: TerminalClient = {
        ws,
        protocol: ws.protocol,
        text,
        messages: (channel) => channels.get(channel) ?? [],
        pings: () => pings,
        closed,
        send(channel, data) {
          const bytes = typeof data === 'string' ? Buffer.from(data) : data;
          if (base64) ws.send(String(channel) + bytes.toString('base64'));
          else ws.send(Buffer.concat([Buffer.from([channel]), bytes]));
        },
        waitFor(needle, channel = 1, ms = 10_000) {
          return new Promise((done, fail) => {
            const timer = setTimeout(
              () =>
                fail(
                  new Error(
                    `'${needle}' not seen on channel ${channel} within ${ms} ms; got ${JSON.stringify(text(channel))}`,
                  ),
                ),
              ms,
            );
            const check = () => {
              if (text(channel).includes(needle)) {
                clearTimeout(timer);
                done();
              } else waiters.push(check);
            };
            check();
          });
        },
      };
      resolve({ ok: true, client });
    });
  });
}

/** The exit code in a v4 error-channel Status (0 for Success). */
export function exitCodeOf(client: TerminalClient): number | undefined {
  const text = client.text(3);
  if (!text) return undefined;
  const status = JSON.parse(text) as {
    status: string;
    details?: { causes?: Array<{ reason: string; message: string }> };
  };
  if (status.status === 'Success') return 0;
  return Number(status.details?.causes?.find((c) => c.reason === 'ExitCode')?.message);
}

/** `base64url.bearer.authorization.k8s.io.<token>`, as Kubernetes clients send a token in a browser. */
export function bearerProtocol(token: string): string {
  return `base64url.bearer.authorization.k8s.io.${Buffer.from(token).toString('base64url')}`;
}

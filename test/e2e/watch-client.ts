import http from 'node:http';

/** One event as a watch client sees it: the parsed event, and for SSE the frame's event name and id. */
export interface SeenEvent {
  type: string;
  object: any;
  /** SSE: the `event:` field. */
  event?: string;
  /** SSE: the `id:` field. */
  id?: string;
  /** The raw JSON line (newline-delimited JSON) or the `data:` field (SSE). */
  raw: string;
  at: number;
}

export interface WatchClient {
  status: number;
  headers: http.IncomingHttpHeaders;
  /** The error body when the service refused the stream. */
  body?: any;
  events: SeenEvent[];
  /** SSE: `id:` lines without data (the position after the initial objects). */
  positions: string[];
  heartbeats: number;
  /** Resolves when the stream ends (cleanly or not): true when it ended cleanly. */
  ended: Promise<boolean>;
  endedAt?: number;
  /** Waits until `pred` holds for the events seen so far; throws after timeoutMs. */
  until(pred: (events: SeenEvent[]) => boolean, timeoutMs?: number, what?: string): Promise<void>;
  close(): void;
  /** Stops reading (the socket buffers fill, the service sees a slow client). */
  pause(): void;
  res?: http.IncomingMessage;
}

export interface WatchOptions {
  token: string;
  cluster?: string;
  sse?: boolean;
  accept?: string;
  lastEventId?: string;
  /** Do not read the body at all from the start. */
  paused?: boolean;
}

/** Opens a watch over a real socket and parses what arrives (JSON lines or SSE). */
export function openWatch(base: string, path: string, options: WatchOptions): Promise<WatchClient> {
  const url = new URL(path, base);
  const headers: Record<string, string> = {
    authorization: `Bearer ${options.token}`,
    'x-cluster-name': options.cluster ?? 'alpha',
    accept: options.accept ?? (options.sse ? 'text/event-stream' : 'application/json'),
  };
  if (options.lastEventId) headers['last-event-id'] = options.lastEventId;
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: 'GET', headers, agent: false }, (res) => {
      let resolveEnded!: (clean: boolean) => void;
      const client: WatchClient = {
        status: res.statusCode ?? 0,
        headers: res.headers,
        events: [],
        positions: [],
        heartbeats: 0,
        ended: new Promise<boolean>((r) => (resolveEnded = r)),
        res,
        async until(pred, timeoutMs = 10_000, what = 'events') {
          const deadline = Date.now() + timeoutMs;
          while (!pred(client.events)) {
            if (Date.now() > deadline) {
              throw new Error(
                `timed out waiting for ${what}; saw ${client.events.map((e) => `${e.type}:${e.object?.metadata?.name ?? e.object?.code}`).join(' ')}`,
              );
            }
            await new Promise((r) => setTimeout(r, 20));
          }
        },
        close: () => req.destroy(),
        pause: () => {
          res.pause();
          res.socket.pause();
        },
      };
      res.on('end', () => {
        client.endedAt = Date.now();
        resolveEnded(true);
      });
      res.on('error', () => {
        client.endedAt ??= Date.now();
        resolveEnded(false);
      });
      res.on('close', () => {
        client.endedAt ??= Date.now();
        resolveEnded(res.complete);
      });
      if (client.status !== 200) {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          try {
            client.body = JSON.parse(text);
          } catch {
            client.body = text;
          }
          resolve(client);
        });
        return;
      }
      const sse = String(res.headers['content-type']).startsWith('text/event-stream');
      let pending = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        pending += chunk;
        const separator = sse ? '\n\n' : '\n';
        for (let at = pending.indexOf(separator); at >= 0; at = pending.indexOf(separator)) {
          const block = pending.slice(0, at);
          pending = pending.slice(at + separator.length);
          if (!sse) {
            if (block.trim()) {
              const value = JSON.parse(block);
              client.events.push({ type: value.type, object: value.object, raw: block, at: Date.now() });
            }
            continue;
          }
          const frame: Record<string, string> = {};
          let comment = false;
          for (const line of block.split('\n')) {
            if (line.startsWith(':')) comment = true;
            const colon = line.indexOf(': ');
            if (colon > 0) frame[line.slice(0, colon)] = line.slice(colon + 2);
          }
          if (frame.data !== undefined) {
            const value = JSON.parse(frame.data);
            client.events.push({
              type: value.type,
              object: value.object,
              event: frame.event,
              id: frame.id,
              raw: frame.data,
              at: Date.now(),
            });
          } else if (frame.id !== undefined) client.positions.push(frame.id);
          else if (comment) client.heartbeats++;
        }
      });
      if (options.paused) client.pause();
      resolve(client);
    });
    req.on('error', reject);
    req.end();
  });
}

/** Names and types of the events seen, e.g. `ADDED:a`. */
export function summary(events: SeenEvent[]): string[] {
  return events.map((e) => `${e.type}:${e.object?.metadata?.name ?? e.object?.code}`);
}

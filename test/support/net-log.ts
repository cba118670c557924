import { readFile } from 'node:fs/promises';

/** Control frames of one WebSocket of the browser, as its network log saw them. */
export interface WebSocketControlFrames {
  /** Pings received (opcode 9). */
  pings: number;
  /** Pongs sent (opcode 10): the browser's answers. */
  pongs: number;
}

interface NetLog {
  constants: { logEventTypes: Record<string, number> };
  events: Array<{ type: number; source: { id: number }; params?: { opcode?: number } }>;
}

/**
 * The pings each WebSocket received and the pongs it sent, from a network log Chromium wrote
 * (`launchChromium(profile, { netLog })`, read after the browser closed). Pages never see control
 * frames, and DevTools' `Network.webSocketFrameReceived` reports data frames only: the network log is
 * where the browser's side of a keep-alive shows.
 */
export async function webSocketControlFrames(file: string): Promise<WebSocketControlFrames[]> {
  const log = JSON.parse(await readFile(file, 'utf8')) as NetLog;
  const received = log.constants.logEventTypes.WEBSOCKET_RECV_FRAME_HEADER;
  const sent = log.constants.logEventTypes.WEBSOCKET_SENT_FRAME_HEADER;
  const sockets = new Map<number, WebSocketControlFrames>();
  for (const event of log.events) {
    const ping = event.type === received && event.params?.opcode === 9;
    const pong = event.type === sent && event.params?.opcode === 10;
    if (!ping && !pong) continue;
    const socket = sockets.get(event.source.id) ?? { pings: 0, pongs: 0 };
    sockets.set(event.source.id, socket);
    if (ping) socket.pings++;
    else socket.pongs++;
  }
  return [...sockets.values()];
}

import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Caller } from '../access/caller.js';

/** The node-shell route (a WebSocket upgrade): `/api/v1/nodes/_all/<node>/shell`. */
const NODE_SHELL_PATH = /^\/api\/v1\/nodes\/_all\/([^/]+)\/shell$/;

export function isNodeShellPath(pathname: string): boolean {
  return NODE_SHELL_PATH.test(pathname);
}

/** The node named in a node-shell path (not yet validated), or undefined. */
export function nodeShellNodeOf(pathname: string): string | undefined {
  return NODE_SHELL_PATH.exec(pathname)?.[1];
}

/** What the terminal hands over once the credential is resolved (everything before that is its own). */
export interface NodeShellUpgrade {
  req: IncomingMessage;
  socket: Duplex;
  head: Buffer;
  url: URL;
  caller: Caller;
  secret: string;
  /** The subprotocols offered, the token removed. */
  offered: string[];
  requestId: string;
  clientAddress: string | null;
}

/**
 * Who opens node shells (src/debug/ registers itself at start). The terminal owns every upgrade of the
 * service; debugging builds on it, so the terminal knows only this shape, never the debug module.
 */
export interface NodeShellOpener {
  open(upgrade: NodeShellUpgrade): Promise<void>;
}

import { Logger } from '@nestjs/common';
import { readFileSync, unwatchFile, watchFile } from 'node:fs';
import type { Server } from 'node:tls';
import type { TlsConfig } from '../config/config.js';

/** How often the certificate files are checked for a change (polled: a Secret volume swaps a symlink, which fs.watch misses). */
const CHECK_INTERVAL_MS = 1000;

/** The key and certificate chain, read now: Fastify's `https` server options. */
export function httpsOptions(tls: TlsConfig): { key: Buffer; cert: Buffer } {
  return { key: readFileSync(tls.keyFile), cert: readFileSync(tls.certFile) };
}

/**
 * Serves renewed certificates without a restart: when either file changes, both are read again and
 * become the server's secure context for new connections. A pair that does not load (a half-written
 * renewal, a key that does not match) is logged and the previous pair kept. Returns the stop function.
 */
export function reloadCertificatesOnChange(server: Server, tls: TlsConfig, intervalMs = CHECK_INTERVAL_MS): () => void {
  const logger = new Logger('Tls');
  const reload = (current: { mtimeMs: number }, previous: { mtimeMs: number }) => {
    if (current.mtimeMs === previous.mtimeMs) return;
    try {
      server.setSecureContext(httpsOptions(tls));
      logger.log(`certificate reloaded from ${tls.certFile}`);
    } catch (error) {
      logger.warn(`certificate not reloaded, the previous one stays: ${(error as Error).message}`);
    }
  };
  for (const file of [tls.certFile, tls.keyFile]) watchFile(file, { interval: intervalMs, persistent: false }, reload);
  return () => {
    for (const file of [tls.certFile, tls.keyFile]) unwatchFile(file, reload);
  };
}

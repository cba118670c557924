import { Logger } from '@nestjs/common';
import { createApp } from './app.js';
import { drainOf } from './common/drain.js';
import { ConfigError, loadConfig } from './config/config.js';

/** How long closing may take after the grace period before the process exits regardless. */
const CLOSE_BOUND_SECONDS = 4;

async function main(): Promise<void> {
  let config;
  try {
    config = loadConfig();
  } catch (error) {
    if (error instanceof ConfigError) {
      console.error(`configuration error: ${error.message}`);
      process.exit(2);
    }
    throw error;
  }
  const app = await createApp(config);
  const logger = new Logger('Shutdown');
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    const drain = drainOf(app);
    const graceMs = config.shutdownGraceSeconds * 1000;
    // Whatever happens below, the process is gone shortly after its grace period: a rolling update never waits
    // for the kill. Unreferenced, so it only fires when something else still holds the process.
    setTimeout(() => {
      logger.error(`still running ${graceMs / 1000 + CLOSE_BOUND_SECONDS} s after ${signal}; exiting`);
      process.exit(1);
    }, graceMs + CLOSE_BOUND_SECONDS * 1000).unref();
    logger.log(`${signal}: no new requests; waiting for ${drain.active} in flight`);
    const finished = await drain.drain(graceMs);
    if (!finished)
      logger.warn(`${drain.active} requests still running after ${config.shutdownGraceSeconds} s; stopping anyway`);
    // Streams have been told to end; a client that takes nothing more must not hold the server's close.
    const lingering = drain.closeConnections();
    if (lingering > 0) logger.log(`closed ${lingering} client connections that were still open`);
    await app.close();
    logger.log('stopped');
    process.exit(0);
  };
  process.once('SIGTERM', () => void stop('SIGTERM'));
  process.once('SIGINT', () => void stop('SIGINT'));
  await app.listen({ port: config.port, host: config.host });
}

main().catch((error: unknown) => {
  // Start-up failed (database unreachable, a bootstrap kubeconfig refused, …): say why, without a stack trace.
  console.error(`start-up failed: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
});

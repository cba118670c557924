import { Logger } from '@nestjs/common';
import { createApp } from './app.js';
import { drainOf } from './common/drain.js';
import { ConfigError, loadConfig } from './config/config.js';

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
    logger.log(`${signal}: no new requests; waiting for ${drain.active} in flight`);
    const finished = await drain.drain(graceMs);
    if (!finished)
      logger.warn(`${drain.active} requests still running after ${config.shutdownGraceSeconds} s; stopping anyway`);
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

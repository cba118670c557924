import { Logger } from '@nestjs/common';
import { createApp } from './app.js';
import { drainOf } from './common/drain.js';
import { ConfigError, loadConfig } from './config/config.js';

/** How long in-flight requests (a waited delete, say) may take to finish after SIGTERM. */
const SHUTDOWN_GRACE_MS = Number(process.env.CAS_SHUTDOWN_GRACE_SECONDS || 30) * 1000;

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
    logger.log(`${signal}: no new requests; waiting for ${drain.active} in flight`);
    const finished = await drain.drain(SHUTDOWN_GRACE_MS);
    if (!finished)
      logger.warn(`${drain.active} requests still running after ${SHUTDOWN_GRACE_MS / 1000} s; stopping anyway`);
    await app.close();
    logger.log('stopped');
    process.exit(0);
  };
  process.once('SIGTERM', () => void stop('SIGTERM'));
  process.once('SIGINT', () => void stop('SIGINT'));
  await app.listen({ port: config.port, host: config.host });
}

void main();

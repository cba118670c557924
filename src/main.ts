import { createApp } from './app.js';
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
  await app.listen({ port: config.port, host: config.host });
}

void main();

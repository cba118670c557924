import { chromium, type BrowserContext } from 'playwright-core';

/** Debian's Chromium, which the test command installs. */
export const CHROMIUM = '/usr/bin/chromium';

/** Headless, and nothing that would reach outside this machine (updates, sync, background fetches). */
const FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** Chromium with a fresh profile (`--user-data-dir`), driven by playwright-core. */
export function launchChromium(profile: string): Promise<BrowserContext> {
  return chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: FLAGS,
    chromiumSandbox: false,
    timeout: 60_000,
  });
}

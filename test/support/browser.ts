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

/**
 * Chromium with a fresh profile (`--user-data-dir`), driven by playwright-core. `netLog`: a file for
 * Chromium's own network log (test/support/net-log.ts reads it once the browser has closed); `args`: more flags.
 */
export function launchChromium(
  profile: string,
  options: { netLog?: string; args?: string[] } = {},
): Promise<BrowserContext> {
  const netLog = options.netLog ? [`--log-net-log=${options.netLog}`, '--net-log-capture-mode=Default'] : [];
  return chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: [...FLAGS, ...netLog, ...(options.args ?? [])],
    chromiumSandbox: false,
    timeout: 60_000,
  });
}

/**
 * Debian's chromium for the browser suites: whether it is there (a missing one skips a suite,
 * and fails it where LOOPCHART_REQUIRE_CHROMIUM is set, as in CI), and a headless persistent
 * context with the flags every suite runs it with.
 */
import { existsSync } from 'node:fs';
import { chromium, type BrowserContext } from 'playwright-core';

export const CHROMIUM = '/usr/bin/chromium';
export const hasChromium = existsSync(CHROMIUM);
if (!hasChromium) {
  if (process.env.LOOPCHART_REQUIRE_CHROMIUM) throw new Error(`${CHROMIUM} is missing and LOOPCHART_REQUIRE_CHROMIUM is set (run .ci/chromium.sh as root)`);
  console.log(`browser suite skipped: ${CHROMIUM} not found (install it as root with: bash .ci/chromium.sh; then npm run test:browser)`);
}

/** A headless chromium with its profile in `profile`; no network of its own beyond 127.0.0.1 pages. */
export function launchChromium(profile: string, options: { viewport?: { width: number; height: number } } = {}): Promise<BrowserContext> {
  return chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    ...options,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
}

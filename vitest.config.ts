import { defineConfig } from 'vitest/config';

/**
 * Two projects: `fast` (seconds to a few minutes, what a developer runs while iterating:
 * `npm run test:fast`) and `slow` (the packed tarball installed into fresh consumers, SIGKILL
 * crash series: `npm run test:slow`). `npm test` and CI run both.
 */
const slow = ['test/package/consumer.test.ts', 'test/sessions/crash.test.ts'];

export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 60_000,
    projects: [
      { extends: true, test: { name: 'fast', include: ['test/**/*.test.ts'], exclude: slow } },
      { extends: true, test: { name: 'slow', include: slow, hookTimeout: 600_000 } },
    ],
  },
});

import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';
import { SlowFirstSequencer } from './test/support/sequencer.js';

/**
 * Projects: `fast` (in-process suites, what a developer runs while iterating: `npm run test:fast`),
 * `processes` (below), `slow` (the packed tarball installed into fresh consumers, SIGKILL
 * crash series: `npm run test:slow`), `distributed` (a real Restate server and worker processes:
 * `npm run test:distributed`) and `mcp` (below). `npm test` and CI run them all.
 */
const slow = ['test/package/consumer.test.ts', 'test/sessions/crash-*.test.ts', 'test/sessions/operations-crash.test.ts', 'test/approvals/decision-race.test.ts', 'test/subagents/nested-crash.test.ts', 'test/examples/team.test.ts', 'test/sessions/guardrails-crash.test.ts', 'test/sessions/in-doubt-crash.test.ts'];
/**
 * Suites built on real child processes in the fast project's time range (a few to 30 s each): the
 * README's and the examples' commands, the CLI, Ctrl-C and SIGKILL of a session process, a
 * grandchild run's approval across processes, the OpenTelemetry exporter process. `npm run test:processes`.
 */
const processes = [
  'test/readme/readme.test.ts',
  'test/sessions/cli.test.ts',
  'test/sessions/interrupt.test.ts',
  'test/sessions/durable.test.ts',
  'test/subagents/grandchild-approval.test.ts',
  'test/examples/demo-session.test.ts',
  'test/hitl/demo.test.ts',
  'test/hitl/durable.test.ts',
  'test/stores/kill.test.ts',
  'test/telemetry/otel.test.ts',
];
/** Against a real Restate server (`npm run setup:restate` installs it; skipped without it). */
const distributed = ['test/distributed/**/*.test.ts'];
/** Real MCP servers as child processes and over HTTP (~15 s, mostly process start and stop): `npm run test:mcp`. */
const mcp = ['test/mcp/**/*.test.ts'];
/** `loopchart view` in Debian's chromium (`npm run test:browser`; skipped without /usr/bin/chromium). */
const browser = ['test/browser/**/*.test.ts'];

export default defineConfig({
  test: {
    // One test file per core. Vitest's default keeps a core free (cores - 1), which on a 2-core CI
    // machine ran every file one after another; most of these files wait on child processes and
    // servers, so two at a time roughly halves the run.
    maxWorkers: Math.max(2, availableParallelism()),
    testTimeout: 30_000,
    // Long files first (see the sequencer).
    sequence: { sequencer: SlowFirstSequencer },
    hookTimeout: 60_000,
    projects: [
      { extends: true, test: { name: 'fast', include: ['test/**/*.test.ts'], exclude: [...slow, ...processes, ...distributed, ...mcp, ...browser] } },
      { extends: true, test: { name: 'processes', include: processes } },
      { extends: true, test: { name: 'browser', include: browser, testTimeout: 60_000, hookTimeout: 120_000 } },
      { extends: true, test: { name: 'mcp', include: mcp } },
      { extends: true, test: { name: 'slow', include: slow, hookTimeout: 600_000 } },
      // One file at a time: each starts its own server and workers on a 2-core machine.
      {
        extends: true,
        test: {
          name: 'distributed',
          include: distributed,
          globalSetup: ['test/distributed/support/global-setup.ts'],
          fileParallelism: false,
          testTimeout: 120_000,
          hookTimeout: 120_000,
        },
      },
    ],
  },
});

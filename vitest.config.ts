import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';
import { SlowFirstSequencer } from './test/support/sequencer.js';

/**
 * Projects are chosen by a test file's suffix, never by a list of paths, so a new test lands in the
 * right project by its name alone (`npm run test:<project>` runs one):
 * - `fast`: plain `*.test.ts`, in-process suites (ms to a few s each), what a developer runs while
 *   iterating (`npm run test:fast`; one feature: `npx vitest run --project fast test/agent/guardrails`).
 * - `timed`: `*.timed.test.ts`, in-process suites that spend seconds waiting on the wall clock
 *   (a schedule's 1 s shortest interval, a lease taken over mid-run), little CPU: apart, so
 *   `test:fast` does not sit through them.
 * - `processes`: `*.process.test.ts`, suites built on real child processes in the fast project's
 *   time range (a few to 30 s each): the README's commands, the CLI, Ctrl-C and SIGKILL of a session.
 * - `slow`: `*.crash.test.ts` (SIGKILL series, minutes each) and `*.slow.test.ts` (the packed
 *   tarball in fresh consumers, long races, whole-program compiles, property tests at full size:
 *   `fast` runs a smaller twin of each).
 * - `browser`: `*.browser.test.ts`, pages in Debian's chromium (skipped without /usr/bin/chromium).
 * - `mcp`: `test/mcp/` and `test/mcp-server/`, both sides of MCP over its real transports: the
 *   client against real servers (child processes over stdio, HTTP), and the agent served to the
 *   SDK's own client (HTTP on 127.0.0.1, stdio child processes).
 * - `distributed`: `test/distributed/`, against a real Restate server (`npm run setup:restate`).
 * `npm test` and CI run them all.
 */
const spawning = ['test/**/*.process.test.ts'];
const timed = ['test/**/*.timed.test.ts'];
const slow = ['test/**/*.crash.test.ts', 'test/**/*.slow.test.ts'];
const browser = ['test/**/*.browser.test.ts'];
const mcp = ['test/mcp/**/*.test.ts', 'test/mcp-server/**/*.test.ts'];
const distributed = ['test/distributed/**/*.test.ts'];
/** The two server folders keep their own projects whatever a file's suffix. */
const servers = [...mcp, ...distributed];

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
      // One worker process runs many fast files (isolate: false): a fresh process and module graph
      // per file (vitest's default) cost more CPU than the files themselves, 206-216 s against
      // 89-93 s for the whole project. The files share loaded modules, so none may leave global
      // state behind (mocks restored, env and cwd put back).
      {
        extends: true,
        test: { name: 'fast', include: ['test/**/*.test.ts'], exclude: [...spawning, ...timed, ...slow, ...browser, ...servers], isolate: false },
      },
      { extends: true, test: { name: 'timed', include: timed, exclude: servers, isolate: false } },
      { extends: true, test: { name: 'processes', include: spawning, exclude: servers } },
      { extends: true, test: { name: 'browser', include: browser, exclude: servers, testTimeout: 60_000, hookTimeout: 120_000 } },
      { extends: true, test: { name: 'mcp', include: mcp } },
      { extends: true, test: { name: 'slow', include: slow, exclude: servers, hookTimeout: 600_000 } },
      // One file at a time: each starts its own server and workers on a 2-core machine. A lock
      // (one-at-a-time.ts), not fileParallelism: false, which would run them after every other
      // file, one after another, the other worker idle.
      {
        extends: true,
        test: {
          name: 'distributed',
          include: distributed,
          globalSetup: ['test/distributed/support/global-setup.ts'],
          setupFiles: ['test/distributed/support/one-at-a-time.ts'],
          testTimeout: 120_000,
          hookTimeout: 120_000,
        },
      },
    ],
  },
});

/**
 * The distributed suite needs the Restate server binary (`npm run setup:restate` installs it).
 * Without it the suite skips with this one line; with LOOPCHART_REQUIRE_RESTATE=1 (CI) a missing
 * server fails the run instead.
 *
 * It also makes the run's lock that lets one distributed file at a time run (one-at-a-time.ts):
 * a directory of this run's own, removed at its end, so a lock left by a killed worker dies with
 * the run.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { restateServerBinary } from './server.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** The directory one-at-a-time.ts takes its lock in. */
    restateLockDir: string;
  }
}

export default function setup(project: TestProject): () => void {
  const lockDir = mkdtempSync(join(tmpdir(), 'loopchart-restate-lock-'));
  project.provide('restateLockDir', lockDir);
  const teardown = () => rmSync(lockDir, { recursive: true, force: true });
  if (restateServerBinary()) return teardown;
  if (process.env.LOOPCHART_REQUIRE_RESTATE) {
    teardown();
    throw new Error('LOOPCHART_REQUIRE_RESTATE is set but no Restate server is installed: run `npm run setup:restate`');
  }
  console.log('distributed suite skipped: no Restate server installed (run `npm run setup:restate`, then `npm run test:distributed`)');
  return teardown;
}

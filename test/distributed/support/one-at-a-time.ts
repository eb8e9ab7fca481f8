/**
 * A setup file of the distributed project: each of its files starts a Restate server and worker
 * processes of its own, so only one runs at a time. They run among the other projects' files
 * (not after them all, as `fileParallelism: false` would put them, one worker idle the while):
 * a file takes the run's lock (a directory made with mkdir, which fails while another file holds
 * it) around everything it runs, its own hooks that start and stop its server included, and
 * gives it back however those end (aroundAll's finally: a failing afterAll stops the hooks after
 * it, not this).
 */
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { aroundAll, expect, inject } from 'vitest';

/** Bound on the wait: every distributed file together takes about two minutes on a loaded 2-core machine. */
const WAIT_MS = 5 * 60_000;
const POLL_MS = 100;

aroundAll(async (runSuite) => {
  const lock = await take(join(inject('restateLockDir'), 'held'), expect.getState().testPath ?? 'a distributed test file');
  try {
    await runSuite();
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}, WAIT_MS + 10_000);

async function take(lock: string, file: string): Promise<string> {
  const until = Date.now() + WAIT_MS;
  for (;;) {
    try {
      mkdirSync(lock);
      writeFileSync(join(lock, 'by'), file);
      return lock;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    if (Date.now() > until) throw new Error(`${file} waited ${WAIT_MS / 1000} s for the distributed suite's lock, held by ${holder(lock)}`);
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
}

function holder(lock: string): string {
  try {
    return readFileSync(join(lock, 'by'), 'utf8');
  } catch {
    return 'another file';
  }
}

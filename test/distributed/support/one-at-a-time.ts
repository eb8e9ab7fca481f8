/**
 * A setup file of the distributed project: each of its files starts a Restate server and worker
 * processes of its own, so only one runs at a time. They run among the other projects' files
 * (not after them all, as `fileParallelism: false` would put them, one worker idle the while):
 * a file takes the run's lock (a directory made with mkdir, which fails while another file holds
 * it) before its own hooks start its server, and gives it back after they have stopped it.
 */
import { mkdirSync, rmSync, writeFileSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, inject } from 'vitest';

/** Bound on the wait: every distributed file together takes about two minutes on a loaded 2-core machine. */
const WAIT_MS = 5 * 60_000;
const POLL_MS = 100;

let held: string | undefined;

beforeAll(async () => {
  const lock = join(inject('restateLockDir'), 'held');
  const file = expect.getState().testPath ?? 'a distributed test file';
  const until = Date.now() + WAIT_MS;
  for (;;) {
    try {
      mkdirSync(lock);
      writeFileSync(join(lock, 'by'), file);
      held = lock;
      return;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    if (Date.now() > until) {
      const by = (() => {
        try {
          return readFileSync(join(lock, 'by'), 'utf8');
        } catch {
          return 'another file';
        }
      })();
      throw new Error(`${file} waited ${WAIT_MS / 1000} s for the distributed suite's lock, held by ${by}`);
    }
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
}, WAIT_MS + 10_000);

afterAll(() => {
  if (held) rmSync(held, { recursive: true, force: true });
  held = undefined;
});

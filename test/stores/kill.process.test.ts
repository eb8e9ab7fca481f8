import { fork } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PostgresSessionStore } from '../../src/stores/postgres.js';
import type { SessionStore } from '../../src/stores/session-store.js';
import { SqliteSessionStore } from '../../src/stores/sqlite.js';
import type { ChildStoreSpec, ChildTask } from './fixtures/store-child.js';
import { bundledCommand, type NodeCommand } from '../sessions/fixtures/processes.js';

/**
 * SIGKILL a process that is committing steps as fast as it can, at random moments, and check
 * what survives: every step the child saw committed is there (durability against a process
 * crash, which is what both SQLite synchronous levels promise in WAL mode), no step is there
 * in part (atomicity), and the next process carries on from it.
 */
const CHILD = fileURLToPath(new URL('./fixtures/store-child.ts', import.meta.url));
const KILLS = 6;
/** The child as a bundle (see bundledCommand: a third of tsx's start-up CPU). */
let storeChild: NodeCommand;
beforeAll(async () => {
  storeChild = await bundledCommand(CHILD);
});
afterAll(() => storeChild?.dispose());

/** Runs the 'forever' child until it has acknowledged `after` commits, SIGKILLs it, returns the last acknowledged version. */
async function killAfter(spec: ChildStoreSpec, sessionId: string, after: number): Promise<number> {
  const task: ChildTask = { store: spec, sessionId, kind: 'forever' };
  const child = fork(storeChild.args.at(-1)!, [JSON.stringify(task)], { execArgv: storeChild.args.slice(0, -1), stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  let acknowledged = 0;
  let seen = 0;
  await new Promise<void>((resolve, reject) => {
    child.on('message', (message) => {
      if (message === 'ready') return void child.send('go');
      acknowledged = (message as { committed: number }).committed;
      if (++seen === after) {
        child.kill('SIGKILL');
        resolve();
      }
    });
    child.once('exit', (code, signal) => (signal === 'SIGKILL' ? resolve() : reject(new Error(`child exited: ${code ?? signal}`))));
  });
  await new Promise((resolve) => (child.exitCode !== null || child.signalCode !== null ? resolve(undefined) : child.once('exit', resolve)));
  return acknowledged;
}

async function expectIntact(store: SessionStore, sessionId: string, atLeast: number): Promise<number> {
  const session = await store.load(sessionId);
  expect(session).toBeDefined();
  const version = session!.version;
  expect(version).toBeGreaterThanOrEqual(atLeast);
  const steps = version - 1;
  expect(session!.state).toEqual({ count: steps });
  expect(session!.messages).toHaveLength(2 * steps);
  session!.messages.forEach((message, i) => {
    const k = Math.floor(i / 2) + 1;
    expect(message.content.startsWith(i % 2 === 0 ? `${k}:user` : `${k}:assistant`)).toBe(true);
  });
  return version;
}

function killSeries(spec: () => ChildStoreSpec, open: (spec: ChildStoreSpec) => SessionStore): () => Promise<void> {
  return async () => {
    const target = spec();
    let version = 0;
    for (let kill = 0; kill < KILLS; kill++) {
      const acknowledged = await killAfter(target, 'victim', 5 + Math.floor(Math.random() * 40));
      const store = open(target);
      try {
        version = await expectIntact(store, 'victim', Math.max(acknowledged, version));
      } finally {
        await store.close();
      }
    }
    expect(version).toBeGreaterThan(KILLS * 5);
  };
}

describe('SIGKILL while committing', () => {
  const root = mkdtempSync(join(tmpdir(), 'loopchart-kill-'));
  let n = 0;
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  for (const synchronous of ['NORMAL', 'FULL'] as const) {
    it(
      `sqlite (synchronous=${synchronous}): every acknowledged step survives, none is torn, the next process resumes`,
      killSeries(
        () => ({ kind: 'sqlite', path: join(root, `kill-${n++}.db`), synchronous }),
        (spec) => new SqliteSessionStore({ path: (spec as { path: string }).path }),
      ),
      60_000,
    );
  }

  const url = process.env.DATABASE_URL;
  describe.skipIf(!url)('postgres', () => {
    const schema = `lc_kill_${process.pid}_${Date.now().toString(36)}`;
    afterAll(async () => {
      const admin = new pg.Pool({ connectionString: url, max: 1 });
      await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await admin.end();
    });
    it(
      'every acknowledged step survives, none is torn, the next process resumes',
      killSeries(
        () => ({ kind: 'postgres', url: url!, schema }),
        () => new PostgresSessionStore({ connectionString: url!, schema, max: 1 }),
      ),
      60_000,
    );
  });
});

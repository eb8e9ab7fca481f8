/**
 * `DurableSession.open` against another writer making the same session while the open reads it,
 * on each store (memory, a SQLite file, PostgreSQL when DATABASE_URL is set). The open's read is
 * held (a store that answers it late, as a busy store does): it finds nothing, the other writer
 * makes the session and runs in it, then the answer arrives. The open must not go on in that
 * session: its creating write fails (SessionBusyError), nothing of it is stored. Also `create: true`,
 * which refuses a stored session on the open's own read.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { createAgentMachine } from '../../machines/agent.machine.js';
import { scriptedModel } from '../../src/models/scripted.js';
import { DurableSession } from '../../src/sessions/durable-session.js';
import { SessionBusyError } from '../../src/stores/errors.js';
import { MemorySessionStore } from '../../src/stores/memory.js';
import { PostgresSessionStore } from '../../src/stores/postgres.js';
import type { SessionStore, StoredSession } from '../../src/stores/session-store.js';
import { SqliteSessionStore } from '../../src/stores/sqlite.js';

const url = process.env.DATABASE_URL;
const dir = mkdtempSync(join(tmpdir(), 'open-race-'));
const schema = `lc_open_race_${process.pid}_${Date.now().toString(36)}`;
afterAll(async () => {
  rmSync(dir, { recursive: true, force: true });
  if (!url) return;
  const admin = new pg.Pool({ connectionString: url, max: 1 });
  await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await admin.end();
});

/** The store's next load of `sessionId`, once armed, answers only when released (at most 5 s). */
function lateLoads(store: SessionStore) {
  let armed: { sessionId: string; reached: () => void; release: Promise<void> } | null = null;
  const inner = store.load.bind(store);
  store.load = async (sessionId: string): Promise<StoredSession | undefined> => {
    const row = await inner(sessionId);
    const held = armed;
    if (held?.sessionId === sessionId) {
      armed = null;
      held.reached();
      await held.release;
    }
    return row;
  };
  return (sessionId: string) => {
    let release!: () => void;
    let reached!: () => void;
    const reachedOnce = new Promise<void>((resolve) => (reached = resolve));
    const released = Promise.race([new Promise<void>((resolve) => (release = resolve)), new Promise<void>((resolve) => setTimeout(resolve, 5_000))]);
    armed = { sessionId, reached, release: released };
    return { reached: reachedOnce, release };
  };
}

const stores: Array<[string, () => Promise<SessionStore>]> = [
  ['memory', async () => new MemorySessionStore()],
  ['sqlite', async () => new SqliteSessionStore({ path: join(dir, `${Math.random().toString(36).slice(2)}.db`) })],
  ...(url ? [['postgres', async () => new PostgresSessionStore({ connectionString: url, schema })] as [string, () => Promise<SessionStore>]] : []),
];

describe.each(stores)('%s', (_name, open) => {
  it("an open of a new id with another scope, overtaken by the session's maker, fails and stores nothing", async () => {
    const store = await open();
    const id = `race-${Math.random().toString(36).slice(2)}`;
    const arm = lateLoads(store);
    const machine = createAgentMachine({ model: scriptedModel([{ text: 'Your passport number is X123.' }]) });
    try {
      const gate = arm(id);
      const bob = DurableSession.open({ machine, store, sessionId: id, scope: 'user:bob' }).catch((e: unknown) => e);
      await gate.reached;
      const ada = await DurableSession.open({ machine, store, sessionId: id, scope: 'user:ada' });
      ada.send({ type: 'input', message: 'What is my passport number?' });
      await ada.whenIdle();
      await ada.close();
      const before = await store.load(id);
      const traced = (await store.readTrace!(id)).length;
      gate.release();
      const error = await bob;
      expect(SessionBusyError.isInstance(error)).toBe(true);
      const after = await store.load(id);
      expect(after!.version).toBe(before!.version);
      expect((after!.state as { scope?: string }).scope).toBe('user:ada');
      expect((await store.readTrace!(id)).length).toBe(traced);
    } finally {
      await store.close();
    }
  });

  it('create: true refuses a stored session on the open\'s own read, and one made while it reads', async () => {
    const store = await open();
    const id = `create-${Math.random().toString(36).slice(2)}`;
    const arm = lateLoads(store);
    const machine = createAgentMachine({ model: scriptedModel([{ text: 'Hello.' }]) });
    try {
      const gate = arm(id);
      const late = DurableSession.open({ machine, store, sessionId: id, create: true }).catch((e: unknown) => e);
      await gate.reached;
      const first = await DurableSession.open({ machine, store, sessionId: id });
      first.send({ type: 'input', message: 'Hi' });
      await first.whenIdle();
      await first.close();
      const version = (await store.load(id))!.version;
      gate.release();
      expect(SessionBusyError.isInstance(await late)).toBe(true);
      const again = await DurableSession.open({ machine, store, sessionId: id, create: true }).catch((e: unknown) => e);
      expect(again).toMatchObject({ code: 'SessionBusy', message: `session ${id} already exists (version ${version}); cannot create it again` });
      expect((await store.load(id))!.version).toBe(version);
      const fresh = await DurableSession.open({ machine, store, sessionId: `${id}-new`, create: true });
      expect((await store.load(`${id}-new`))!.version).toBe(1);
      await fresh.close();
    } finally {
      await store.close();
    }
  });
});

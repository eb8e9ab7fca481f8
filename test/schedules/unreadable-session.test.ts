/**
 * A schedule whose session this version cannot read (its stored row written by another version,
 * or edited by hand), on a real SQLite file: the tick is recorded Failed, saying why, and the
 * schedule moves on; it is not claimed again every lease for ever with nothing recorded.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createAgentMachine } from '../../machines/agent.machine.js';
import { scriptedModel } from '../../src/models/scripted.js';
import { listSchedules, schedule, startScheduler, type ScheduleTick } from '../../src/schedules.js';
import { DurableSession } from '../../src/sessions/durable-session.js';
import { openSqlite } from '../../src/stores/sqlite-driver.js';
import { SqliteSessionStore } from '../../src/stores/sqlite.js';

const root = mkdtempSync(join(tmpdir(), 'loopchart-schedules-unreadable-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('a schedule whose session this version cannot read', () => {
  it('records the tick Failed with why, once, and moves on; the other schedules fire', async () => {
    const path = join(root, 'unreadable.db');
    const store = new SqliteSessionStore({ path });
    const machine = createAgentMachine({ model: scriptedModel(Array.from({ length: 10 }, () => ({ text: 'Done.' }))) });
    const made = await DurableSession.open({ machine, store, sessionId: 'edited' });
    made.send({ type: 'input', message: 'Hello.' });
    await made.whenIdle();
    await made.close();
    const db = openSqlite(path, { busyTimeoutMs: 5_000 });
    db.prepare(`UPDATE sessions SET state = '{"rowVersion":99}' WHERE session_id = 'edited'`).run();
    db.close();

    await schedule(store, { id: 'edited', session: 'edited', agent: 'worker', input: 'Go on.', at: Date.now() });
    await schedule(store, { id: 'fine', session: 'fine', agent: 'worker', input: 'Go.', at: Date.now() });
    const ticks: ScheduleTick[] = [];
    const errors: Error[] = [];
    const scheduler = await startScheduler({ store, agents: { worker: machine }, leaseMs: 300, onTick: (tick) => ticks.push(tick), onError: (error) => errors.push(error) });
    try {
      scheduler.wake();
      for (let i = 0; i < 120 && ticks.length < 2; i++) await new Promise((resolve) => setTimeout(resolve, 25));
      // Three leases' time: a tick left to its lease would have been claimed and failed again.
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      expect(ticks.find((tick) => tick.scheduleId === 'edited')).toMatchObject({ outcome: 'Failed', error: expect.stringMatching(/^the session could not be opened: session 'edited': /), nextAt: null });
      expect(ticks.find((tick) => tick.scheduleId === 'fine')).toMatchObject({ outcome: 'Completed' });
      expect(errors.map((error) => error.message)).toEqual([expect.stringMatching(/^session 'edited': /)]);
      const [edited] = await listSchedules(store);
      expect(edited).toMatchObject({ id: 'edited', lastOutcome: 'Failed', runs: 0, nextAt: null, firingBy: null });
    } finally {
      await scheduler.stop({ graceMs: 200 });
      await store.close();
    }
  }, 20_000);
});

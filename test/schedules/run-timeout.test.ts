/**
 * A scheduled run the scheduler cancels past `runTimeoutMs` says so in the schedule, on a real
 * SQLite file: `Cancelled` with the timeout as `lastError`, told apart from a run someone else cancelled.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createAgentMachine } from '../../machines/agent.machine.js';
import { scriptedModel } from '../../src/models/scripted.js';
import { listSchedules, schedule, startScheduler, type ScheduleTick } from '../../src/schedules.js';
import { SqliteSessionStore } from '../../src/stores/sqlite.js';

const root = mkdtempSync(join(tmpdir(), 'loopchart-schedules-timeout-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('a scheduled run past runTimeoutMs', () => {
  it('is Cancelled with the timeout as its lastError', async () => {
    const store = new SqliteSessionStore({ path: join(root, 'timeout.db') });
    const slow = createAgentMachine({ model: scriptedModel([{ text: 'late', delayMs: 10_000 }]) });
    const ticks: ScheduleTick[] = [];
    const scheduler = await startScheduler({ store, agents: { slow }, runTimeoutMs: 300, onTick: (tick) => ticks.push(tick) });
    try {
      await schedule(store, { id: 'slow', session: 'slow', agent: 'slow', input: 'Take long.', at: Date.now() });
      scheduler.wake();
      for (let i = 0; i < 200 && ticks.length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 25));
      expect(ticks[0]).toMatchObject({ outcome: 'Cancelled', error: 'the scheduler cancelled the run past runTimeoutMs (300 ms)' });
      expect((await listSchedules(store))[0]).toMatchObject({ lastOutcome: 'Cancelled', lastError: 'the scheduler cancelled the run past runTimeoutMs (300 ms)', runs: 1 });
    } finally {
      await scheduler.stop({ graceMs: 200 });
      await store.close();
    }
  }, 20_000);
});

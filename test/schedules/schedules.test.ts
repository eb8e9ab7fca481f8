/** startScheduler's own checks, before any store is read (the behaviour is in conformance.ts, per store). */
import { describe, expect, it } from 'vitest';
import { createAgentMachine, MemorySessionStore } from '../../src/index.js';
import { InvalidSchedulerOptionsError, schedule, startScheduler } from '../../src/schedules.js';
import { SqliteSessionStore } from '../../src/sqlite.js';
import { foreignStore } from '../support/stores.js';
import { scriptedModel } from '../../src/testing.js';

const agents = { quick: createAgentMachine({ model: scriptedModel([{ text: 'done' }]) }) };

describe('startScheduler options', () => {
  it('are checked when it starts', async () => {
    const store = new MemorySessionStore();
    await expect(startScheduler({ store, agents: {} })).rejects.toThrow(InvalidSchedulerOptionsError);
    await expect(startScheduler({ store, agents, leaseMs: 10 })).rejects.toThrow(/leaseMs/);
    await expect(startScheduler({ store, agents: { x: {} as never } })).rejects.toThrow(/not an agent machine/);
    await expect(startScheduler({ store: new SqliteSessionStore({ path: ':memory:' }), agents })).rejects.toThrow(/:memory:/);
  });

  it('a store that cannot hold schedules is refused by name', async () => {
    // A store of the user's own, behind the SessionStore contract only.
    const foreign = foreignStore();
    await expect(schedule(foreign, { session: 's', agent: 'quick', input: 'Go.', every: 1_000 })).rejects.toThrow(/MemorySessionStore, a SqliteSessionStore or a PostgresSessionStore/);
  });
});

/**
 * The schedules API refuses a store or an agents option of the wrong shape where it enters, with
 * its typed error naming it, before any store is read: never a raw TypeError, nor a scheduler
 * that starts and then cannot run a tick.
 */
import { createMachine } from 'xstate';
import { describe, expect, it } from 'vitest';
import { createAgentMachine, MemorySessionStore } from '../../src/index.js';
import { deleteSchedule, InvalidScheduleError, InvalidSchedulerOptionsError, listSchedules, pauseSchedule, schedule, startScheduler } from '../../src/schedules.js';
import { scriptedModel } from '../../src/testing.js';

const quick = createAgentMachine({ model: scriptedModel([{ text: 'done' }]) });

describe('schedules: a store that is no object', () => {
  it.each([['null', null], ['undefined', undefined], ['a number', 5]])('%s is an InvalidScheduleError (before: null and undefined threw a raw TypeError reading besideSessions)', async (_, store) => {
    const calls = [
      () => schedule(store as never, { session: 's', agent: 'quick', input: 'Go.', every: 1_000 }),
      () => listSchedules(store as never),
      () => pauseSchedule(store as never, 'nightly'),
      () => deleteSchedule(store as never, 'nightly'),
    ];
    for (const call of calls) {
      const error = await call().then(() => undefined, (e: unknown) => e);
      expect(error).toBeInstanceOf(InvalidScheduleError);
      expect((error as Error).message).toMatch(/schedules are kept in a MemorySessionStore, a SqliteSessionStore or a PostgresSessionStore/);
    }
  });
});

describe('startScheduler: agents', () => {
  const store = new MemorySessionStore();
  it.each([
    ['a list (before: started, its agent named "0")', [quick], /agents must be an object of agent machines by name, or a Map/],
    ['a string (before: "agents.0 is not an agent machine")', 'quick', /agents must be an object of agent machines by name, or a Map/],
    ['a Map with a key that is no string (before: started, the agent never matched a schedule)', new Map<unknown, unknown>([[5, quick]]), /agents: a name must be a non-empty string/],
    ['an empty name (before: started; no schedule can name it)', { '': quick }, /agents: a name must be a non-empty string/],
    ['a machine that is no agent (before: started, every tick then failed to open its session)', { quick: createMachine({}) }, /agents\.quick is not an agent machine/],
  ])('%s is refused', async (_, agents, problem) => {
    const error = await startScheduler({ store, agents: agents as never }).then(
      async (scheduler) => {
        await scheduler.stop();
        return undefined;
      },
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(InvalidSchedulerOptionsError);
    expect((error as Error).message).toMatch(problem);
  });

  it('an object or a Map of agents by name still starts', async () => {
    for (const agents of [{ quick }, new Map([['quick', quick]])]) {
      const scheduler = await startScheduler({ store, agents, maxIdleMs: 50 });
      await scheduler.stop();
    }
  });
});

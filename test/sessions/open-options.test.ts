/**
 * `DurableSession.open`'s switches are checked where they enter: `create` and `resume` given as
 * anything but a boolean are refused with InvalidConfigError, nothing read or written. Before, a
 * `create: 'yes'` was read as false (the open continued a stored session it was told to refuse)
 * and a `resume: 'no'` as true (a stored run in flight went on).
 */
import { describe, expect, it } from 'vitest';
import { createAgentMachine, DurableSession, InvalidConfigError, MemorySessionStore } from '../../src/index.js';
import { InvalidSessionIdError } from '../../src/stores/errors.js';
import { scriptedModel } from '../../src/testing.js';

describe('DurableSession.open options', () => {
  it('refuses a create or resume that is no boolean, and touches nothing', async () => {
    const store = new MemorySessionStore();
    const machine = createAgentMachine({ model: scriptedModel([{ text: 'Hello.' }, { text: 'Again.' }]) });
    const first = await DurableSession.open({ machine, store, sessionId: 'kept' });
    first.send({ type: 'input', message: 'hi' });
    await first.whenIdle();
    await first.close();
    const version = (await store.load('kept'))!.version;
    for (const [name, value] of [['create', 'yes'], ['create', 1], ['resume', 'no'], ['resume', null]] as const) {
      const opened = DurableSession.open({ machine, store, sessionId: 'kept', [name]: value } as never);
      await expect(opened).rejects.toThrow(InvalidConfigError);
      await expect(DurableSession.open({ machine, store, sessionId: 'kept', [name]: value } as never)).rejects.toThrow(`DurableSession.open: ${name} must be true or false`);
    }
    expect((await store.load('kept'))!.version).toBe(version);
    // The booleans still do what they say.
    await expect(DurableSession.open({ machine, store, sessionId: 'kept', create: true })).rejects.toThrow(/already exists/);
    const again = await DurableSession.open({ machine, store, sessionId: 'kept', create: false, resume: false });
    await again.close();
  });

  it('refuses a store, machine or hook of the wrong type with an InvalidConfigError naming it', async () => {
    // Before: each threw a raw TypeError from inside open ('options.store.load is not a function', 'outer is not a function', ...).
    const store = new MemorySessionStore();
    const machine = createAgentMachine({ model: scriptedModel([{ text: 'Hello.' }]) });
    for (const [options, problem] of [
      [{ store: 'x' }, /store must be a session store/],
      [{ machine: 'x' }, /machine must be an agent/],
      [{ inspect: 'x' }, /inspect must be a function or an observer/],
      [{ wrapExecutor: 'x' }, /wrapExecutor must be a function/],
      [{ attach: 'x' }, /attach must be a function/],
      [{ parent: 'x' }, /parent must be an actor/],
    ] as const) {
      const given = (): never => Object.assign({ machine, store, sessionId: 'parts' }, options) as never;
      await expect(DurableSession.open(given())).rejects.toThrow(InvalidConfigError);
      await expect(DurableSession.open(given())).rejects.toThrow(problem);
    }
    expect(await store.load('parts')).toBeUndefined();
  });

  it('a missing sessionId says the option is required and what to give', async () => {
    // Before: 'invalid session id of type undefined: a session id must be a string' (the store's id check), which names no option.
    const store = new MemorySessionStore();
    const machine = createAgentMachine({ model: scriptedModel([{ text: 'Hello.' }]) });
    const opened = DurableSession.open({ machine, store } as never);
    await expect(opened).rejects.toThrow(InvalidSessionIdError);
    await expect(DurableSession.open({ machine, store } as never)).rejects.toThrow(/DurableSession\.open: sessionId is required: a string naming the conversation/);
    await expect(DurableSession.open({ machine, store, sessionId: undefined } as never)).rejects.toThrow(/sessionId is required/);
    expect(await store.list()).toEqual([]);
  });
});

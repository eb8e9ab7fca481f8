/**
 * A cancel's grace does not outlive its process. A run cancelled while an operation hook runs waits
 * in `Running.Cancelling` for the hook's answer, at most `graceMs`. An actor persisted there and
 * restored (`createActor(agent, { snapshot })`, alone or with the statechart that invokes it) has
 * neither the hook (it ran in the process that is gone) nor the grace's timer (XState keeps none
 * in a snapshot): the run ends `Cancelled` at once, as a second cancel ends it. Before, the
 * restored run waited in `Cancelling` for ever.
 */
import { describe, expect, it } from 'vitest';
import { assign, createActor, setup, waitFor } from 'xstate';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import type { AgentOutput } from '../../../src/agent/protocol/actor-types.js';
import type { Operation } from '../../../src/agent/operations/operation.js';
import { scriptedModel } from '../../../src/testing.js';
import { echoTool, providerValid } from '../../support/driver.js';

const WAIT = { timeout: 3_000 };

/** An agent whose beforeTools hook never returns, and how many times it was entered. */
function hanging() {
  const seen = { entered: 0 };
  const stuck: Operation = { name: 'stuck', beforeTools: () => (seen.entered++, new Promise(() => {})) };
  const model = scriptedModel([{ toolCalls: [{ id: 'a', name: 'echo', args: { text: 'x' } }] }, { text: 'never' }]);
  return { agent: createAgentMachine({ model, tools: [echoTool], operations: [stuck] }), seen };
}

const throughJson = <T>(value: T): T => JSON.parse(JSON.stringify(value)) as T;

describe('an actor restored during the grace of a cancel', () => {
  it('ends Cancelled at once, its calls answered, the actor alive', async () => {
    const { agent, seen } = hanging();
    const first = createActor(agent, { input: { prompt: 'go', sessionId: 's' } }).start();
    await waitFor(first, (s) => s.matches({ Running: 'Operating' }), WAIT);
    first.send({ type: 'cancel', graceMs: 60_000 });
    expect(first.getSnapshot().matches({ Running: 'Cancelling' })).toBe(true);
    const snapshot = throughJson(first.getPersistedSnapshot());
    first.stop();

    const started = Date.now();
    const done = await waitFor(createActor(agent, { snapshot }).start(), (s) => s.status === 'done', WAIT);
    expect(Date.now() - started).toBeLessThan(1_000);
    expect(done.output?.outcome).toEqual({ type: 'Cancelled' });
    expect(providerValid(done.output!.messages)).toBe(true);
    // The hook is not run again: the run was cancelled.
    expect(seen.entered).toBe(1);
  });

  it('invoked by a parent statechart restored from JSON: the parent gets the Cancelled output', async () => {
    const { agent } = hanging();
    const parentMachine = setup({ types: { context: {} as { output: AgentOutput | null } }, actors: { agent } }).createMachine({
      context: { output: null },
      initial: 'Working',
      states: {
        Working: { invoke: { id: 'helper', src: 'agent', input: { prompt: 'go', sessionId: 'child' }, onDone: { target: 'Done', actions: assign({ output: ({ event }) => event.output }) } } },
        Done: { type: 'final' },
      },
    });
    const first = createActor(parentMachine).start();
    const helper = first.getSnapshot().children.helper!;
    await waitFor(helper, (s) => s.matches({ Running: 'Operating' }), WAIT);
    helper.send({ type: 'cancel', graceMs: 60_000 });
    const snapshot = throughJson(first.getPersistedSnapshot());
    first.stop();

    const done = await waitFor(createActor(parentMachine, { snapshot }).start(), (s) => s.status === 'done', WAIT);
    expect(done.context.output?.outcome).toEqual({ type: 'Cancelled' });
  });
});

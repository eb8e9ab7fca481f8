/**
 * The time budget holds for an actor restored from its persisted snapshot
 * (`createActor(agent, { snapshot })`, alone or as the child of a user's statechart restored with
 * its parent), as docs/agent/budget.md says of every host. XState keeps no timer in a snapshot, so
 * the chart arms its deadline again as the restored agent's IO attaches: the call made again is
 * cut at the limit, and a run restored past its limit is sealed (or paused) at once, without
 * making its call again. Before, the restored run had no deadline at all: a model call that takes
 * 5 s ran to its answer under a 300 ms budget, and one that never answers held the run for ever.
 */
import { describe, expect, it } from 'vitest';
import { assign, createActor, setup, waitFor } from 'xstate';
import { z } from 'zod';
import { createAgentMachine, defineTool, type AgentOutput, type Model } from '../../../src/index.js';
import { scriptedModel } from '../../../src/testing.js';

const WAIT_MS = 3_000;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Resolves once `done()` holds (looked at every 2 ms), or fails the test after WAIT_MS. */
async function until(done: () => boolean): Promise<void> {
  for (const end = Date.now() + WAIT_MS; !done(); await sleep(2)) {
    if (Date.now() > end) throw new Error(`not so after ${WAIT_MS} ms`);
  }
}

/** A model that answers after 5 s unless its signal aborts first. */
function slowModel() {
  const seen = { calls: 0, aborted: 0 };
  const model: Model = {
    name: 'slow',
    generate: (request) =>
      new Promise((resolve, reject) => {
        seen.calls++;
        const timer = setTimeout(() => resolve({ message: { role: 'assistant', content: 'Late answer.' }, finishReason: 'stop' }), 5_000);
        request.signal.addEventListener('abort', () => (clearTimeout(timer), seen.aborted++, reject(request.signal.reason)), { once: true });
      }),
  };
  return { model, seen };
}

/** The snapshot as another process reads it back. */
const throughJson = <T>(value: T): T => JSON.parse(JSON.stringify(value)) as T;

/** Runs `agent` until `ready` holds, returns its persisted snapshot (through JSON) and stops it. */
async function persistedWhen(agent: ReturnType<typeof createAgentMachine>, ready: (actor: ReturnType<typeof createActor<typeof agent>>) => boolean) {
  const actor = createActor(agent, { input: { prompt: 'Go.', sessionId: 'timed' } }).start();
  await until(() => ready(actor));
  const snapshot = throughJson(actor.getPersistedSnapshot());
  actor.stop();
  return snapshot;
}

describe('an actor restored mid model call keeps its time budget', () => {
  it('within the limit: the call made again is cut at the limit and the run Sealed by the budget', async () => {
    const { model, seen } = slowModel();
    const agent = createAgentMachine({ model, retry: false, budget: { maxDurationMs: 300 } });
    const snapshot = await persistedWhen(agent, () => seen.calls === 1);
    const restored = createActor(agent, { snapshot }).start();
    const started = Date.now();
    const done = await waitFor(restored, (s) => s.status === 'done', { timeout: WAIT_MS });
    // Before: Completed with 'Late answer.' after 5 s.
    expect(done.output?.outcome).toMatchObject({ type: 'Sealed', reason: expect.stringMatching(/^budget: \d+ ms elapsed, limit 300 ms/) });
    expect(Date.now() - started).toBeLessThan(1_000);
    expect(seen).toEqual({ calls: 2, aborted: 2 });
  });

  it('past the limit: sealed at once, the call not made again', async () => {
    const { model, seen } = slowModel();
    const agent = createAgentMachine({ model, retry: false, budget: { maxDurationMs: 150 } });
    const snapshot = await persistedWhen(agent, () => seen.calls === 1);
    await sleep(250);
    const restored = createActor(agent, { snapshot }).start();
    const done = await waitFor(restored, (s) => s.status === 'done', { timeout: WAIT_MS });
    expect(done.output?.outcome).toMatchObject({ type: 'Sealed', reason: expect.stringMatching(/^budget: \d+ ms elapsed, limit 150 ms/) });
    expect(seen.calls).toBe(1);
  });

  it('past the limit with pause: waits in BudgetPaused without the call; a raise makes it again', async () => {
    const { model, seen } = slowModel();
    const agent = createAgentMachine({ model, retry: false, budget: { maxDurationMs: 150, pause: true } });
    const snapshot = await persistedWhen(agent, () => seen.calls === 1);
    await sleep(250);
    const restored = createActor(agent, { snapshot }).start();
    await waitFor(restored, (s) => s.matches({ Running: 'BudgetPaused' }), { timeout: WAIT_MS });
    expect(seen.calls).toBe(1);
    restored.send({ type: 'budget.raise', budget: { maxDurationMs: 60_000 } });
    await until(() => seen.calls === 2);
    restored.stop();
  });
});

describe('an actor restored while its batch waits for a decision keeps its time budget', () => {
  it('the limit passing while it waits seals the run, its waiting call answered interrupted', async () => {
    const ship = defineTool({ name: 'ship', description: 'Ships.', input: z.object({}), needsApproval: true, execute: () => 'shipped' });
    const agent = createAgentMachine({ model: scriptedModel([{ toolCalls: [{ id: 'c1', name: 'ship', args: {} }] }, { text: 'Done.' }]), tools: [ship], budget: { maxDurationMs: 300 } });
    const snapshot = await persistedWhen(agent, (actor) => actor.getSnapshot().matches({ Running: { AwaitingTools: { Working: { Approval: 'AwaitingApproval' } } } }));
    const restored = createActor(agent, { snapshot }).start();
    // Before: it waited for the decision for ever, its deadline gone with the process.
    const done = await waitFor(restored, (s) => s.status === 'done', { timeout: WAIT_MS });
    expect(done.output?.outcome).toMatchObject({ type: 'Sealed', reason: expect.stringMatching(/^budget: /) });
    expect(done.output?.messages.at(-1)).toMatchObject({ role: 'tool', toolCallId: 'c1', isError: true });
  });
});

describe('an agent restored with the statechart that invokes it keeps its time budget', () => {
  it("the parent's snapshot through JSON, restored: the child's call is cut at the limit and the parent gets the Sealed output", async () => {
    const { model, seen } = slowModel();
    const agent = createAgentMachine({ model, retry: false, budget: { maxDurationMs: 300 } });
    const parentMachine = setup({ types: { context: {} as { output: AgentOutput | null } }, actors: { agent } }).createMachine({
      context: { output: null },
      initial: 'Working',
      states: {
        Working: { invoke: { src: 'agent', input: { prompt: 'Go.', sessionId: 'child' }, onDone: { target: 'Done', actions: assign({ output: ({ event }) => event.output }) } } },
        Done: { type: 'final' },
      },
    });
    const first = createActor(parentMachine).start();
    await until(() => seen.calls === 1);
    const snapshot = throughJson(first.getPersistedSnapshot());
    first.stop();
    const restored = createActor(parentMachine, { snapshot }).start();
    const done = await waitFor(restored, (s) => s.status === 'done', { timeout: WAIT_MS });
    expect(done.context.output?.outcome).toMatchObject({ type: 'Sealed', reason: expect.stringMatching(/^budget: \d+ ms elapsed, limit 300 ms/) });
  });
});

/**
 * No patched machine: the snapshot check, `withExecutor` and `withClock` wrap the actor logic,
 * so they survive `provide()` (and each other), and the machine object is XState's own.
 */
import { describe, expect, it } from 'vitest';
import { createActor, toPromise } from 'xstate';
import { createAgentMachine, type AgentMachine } from '../../../machines/agent.machine.js';
import type { Executor } from '../../../src/agent/protocol/executor.js';
import { InvalidSnapshotError } from '../../../src/errors.js';
import { scriptedModel } from '../../../src/testing.js';

const agent = () => createAgentMachine({ model: scriptedModel([{ text: 'hi' }]) });

describe('a machine derived with provide()', () => {
  it('still checks a persisted snapshot: a tampered one does not start active', async () => {
    const machine = agent();
    const actor = createActor(machine, { input: { prompt: 'x' } }).start();
    await toPromise(actor);
    const tampered = structuredClone(actor.getPersistedSnapshot()) as unknown as { context: { runIndex: unknown } };
    tampered.context.runIndex = -3;
    for (const derived of [machine, machine.provide({}), machine.provide({}).provide({}), machine.withExecutor((inner) => inner).provide({})]) {
      const restored = createActor(derived, { snapshot: tampered as never });
      expect(restored.getSnapshot().status).toBe('error');
      expect(InvalidSnapshotError.isInstance((restored.getSnapshot() as { error?: unknown }).error)).toBe(true);
    }
  });

  it('keeps withExecutor and withClock, and they work', async () => {
    const seen: string[] = [];
    const logging = (inner: Executor): Executor => (effect, perform) => {
      seen.push(effect.kind);
      return inner(effect, perform);
    };
    // provide()'s declared type is XState's; the machine it returns keeps the agent's methods.
    const derived = agent().provide({}) as unknown as AgentMachine;
    expect(typeof derived.withExecutor).toBe('function');
    expect(typeof derived.withClock).toBe('function');
    const output = await toPromise(createActor(derived.withExecutor(logging).withClock(() => 42), { input: { prompt: 'x' } }).start());
    expect(output.outcome).toEqual({ type: 'Completed', finalText: 'hi' });
    expect(seen).toEqual(['model']);
  });

  it('what provide() gave is kept by withExecutor and withClock (as DurableSession and the Restate host derive it)', async () => {
    const seen: string[] = [];
    const provided = agent().provide({ actions: { emitRunStarted: () => seen.push('provided') } } as never) as unknown as AgentMachine;
    for (const derived of [provided.withExecutor((inner) => inner), provided.withClock(() => 42), provided.withClock(() => 42).withExecutor((inner) => inner)]) {
      const actor = createActor(derived, { input: { prompt: 'x' } }).start();
      const output = await toPromise(actor);
      expect(output.outcome).toEqual({ type: 'Completed', finalText: 'hi' });
    }
    expect(seen).toEqual(['provided', 'provided', 'provided']);
  });

  it('a machine derived with withClock runs its delays on the new clock, not the one it was derived from', () => {
    const timed = createAgentMachine({ model: scriptedModel([{ text: 'hi' }]), budget: { maxDurationMs: 1_000 } });
    const clocked = timed.withClock(() => 500);
    const delay = clocked.implementations.delays.budgetDeadline as (args: { context: unknown }) => number;
    const context = { runStartedAt: 0, brain: { context: { cancelled: false } } };
    // 1,000 ms from a run started at 0, read at 500: 500 ms left (and one past the limit).
    expect(delay({ context })).toBe(501);
  });

  it('sets no property on the machine object', () => {
    const machine = agent();
    expect(Object.hasOwn(machine, 'withExecutor')).toBe(false);
    expect('withExecutor' in machine).toBe(true);
  });
});

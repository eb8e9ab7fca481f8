/**
 * The driver's clock (`AgentConfig.clock`, `machine.withClock`): a run's start and its time
 * budget read it and nothing else, so a durable engine that replays a run with a journaled clock
 * makes the same decisions (loopchart/restate relies on it).
 */
import { describe, expect, it } from 'vitest';
import { createActor } from 'xstate';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import type { Executor } from '../../../src/agent/protocol/executor.js';
import { scriptedModel } from '../../../src/models/scripted.js';

const finished = (actor: ReturnType<typeof createActor>) =>
  new Promise<void>((resolve) => {
    const check = () => actor.getSnapshot().value === 'Idle' && actor.getSnapshot().context.lastRun !== null;
    if (check()) return resolve();
    const subscription = actor.subscribe(() => check() && (subscription.unsubscribe(), resolve()));
  });

describe('the driver clock', () => {
  it('stamps a run with the configured clock, not the wall clock', async () => {
    const machine = createAgentMachine({ model: scriptedModel([{ text: 'hi' }]), clock: () => 1_234 });
    const actor = createActor(machine).start();
    actor.send({ type: 'input', message: 'hello' });
    await finished(actor);
    expect(actor.getSnapshot().context.runStartedAt).toBe(1_234);
  });

  it('judges a time budget by the clock: time that passed on the clock seals the run', async () => {
    let now = 0;
    // Each model call advances the clock by 10 s (the wall clock hardly moves).
    const model = scriptedModel([{ text: '', toolCalls: [{ name: 'missing', args: {} }] }, { text: 'done' }]);
    const ticking = { name: 'ticking', generate: async (request: Parameters<typeof model.generate>[0]) => ((now += 10_000), model.generate(request)) };
    const machine = createAgentMachine({ model: ticking, budget: { maxDurationMs: 5_000 }, clock: () => now });
    const actor = createActor(machine).start();
    actor.send({ type: 'input', message: 'go' });
    await finished(actor);
    expect(actor.getSnapshot().context.lastRun?.outcome).toEqual({ type: 'Sealed', reason: 'budget: 10000 ms elapsed, limit 5000 ms' });
  });

  it('withClock swaps the clock and keeps the executor it was given', async () => {
    const seen: string[] = [];
    const logged: Executor = async (effect, perform) => (seen.push(effect.kind), perform());
    const machine = createAgentMachine({ model: scriptedModel([{ text: 'hi' }]) }).withExecutor(() => logged).withClock(() => 99);
    const actor = createActor(machine).start();
    actor.send({ type: 'input', message: 'hello' });
    await finished(actor);
    expect(actor.getSnapshot().context.runStartedAt).toBe(99);
    expect(seen).toEqual(['model']);
  });
});

/**
 * AgentStepper holds the time budget while a step runs, as the actor and DurableSession do
 * (docs/agent/budget.md): the deadline is an XState delayed event of the state that performs the
 * side effect, which a session restored from its snapshot does not carry, so the restored chart
 * arms it again for the time the run has left, and `step()` takes it as one of its effects. A model call that honours its signal and never answers
 * ends the step at `maxDurationMs` (aborted), and applying the step's effects ends the run
 * `Sealed` by the budget, or paused with `pause`, instead of holding the step until the
 * stepper's own `timeoutMs`.
 */
import { describe, expect, it } from 'vitest';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import type { AgentContext } from '../../../src/agent/core/context.js';
import type { AgentOutput } from '../../../src/agent/protocol/actor-types.js';
import { AgentStepper, type SteppedSession } from '../../../src/agent/hosts/stepper.js';
import { ModelError, type Model } from '../../../src/model.js';

/** A model whose first `hangs` calls never answer (each rejects once its signal aborts), then answers. */
function stuckModel(hangs = Infinity) {
  const seen = { calls: 0, aborted: 0 };
  const model: Model = {
    name: 'stuck',
    generate: ({ signal }) => {
      if (++seen.calls > hangs) return Promise.resolve({ message: { role: 'assistant', content: 'Answered.' }, finishReason: 'stop' });
      return new Promise((_, reject) =>
        signal?.addEventListener(
          'abort',
          () => {
            seen.aborted++;
            reject(signal.reason ?? new Error('aborted'));
          },
          { once: true },
        ),
      );
    },
  };
  return { model, seen };
}

/** How the stepped session's run ended. */
function outcomeOf(session: SteppedSession): AgentOutput['outcome'] | undefined {
  const { output, context } = session as unknown as { output?: AgentOutput; context: AgentContext };
  return output?.outcome ?? context.lastRun?.outcome;
}

/**
 * The most a step the deadline ends may take here: well inside the stepper's own `timeoutMs`
 * (3 s), which a step the deadline did not end would reach (StepTimeoutError). A tighter bound
 * (1 s after a 150 ms deadline) failed once on a loaded 2-core machine (the file's first step, 1.3 s).
 */
const ENDED_BY_DEADLINE_MS = 2_000;

/** The session as a host stores and loads it (plain JSON). */
const stored = (session: SteppedSession): SteppedSession => JSON.parse(JSON.stringify(session)) as SteppedSession;

describe('AgentStepper and the time budget', () => {
  it('a model call that never answers: the step ends at maxDurationMs, aborted, and the run is Sealed by the budget', async () => {
    const { model, seen } = stuckModel();
    const machine = createAgentMachine({ model, retry: false, budget: { maxDurationMs: 150 } });
    const stepper = new AgentStepper(machine, { input: { prompt: 'Think forever.' } }, { timeoutMs: 3_000 });
    const started = Date.now();
    const { status, effects } = await stepper.step();
    expect(Date.now() - started).toBeLessThan(ENDED_BY_DEADLINE_MS);
    expect(status).toBe('continues');
    expect(seen).toEqual({ calls: 1, aborted: 1 });
    stepper.apply(effects);
    expect(stepper.status()).toBe('finished');
    expect(outcomeOf(stepper.session)).toMatchObject({ type: 'Sealed', reason: expect.stringMatching(/^budget: \d+ ms elapsed, limit 150 ms/) });
  });

  it('a session stored and loaded by another stepper keeps the deadline of its run: past it, the step ends at once', async () => {
    const { model, seen } = stuckModel();
    const machine = createAgentMachine({ model, retry: false, budget: { maxDurationMs: 150 } });
    const saved = stored(new AgentStepper(machine, { input: { prompt: 'Think forever.' } }).session);
    await new Promise((resolve) => setTimeout(resolve, 200));
    const stepper = new AgentStepper(machine, { session: stored(saved) }, { timeoutMs: 3_000 });
    const started = Date.now();
    const { effects } = await stepper.step();
    expect(Date.now() - started).toBeLessThan(ENDED_BY_DEADLINE_MS);
    expect(seen.aborted).toBe(seen.calls);
    stepper.apply(effects);
    expect(outcomeOf(stepper.session)).toMatchObject({ type: 'Sealed', reason: expect.stringMatching(/^budget: \d+ ms elapsed, limit 150 ms/) });
  });

  it('with pause: the call is aborted and the run waits (yielded); a raise makes the call again, which answers', async () => {
    const { model, seen } = stuckModel(1);
    const machine = createAgentMachine({ model, retry: false, budget: { maxDurationMs: 150, pause: true } });
    const stepper = new AgentStepper(machine, { input: { prompt: 'Think.' } }, { timeoutMs: 3_000 });
    const started = Date.now();
    const first = await stepper.step();
    expect(Date.now() - started).toBeLessThan(ENDED_BY_DEADLINE_MS);
    stepper.apply(first.effects);
    expect(stepper.status()).toBe('yielded');
    stepper.apply([{ type: 'budget.raise', budget: { maxDurationMs: 60_000 } }]);
    for (let i = 0; i < 5 && stepper.status() === 'continues'; i++) stepper.apply((await stepper.step()).effects);
    expect(outcomeOf(stepper.session)).toMatchObject({ type: 'Completed', finalText: 'Answered.' });
    expect(seen).toEqual({ calls: 2, aborted: 1 });
  });

  it('a model that answers in time: the step takes its reply, nothing of the deadline in its effects', async () => {
    const { model } = stuckModel(0);
    const stepper = new AgentStepper(createAgentMachine({ model, retry: false, budget: { maxDurationMs: 60_000 } }), { input: { prompt: 'Hi.' } });
    const { effects } = await stepper.step();
    expect(effects.map((effect) => effect.type)).toEqual(['io.replied']);
    stepper.apply(effects);
    expect(outcomeOf(stepper.session)).toMatchObject({ type: 'Completed', finalText: 'Answered.' });
  });
});

describe('AgentStepper and a deadline timer that fires before the run\'s clock says the time is up', () => {
  // A timer counts on the monotonic clock, the budget on the run's `clock` (wall time by default):
  // after a step back of the wall clock (or by a rounding ms) the deadline's timer fires while the
  // run has time left, and the chart arms it again (0a95198). Before, the step still handed that
  // event on as an effect: the step's actor took the model's reply, but `apply`, later by the
  // clock, took the stale deadline first and sealed the run, the reply dropped.
  it('an early fire the chart armed again is no effect: apply takes the reply as the step did', async () => {
    let offset = 0;
    const clock = () => Date.now() + offset;
    const model: Model = {
      name: 'late',
      generate: async () => {
        // The wall clock steps back 300 ms while the call runs: the deadline's timer (300 ms) fires with 300 ms left by the run's clock.
        offset = -300;
        await new Promise((resolve) => setTimeout(resolve, 400));
        return { message: { role: 'assistant', content: 'Answered.' }, finishReason: 'stop' };
      },
    };
    const stepper = new AgentStepper(createAgentMachine({ model, retry: false, clock, budget: { maxDurationMs: 300 } }), { input: { prompt: 'Hi.' } }, { timeoutMs: 3_000 });
    const { effects } = await stepper.step();
    expect(effects.map((effect) => effect.type)).toEqual(['io.replied']);
    // Applied once the clock has stepped forward again, past the deadline.
    offset = 0;
    stepper.apply(effects);
    expect(outcomeOf(stepper.session)).toMatchObject({ type: 'Completed', finalText: 'Answered.' });
  });
});

describe('AgentStepper and a provider usage limit', () => {
  it("a run paused on a usage limit makes the same call again at the stored time, not a StepTimeoutError", async () => {
    let calls = 0;
    const model: Model = {
      name: 'limited',
      generate: async () => {
        if (++calls === 1) throw new ModelError('Usage limit reached', { status: 429, retryable: true, retryAfterMs: 200 });
        return { message: { role: 'assistant', content: 'After the limit.' }, finishReason: 'stop' };
      },
    };
    const machine = createAgentMachine({ model, retry: false, pauseOnUsageLimit: true });
    const stepper = new AgentStepper(machine, { input: { prompt: 'Hi.' } }, { timeoutMs: 3_000 });
    for (let i = 0; i < 10 && stepper.status() === 'continues'; i++) {
      const { effects } = await stepper.step(stored(stepper.session));
      stepper.apply(effects);
    }
    expect(calls).toBe(2);
    expect(outcomeOf(stepper.session)).toMatchObject({ type: 'Completed', finalText: 'After the limit.' });
  });
});

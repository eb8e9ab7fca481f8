/**
 * Past a time limit no call of a tool batch starts, however it waits: a call queued behind
 * `toolConcurrency` (handed to the IO, not started) is held like a call waiting for approval: the
 * calls in flight finish, the run pauses, and it runs after the raise (a seal answers it
 * interrupted instead). Before, it started once a running call made room.
 * Real actors over the library's scripted model, real timers with short limits.
 */
import { describe, expect, it } from 'vitest';
import { createActor, waitFor } from 'xstate';
import { createAgentMachine, type AgentActor } from '../../../src/index.js';
import { scriptedModel } from '../../../src/testing.js';
import { ask, collect, freeTool, recordingModel, resultsById } from '../../support/hitl.js';

const LIMIT_MS = 200;
/** Every wait of this file is bounded by this (the limits are a few hundred ms). */
const WAIT_MS = 5_000;

const paused = (actor: AgentActor) => waitFor(actor, (s) => s.matches({ Running: 'BudgetPaused' }), { timeout: WAIT_MS });
const done = (actor: AgentActor) => waitFor(actor, (s) => s.status === 'done', { timeout: WAIT_MS });
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
/** Long enough for any call handed over to start, finish and be reported. */
const settle = () => sleep(50);

/** Both replies of the runs here: two lookups, then the answer. */
const replies = () => [{ text: 'looking', toolCalls: [ask('lookup', { key: 'a' }), ask('lookup', { key: 'b' })] }, { text: 'done' }];

function agent(options: { pause: boolean; concurrency?: number | undefined }) {
  const lookup = freeTool('lookup', { held: true });
  const model = recordingModel(scriptedModel(replies()));
  const machine = createAgentMachine({
    model: model.model,
    tools: [lookup.tool],
    ...(options.concurrency !== undefined && { toolConcurrency: options.concurrency }),
    budget: { maxDurationMs: LIMIT_MS, ...(options.pause && { pause: ['duration' as const] }) },
  });
  const actor = createActor(machine, { input: { prompt: 'go' } });
  const events = collect(actor, 'budget.paused', 'tool.started', 'tool.finished');
  return { actor, lookup, model, events };
}

describe('a call queued behind toolConcurrency when the time limit passes', () => {
  it('pausing: it does not start when the running call makes room; the run pauses, and it runs after the raise', async () => {
    const { actor, lookup, model, events } = agent({ pause: true, concurrency: 1 });
    actor.start();
    try {
      await lookup.started;
      // Past the limit with call_1_0 in flight and call_1_1 queued behind it.
      await sleep(LIMIT_MS + 100);
      expect(actor.getSnapshot().matches({ Running: 'BudgetPaused' })).toBe(false);
      lookup.release();
      await paused(actor);
      await settle();
      expect(lookup.log.started.map((call) => call.id)).toEqual(['call_1_0']);
      expect(events.filter((event) => event.type === 'budget.paused')).toMatchObject([{ kind: 'duration', limit: LIMIT_MS }]);
      expect(actor.getSnapshot().matches({ Running: 'BudgetPaused' })).toBe(true);
      actor.send({ type: 'budget.raise', budget: { maxDurationMs: 60_000 } });
      const output = (await done(actor)).output!;
      expect(output.outcome).toEqual({ type: 'Completed', finalText: 'done' });
      // Each call ran once, the queued one after the raise; each announced once.
      expect(lookup.log.started.map((call) => call.id)).toEqual(['call_1_0', 'call_1_1']);
      expect(events.filter((event) => event.type === 'tool.started').map((event) => event.call.id)).toEqual(['call_1_0', 'call_1_1']);
      const results = resultsById(model.requests[1]!);
      expect([results.get('call_1_0')?.content, results.get('call_1_1')?.content]).toEqual(['value of a', 'value of b']);
      expect(model.invalid()).toEqual([]);
    } finally {
      actor.stop();
    }
  });

  it('pausing, then sealed: the queued call never starts and is answered interrupted', async () => {
    const { actor, lookup } = agent({ pause: true, concurrency: 1 });
    actor.start();
    try {
      await lookup.started;
      await sleep(LIMIT_MS + 100);
      lookup.release();
      await paused(actor);
      actor.send({ type: 'seal', reason: 'enough' });
      const output = (await done(actor)).output!;
      expect(output.outcome).toEqual({ type: 'Sealed', reason: 'enough' });
      expect(lookup.log.started.map((call) => call.id)).toEqual(['call_1_0']);
      const results = resultsById(output.messages);
      expect(results.get('call_1_0')?.content).toBe('value of a');
      expect(results.get('call_1_1')?.content).toMatch(/interrupted/);
    } finally {
      actor.stop();
    }
  });

  it('not pausing: the run is sealed at the limit, the queued call never starts and is answered interrupted', async () => {
    const { actor, lookup } = agent({ pause: false, concurrency: 1 });
    actor.start();
    try {
      const output = (await done(actor)).output!;
      lookup.release();
      await settle();
      expect(output.outcome).toMatchObject({ type: 'Sealed', reason: expect.stringMatching(/^budget: \d+ ms elapsed/) });
      expect(lookup.log.started.map((call) => call.id)).toEqual(['call_1_0']);
      expect(resultsById(output.messages).get('call_1_1')?.content).toMatch(/interrupted/);
    } finally {
      actor.stop();
    }
  });
});

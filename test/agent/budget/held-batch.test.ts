/**
 * Past a time limit no call of a tool batch starts, however it waits:
 * - a call queued behind `toolConcurrency` (handed to the IO, not started) is held like a call
 *   waiting for approval: the calls in flight finish, the run pauses, and it runs after the raise
 *   (a seal answers it interrupted instead). Before, it started once a running call made room.
 * - a batch the model asked for as the limit passed (its reply taken before the deadline's timer
 *   fired), or whose `beforeTools` hook took the rest of the time, pauses, or is sealed, before
 *   any call of it starts. Before, the between-steps check skipped a run about to call tools:
 *   the batch started and was held or cut a millisecond later.
 * Real actors over the library's scripted model, real timers with short limits.
 */
import { describe, expect, it } from 'vitest';
import { createActor, waitFor } from 'xstate';
import { createAgentMachine, type AgentActor, type Model, type Operation } from '../../../src/index.js';
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

/**
 * A model whose first reply comes as the time limit passes: its timer fires a little before the
 * deadline's, and it answers only once the limit is behind it (a busy wait: the event loop runs no
 * other timer meanwhile), so the run takes the reply before the deadline's timer fires.
 */
function lateFirstReply(inner: Model): Model {
  let calls = 0;
  return {
    name: inner.name,
    async generate(request) {
      if (calls++ === 0) {
        const asked = Date.now();
        await sleep(LIMIT_MS - 50);
        while (Date.now() - asked <= LIMIT_MS + 5) {
          // Spin past the limit: the deadline's timer is due and cannot fire before the reply is taken.
        }
      }
      return inner.generate(request);
    },
  };
}

/** A `beforeTools` hook that takes the rest of the time budget, counting its runs. */
function slowHook() {
  const runs: number[] = [];
  const operation: Operation = {
    name: 'slow-hook',
    async beforeTools() {
      runs.push(Date.now());
      await sleep(LIMIT_MS + 50);
    },
  };
  return { operation, runs };
}

function agent(options: { pause: boolean; late?: boolean | undefined; concurrency?: number | undefined; operations?: Operation[] | undefined }) {
  const lookup = freeTool('lookup', { held: !options.late && !options.operations });
  const scripted = scriptedModel(replies());
  const model = recordingModel(options.late ? lateFirstReply(scripted) : scripted);
  const machine = createAgentMachine({
    model: model.model,
    tools: [lookup.tool],
    ...(options.concurrency !== undefined && { toolConcurrency: options.concurrency }),
    ...(options.operations && { operations: options.operations }),
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

describe('a batch asked for as the time limit passes', () => {
  it('pausing: the run pauses before any call of it starts, and the batch runs after the raise', async () => {
    const { actor, lookup, model, events } = agent({ pause: true, late: true });
    actor.start();
    try {
      await paused(actor);
      await settle();
      expect(lookup.log.started).toEqual([]);
      expect(events.filter((event) => event.type === 'budget.paused')).toMatchObject([{ kind: 'duration', limit: LIMIT_MS }]);
      actor.send({ type: 'budget.raise', budget: { maxDurationMs: 60_000 } });
      const output = (await done(actor)).output!;
      expect(output.outcome).toEqual({ type: 'Completed', finalText: 'done' });
      expect(lookup.log.started.map((call) => call.id)).toEqual(['call_1_0', 'call_1_1']);
      // Each call's end reported once.
      expect(events.filter((event) => event.type === 'tool.finished').map((event) => event.call.id)).toEqual(['call_1_0', 'call_1_1']);
      expect(resultsById(model.requests[1]!).get('call_1_1')?.content).toBe('value of b');
    } finally {
      actor.stop();
    }
  });

  it('pausing, the limit passed in a beforeTools hook: the run pauses before any call starts, and after the raise the batch runs without the hook again', async () => {
    const hook = slowHook();
    const { actor, lookup } = agent({ pause: true, operations: [hook.operation] });
    actor.start();
    try {
      await paused(actor);
      await settle();
      expect(lookup.log.started).toEqual([]);
      expect(hook.runs).toHaveLength(1);
      actor.send({ type: 'budget.raise', budget: { maxDurationMs: 60_000 } });
      const output = (await done(actor)).output!;
      expect(output.outcome).toEqual({ type: 'Completed', finalText: 'done' });
      expect(lookup.log.started.map((call) => call.id)).toEqual(['call_1_0', 'call_1_1']);
      expect(hook.runs).toHaveLength(1);
    } finally {
      actor.stop();
    }
  });

  it('not pausing: the run is sealed before any call of it starts, its calls answered interrupted', async () => {
    const { actor, lookup } = agent({ pause: false, late: true });
    actor.start();
    try {
      const output = (await done(actor)).output!;
      await settle();
      expect(output.outcome).toMatchObject({ type: 'Sealed', reason: expect.stringMatching(/^budget: \d+ ms elapsed, limit 200 ms$/) });
      expect(lookup.log.started).toEqual([]);
      const results = resultsById(output.messages);
      expect([results.get('call_1_0')?.content, results.get('call_1_1')?.content]).toEqual([expect.stringMatching(/interrupted/), expect.stringMatching(/interrupted/)]);
    } finally {
      actor.stop();
    }
  });
});

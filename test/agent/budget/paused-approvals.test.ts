/**
 * A time budget that passes while a tool call waits for a person's approval. Past the limit no
 * new side effect starts: with `pause: ['duration']` the run goes to its budget pause at the
 * limit, a decision given there is kept, and after a raise the approved call runs without being
 * asked about again; without `pause` the run is sealed and the approved call never starts.
 * Before, the approval arriving after the limit started the call, and only then did the run pause.
 * Real actors over the library's scripted model, real timers with short limits.
 */
import { describe, expect, it } from 'vitest';
import { createActor, waitFor } from 'xstate';
import { createAgentMachine, type AgentActor } from '../../../src/index.js';
import { scriptedModel } from '../../../src/testing.js';
import { ask, collect, freeTool, guardedTool, recordingModel, resultsById } from '../../support/hitl.js';

const LIMIT_MS = 200;
/** Every wait of this file is bounded by this (the limits are a few hundred ms). */
const WAIT_MS = 5_000;

const paused = (actor: AgentActor) => waitFor(actor, (s) => s.matches({ Running: 'BudgetPaused' }), { timeout: WAIT_MS });
const done = (actor: AgentActor) => waitFor(actor, (s) => s.status === 'done', { timeout: WAIT_MS });
/** Long enough for any call handed over to start, finish and be reported. */
const settle = () => new Promise((resolve) => setTimeout(resolve, 50));

/** An agent whose first reply asks for `write_file` (needs approval) and maybe `lookup`, then answers. */
function agent(options: { pause: boolean; lookup?: ReturnType<typeof freeTool> | undefined; session?: boolean | undefined }) {
  const write = guardedTool();
  const calls = [ask('write_file', { path: 'a', content: 'x' }), ...(options.lookup ? [ask('lookup', { key: 'k' })] : [])];
  const model = recordingModel(scriptedModel([{ text: 'writing', toolCalls: calls }, { text: 'done' }]));
  const machine = createAgentMachine({
    model: model.model,
    tools: [write.tool, ...(options.lookup ? [options.lookup.tool] : [])],
    budget: { maxDurationMs: LIMIT_MS, ...(options.pause && { pause: ['duration' as const] }) },
  });
  // A session actor stays alive after its run (a single run's actor is done, and hears nothing more).
  const actor = createActor(machine, { input: options.session ? { sessionId: 's' } : { prompt: 'go' } });
  const events = collect(actor, 'approval.requested', 'approval.decided', 'approval.refused', 'budget.paused', 'tool.started', 'tool.finished', 'event.rejected');
  const of = <T extends (typeof events)[number]['type']>(type: T) => events.filter((event): event is Extract<(typeof events)[number], { type: T }> => event.type === type);
  return { actor, ran: write.ran, model, events, of };
}

describe('a time budget that passes while a call waits for approval', () => {
  it('pausing: the run pauses at the limit, the approval given there is kept, and after a raise the call runs without asking again', async () => {
    const { actor, ran, model, of } = agent({ pause: true });
    actor.start();
    try {
      // Paused at the limit, before any decision: nothing ran.
      await paused(actor);
      expect(of('budget.paused')).toMatchObject([{ kind: 'duration', limit: LIMIT_MS }]);
      expect(ran).toHaveLength(0);
      actor.send({ type: 'approve', toolCallId: 'call_1_0' });
      await settle();
      // The decision is recorded; the call does not start past the limit.
      expect(of('approval.decided')).toMatchObject([{ toolCallId: 'call_1_0', approved: true }]);
      expect(ran).toHaveLength(0);
      expect(of('tool.started')).toHaveLength(0);
      expect(actor.getSnapshot().matches({ Running: 'BudgetPaused' })).toBe(true);
      // A raise that does not lift the time limit is refused; one that does goes back to the batch.
      actor.send({ type: 'budget.raise', budget: { maxDurationMs: 1 } });
      expect(of('event.rejected')).toHaveLength(1);
      actor.send({ type: 'budget.raise', budget: { maxDurationMs: 60_000 } });
      const output = (await done(actor)).output!;
      expect(output.outcome).toEqual({ type: 'Completed', finalText: 'done' });
      expect(ran.map((call) => call.id)).toEqual(['call_1_0']);
      // Asked once, never again.
      expect(of('approval.requested')).toHaveLength(1);
      expect(of('approval.decided')).toHaveLength(1);
      expect(resultsById(model.requests[1]!).get('call_1_0')?.content).toBe('wrote a');
      expect(model.invalid()).toEqual([]);
    } finally {
      actor.stop();
    }
  });

  it('pausing: a denial that arrives after the limit passed is recorded, and the call never runs', async () => {
    const { actor, ran, model, of } = agent({ pause: true });
    actor.start();
    try {
      await paused(actor);
      actor.send({ type: 'deny', toolCallId: 'call_1_0', reason: 'not now' });
      await settle();
      expect(of('approval.decided')).toMatchObject([{ toolCallId: 'call_1_0', approved: false }]);
      // The denial is the call's result, as listeners see it.
      expect(of('tool.finished')).toMatchObject([{ call: { id: 'call_1_0' }, result: { isError: true, content: 'denied: not now' } }]);
      expect(actor.getSnapshot().context.approvals.decisions).toMatchObject({ call_1_0: { approved: false } });
      actor.send({ type: 'budget.raise', budget: { maxDurationMs: 60_000 } });
      const output = (await done(actor)).output!;
      expect(output.outcome).toEqual({ type: 'Completed', finalText: 'done' });
      expect(ran).toHaveLength(0);
      expect(resultsById(model.requests[1]!).get('call_1_0')?.content).toBe('denied: not now');
    } finally {
      actor.stop();
    }
  });

  it('not pausing: the run is sealed over budget at the limit, and an approval after it starts nothing', async () => {
    const { actor, ran, of } = agent({ pause: false, session: true });
    actor.start();
    try {
      actor.send({ type: 'input', message: 'go' });
      const idle = await waitFor(actor, (s) => s.matches('Idle') && s.context.runIndex === 1, { timeout: WAIT_MS });
      const outcome = idle.context.lastRun!.outcome;
      expect(outcome).toMatchObject({ type: 'Sealed', reason: expect.stringMatching(new RegExp(`^budget: \\d+ ms elapsed, limit ${LIMIT_MS} ms$`)) });
      expect(of('approval.requested')).toHaveLength(1);
      actor.send({ type: 'approve', toolCallId: 'call_1_0' });
      await settle();
      expect(ran).toHaveLength(0);
      expect(of('approval.decided')).toHaveLength(0);
      expect(of('approval.refused')).toMatchObject([{ toolCallId: 'call_1_0' }]);
      expect(resultsById(actor.getSnapshot().context.brain.context.history).get('call_1_0')?.content).toMatch(/interrupted/);
    } finally {
      actor.stop();
    }
  });

  it('pausing, with a call in flight at the limit: it finishes, the call approved after the limit does not start, and the run pauses once it finished', async () => {
    const lookup = freeTool('lookup', { held: true });
    const { actor, ran, of } = agent({ pause: true, lookup });
    actor.start();
    try {
      await lookup.started;
      // Past the limit, with lookup still in flight: the run cannot pause before it finishes.
      await new Promise((resolve) => setTimeout(resolve, LIMIT_MS + 100));
      expect(actor.getSnapshot().matches({ Running: 'BudgetPaused' })).toBe(false);
      actor.send({ type: 'approve', toolCallId: 'call_1_0' });
      await settle();
      expect(of('approval.decided')).toHaveLength(1);
      expect(ran).toHaveLength(0);
      lookup.release();
      await paused(actor);
      expect(lookup.log.finished).toHaveLength(1);
      expect(ran).toHaveLength(0);
      expect(of('budget.paused')).toMatchObject([{ kind: 'duration' }]);
      actor.send({ type: 'budget.raise', budget: { maxDurationMs: 60_000 } });
      const output = (await done(actor)).output!;
      expect(output.outcome).toEqual({ type: 'Completed', finalText: 'done' });
      expect(ran.map((call) => call.id)).toEqual(['call_1_0']);
      expect(lookup.log.started).toHaveLength(1);
      expect(of('approval.requested')).toHaveLength(1);
      // lookup started and finished once each, write_file once (after the raise).
      expect(of('tool.started').map((event) => event.call.id).sort()).toEqual(['call_1_0', 'call_1_1']);
    } finally {
      actor.stop();
    }
  });
  it('a raise while calls still run past the limit lifts the hold: the call approved meanwhile starts at once', async () => {
    const lookup = freeTool('lookup', { held: true });
    const { actor, ran, of } = agent({ pause: true, lookup });
    actor.start();
    try {
      await lookup.started;
      await new Promise((resolve) => setTimeout(resolve, LIMIT_MS + 100));
      actor.send({ type: 'approve', toolCallId: 'call_1_0' });
      await settle();
      expect(ran).toHaveLength(0);
      // A raise of another limit leaves the time limit passed: still held.
      actor.send({ type: 'budget.raise', budget: { maxTokens: 1_000_000 } });
      await settle();
      expect(ran).toHaveLength(0);
      actor.send({ type: 'budget.raise', budget: { maxDurationMs: 60_000 } });
      await waitFor(actor, () => ran.length === 1, { timeout: WAIT_MS });
      lookup.release();
      const output = (await done(actor)).output!;
      expect(output.outcome).toEqual({ type: 'Completed', finalText: 'done' });
      expect(of('budget.paused')).toHaveLength(0);
      expect(ran.map((call) => call.id)).toEqual(['call_1_0']);
    } finally {
      actor.stop();
    }
  });
});

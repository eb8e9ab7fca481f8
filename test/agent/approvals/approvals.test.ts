/**
 * Tool approvals (issue 6, seed 003: an approval step yields while a request awaits a decision and
 * lets it run once the decision is saved). The driver waits in a visible AwaitingApproval state;
 * approve / deny decide each call once; a denied call becomes an isError result the model reads.
 */
import { describe, expect, it } from 'vitest';
import { createActor, waitFor, type InspectionEvent } from 'xstate';
import { createAgentMachine, type AgentActor } from '../../../machines/agent.machine.js';
import { scriptedModel } from '../../../src/models/scripted.js';
import { callDigest } from '../../../src/agent/approvals/approval-binding.js';
import { runFinished, runToCompletion, tick } from '../../support/driver.js';
import {
  ask,
  AWAITING_APPROVAL,
  awaitingApproval,
  callIds,
  collect,
  freeTool,
  guardedTool,
  providerValid,
  recordingModel,
  resultsById,
  user,
} from '../../support/hitl.js';

const write = (path: string, content = 'x') => ask('write_file', { path, content });

/** Replies: turn 1 asks for `calls`, then one text answer per remaining entry. */
function script(calls: ReturnType<typeof ask>[], ...more: Parameters<typeof scriptedModel>[0]) {
  return recordingModel(scriptedModel([{ text: 'on it', toolCalls: calls }, ...more, { text: 'done' }]));
}

function agent(model: ReturnType<typeof recordingModel>, tools: Parameters<typeof createAgentMachine>[0]['tools'], prompt = 'go') {
  const actor = createActor(createAgentMachine({ model: model.model, tools, retry: false }), { input: { prompt, sessionId: 's' } });
  const asked = collect(actor, 'approval.requested');
  return { actor, asked };
}

describe('approve', () => {
  it('a call that needs approval waits in a visible AwaitingApproval state, runs once approved, and the model sees its result', async () => {
    const { tool, ran } = guardedTool();
    const model = script([write('a.txt')]);
    const inspected: InspectionEvent[] = [];
    const actor = createActor(createAgentMachine({ model: model.model, tools: [tool], retry: false }), {
      input: { prompt: 'go', sessionId: 's' },
      inspect: (e) => inspected.push(e),
    });
    const asked = collect(actor, 'approval.requested');
    actor.start();

    expect(await awaitingApproval(actor)).toEqual(['call_1_0']);
    await tick(20);
    expect(ran).toEqual([]);
    expect(actor.getSnapshot().matches(AWAITING_APPROVAL)).toBe(true);
    const shown = { id: 'call_1_0', name: 'write_file', args: { path: 'a.txt', content: 'x' } };
    // Each call comes with its request: the id, the run, and the digest a decision may name.
    const request = { toolCallId: shown.id, toolName: shown.name, args: shown.args, digest: callDigest(shown), run: 1, turn: 1 };
    expect(asked).toEqual([{ type: 'approval.requested', calls: [shown], requests: [request] }]);
    // The inspector sees the waiting state by name.
    const values = inspected
      .filter((e) => e.type === '@xstate.snapshot' && e.actorRef === actor)
      .map((e) => JSON.stringify((e as unknown as { snapshot: { value: unknown } }).snapshot.value));
    // Nothing else may run meanwhile, so the execution region is paused beside it.
    expect(values).toContain(JSON.stringify({ Running: { AwaitingTools: { Working: { Execution: 'Paused', Approval: 'AwaitingApproval', Doubt: 'Clear' } } } }));

    actor.send({ type: 'approve', toolCallId: 'call_1_0' });
    const output = await runToCompletion(actor);
    expect(ran.map((r) => r.id)).toEqual(['call_1_0']);
    expect(output.outcome).toEqual({ type: 'Completed', finalText: 'done' });
    expect(resultsById(output.messages).get('call_1_0')).toEqual({ role: 'tool', toolCallId: 'call_1_0', toolName: 'write_file', content: 'wrote a.txt' });
    expect(model.requests).toHaveLength(2);
    expect(resultsById(model.requests[1]!).get('call_1_0')?.content).toBe('wrote a.txt');
    expect(asked).toHaveLength(1);
    expect(model.invalid()).toEqual([]);
    expect(providerValid(output.messages)).toBe(true);
  });

  it('an event for a call that is not in the batch changes nothing: the call still waits', async () => {
    const { tool, ran } = guardedTool();
    const model = script([write('a.txt')]);
    const { actor, asked } = agent(model, [tool]);
    actor.start();
    await awaitingApproval(actor);
    actor.send({ type: 'approve', toolCallId: 'no-such-call' });
    await tick(20);
    expect(actor.getSnapshot().matches(AWAITING_APPROVAL)).toBe(true);
    expect(actor.getSnapshot().context.approvals.decisions).toEqual({});
    expect(ran).toEqual([]);
    actor.send({ type: 'approve', toolCallId: 'call_1_0' });
    await runToCompletion(actor);
    expect(ran).toHaveLength(1);
    expect(asked).toHaveLength(1);
  });
});

describe('deny', () => {
  it('a denied call never runs and becomes an isError result carrying the reason, which the model reads', async () => {
    const { tool, ran } = guardedTool();
    const model = script([write('a.txt')]);
    const { actor } = agent(model, [tool]);
    actor.start();
    await awaitingApproval(actor);
    actor.send({ type: 'deny', toolCallId: 'call_1_0', reason: 'not in my home folder' });
    const output = await runToCompletion(actor);

    expect(ran).toEqual([]);
    const result = resultsById(output.messages).get('call_1_0')!;
    expect(result.isError).toBe(true);
    expect(result.toolName).toBe('write_file');
    expect(result.content).toContain('not in my home folder');
    // The model's next request carries the denial.
    expect(resultsById(model.requests[1]!).get('call_1_0')).toEqual(result);
    expect(output.outcome).toEqual({ type: 'Completed', finalText: 'done' });
    expect(model.invalid()).toEqual([]);
    expect(providerValid(output.messages)).toBe(true);
  });

  it('a denial without a reason still tells the model that the user did not approve', async () => {
    const { tool, ran } = guardedTool();
    const model = script([write('a.txt')]);
    const { actor } = agent(model, [tool]);
    actor.start();
    await awaitingApproval(actor);
    actor.send({ type: 'deny', toolCallId: 'call_1_0' });
    const output = await runToCompletion(actor);
    expect(ran).toEqual([]);
    const result = resultsById(output.messages).get('call_1_0')!;
    expect(result.isError).toBe(true);
    expect(result.content).toMatch(/den|not approve/i);
  });

  it('a denied call shows up to listeners like any other result: tool.finished with the isError result', async () => {
    const { tool } = guardedTool();
    const model = script([write('a.txt')]);
    const { actor } = agent(model, [tool]);
    const finished = collect(actor, 'tool.finished');
    actor.start();
    await awaitingApproval(actor);
    actor.send({ type: 'deny', toolCallId: 'call_1_0', reason: 'no' });
    const output = await runToCompletion(actor);
    const denied = resultsById(output.messages).get('call_1_0')!;
    // A UI renders calls from tool.started / tool.finished (as it does for unknown tools the brain answers).
    expect(finished.map((e) => e.result)).toContainEqual(denied);
  });
});

describe('mixed batches', () => {
  it('a call that needs no approval runs before the decision; results go in call order', async () => {
    const { tool: guarded, ran } = guardedTool();
    const free = freeTool();
    const model = script([ask('lookup', { key: 'k' }), write('a.txt')]);
    const { actor, asked } = agent(model, [free.tool, guarded]);
    actor.start();

    expect(await awaitingApproval(actor)).toEqual(['call_1_1']);
    expect(free.log.finished.map((f) => f.id)).toEqual(['call_1_0']);
    expect(callIds(asked[0]!.calls)).toEqual(['call_1_1']);
    const decidedAt = performance.now();
    actor.send({ type: 'deny', toolCallId: 'call_1_1', reason: 'read-only today' });
    const output = await runToCompletion(actor);

    expect(free.log.finished[0]!.at).toBeLessThan(decidedAt);
    expect(free.log.started).toHaveLength(1); // not run again after the decision
    expect(ran).toEqual([]);
    const toolMessages = output.messages.filter((m) => m.role === 'tool');
    expect(toolMessages.map((m) => m.toolCallId)).toEqual(['call_1_0', 'call_1_1']);
    expect(toolMessages[0]).toMatchObject({ content: 'value of k' });
    expect(toolMessages[1]).toMatchObject({ isError: true });
    expect(asked).toHaveLength(1);
    expect(model.invalid()).toEqual([]);
  });

  it('the waiting call is visible (AwaitingApproval, approval.requested) while the free call is still running', async () => {
    const { tool: guarded, ran } = guardedTool();
    const free = freeTool('lookup', { held: true });
    const model = script([ask('lookup', { key: 'slow' }), write('a.txt')]);
    const { actor, asked } = agent(model, [free.tool, guarded]);
    actor.start();
    await free.started;
    try {
      // The human is asked at once, not only once the slow call has finished.
      await waitFor(actor, () => asked.length > 0, { timeout: 1_000 });
      expect(callIds(asked[0]!.calls)).toEqual(['call_1_1']);
      expect(free.log.finished).toEqual([]);
      actor.send({ type: 'approve', toolCallId: 'call_1_1' });
    } finally {
      free.release();
    }
    const output = await runToCompletion(actor);
    expect(ran).toHaveLength(1);
    expect(providerValid(output.messages)).toBe(true);
  });

  it('the question is asked while a free call still runs; a decision sent then is taken, asked once, no empty request', async () => {
    const { tool: guarded, ran } = guardedTool();
    const free = freeTool('lookup', { held: true });
    const model = script([ask('lookup', { key: 'slow' }), write('a.txt')]);
    const { actor, asked } = agent(model, [free.tool, guarded]);
    actor.start();
    await free.started;
    // A UI reading the snapshot already knows which calls wait, and decides.
    const waiting = actor.getSnapshot().context.approvals.waiting;
    expect(waiting).toEqual(['call_1_1']);
    actor.send({ type: 'approve', toolCallId: 'call_1_1' });
    free.release();
    const output = await runToCompletion(actor);
    expect(ran).toHaveLength(1);
    expect(output.outcome.type).toBe('Completed');
    expect(asked.filter((e) => e.calls.length === 0)).toEqual([]);
    expect(asked.map((e) => callIds(e.calls))).toEqual([['call_1_1']]);
  });

  it('needsApproval as an (async) function of the validated arguments: only the calls it flags wait', async () => {
    const seen: { path: string; toolCallId: string; sessionId: string }[] = [];
    const { tool, ran } = guardedTool('write_file', async ({ path }, ctx) => {
      seen.push({ path, toolCallId: ctx.toolCallId, sessionId: ctx.sessionId });
      await tick(1);
      return path.startsWith('etc/');
    });
    const model = script([write('notes.md'), write('etc/passwd'), ask('write_file', { path: 42 })]);
    const { actor, asked } = agent(model, [tool]);
    actor.start();

    expect(await awaitingApproval(actor)).toEqual(['call_1_1']);
    expect(ran.map((r) => r.id)).toEqual(['call_1_0']);
    // Bad arguments never reach the rule: the runner rejects them.
    expect(seen).toEqual([
      { path: 'notes.md', toolCallId: 'call_1_0', sessionId: 's' },
      { path: 'etc/passwd', toolCallId: 'call_1_1', sessionId: 's' },
    ]);
    actor.send({ type: 'deny', toolCallId: 'call_1_1' });
    const output = await runToCompletion(actor);
    expect(ran.map((r) => r.id)).toEqual(['call_1_0']);
    const results = resultsById(output.messages);
    expect(results.get('call_1_1')?.isError).toBe(true);
    expect(results.get('call_1_2')?.isError).toBe(true);
    expect(callIds(asked[0]!.calls)).toEqual(['call_1_1']);
    expect(asked).toHaveLength(1);
    expect(model.invalid()).toEqual([]);
  });
});

describe('"always" for this session', () => {
  it('an approval with always: later batches with the same tool do not wait, in this run and the next', async () => {
    const { tool, ran } = guardedTool();
    const model = recordingModel(
      scriptedModel([
        { text: 'first', toolCalls: [write('a.txt')] },
        { text: 'second', toolCalls: [write('b.txt'), write('c.txt')] },
        { text: 'run one done' },
        { text: 'third', toolCalls: [write('d.txt')] },
        { text: 'run two done' },
      ]),
    );
    const actor = createActor(createAgentMachine({ model: model.model, tools: [tool], retry: false }), { input: { sessionId: 's' } });
    const asked = collect(actor, 'approval.requested');
    actor.start();
    actor.send({ type: 'input', message: 'one' });
    await awaitingApproval(actor);
    actor.send({ type: 'approve', toolCallId: 'call_1_0', always: true });
    const first = await runFinished(actor, 1);
    expect(first.outcome).toEqual({ type: 'Completed', finalText: 'run one done' });
    expect(ran.map((r) => r.path)).toEqual(['a.txt', 'b.txt', 'c.txt']);

    actor.send({ type: 'input', message: 'two' });
    const second = await runFinished(actor, 2);
    expect(second.outcome).toEqual({ type: 'Completed', finalText: 'run two done' });
    expect(ran.map((r) => r.path)).toEqual(['a.txt', 'b.txt', 'c.txt', 'd.txt']);
    expect(asked).toHaveLength(1);
    expect(model.invalid()).toEqual([]);
    expect(providerValid(second.messages)).toBe(true);
  });

  it('always applies to the other waiting calls of the same batch to that tool, not to other tools', async () => {
    const { tool: writer, ran: written } = guardedTool('write_file');
    const { tool: deleter, ran: deleted } = guardedTool('delete_file');
    const model = script([write('a.txt'), write('b.txt'), ask('delete_file', { path: 'c.txt', content: '' })]);
    const { actor, asked } = agent(model, [writer, deleter]);
    actor.start();
    expect(await awaitingApproval(actor)).toEqual(['call_1_0', 'call_1_1', 'call_1_2']);
    actor.send({ type: 'approve', toolCallId: 'call_1_0', always: true });
    await tick(20);
    // delete_file still waits; the approved calls do not have to wait for it.
    expect(actor.getSnapshot().matches(AWAITING_APPROVAL)).toBe(true);
    expect(written.map((r) => r.path)).toEqual(['a.txt', 'b.txt']);
    actor.send({ type: 'deny', toolCallId: 'call_1_2' });
    const output = await runToCompletion(actor);
    expect(written.map((r) => r.path)).toEqual(['a.txt', 'b.txt']);
    expect(deleted).toEqual([]);
    expect(asked).toHaveLength(1);
    expect(providerValid(output.messages)).toBe(true);
  });

  it('a denial with always: later calls to that tool are denied without asking, and the model reads it', async () => {
    const { tool, ran } = guardedTool();
    const model = recordingModel(
      scriptedModel([
        { text: 'first', toolCalls: [write('a.txt')] },
        { text: 'again', toolCalls: [write('b.txt')] },
        { text: 'gave up' },
      ]),
    );
    const { actor, asked } = agent(model, [tool]);
    actor.start();
    await awaitingApproval(actor);
    actor.send({ type: 'deny', toolCallId: 'call_1_0', always: true, reason: 'never write' });
    const output = await runToCompletion(actor);
    expect(ran).toEqual([]);
    expect(asked).toHaveLength(1);
    const second = resultsById(output.messages).get('call_2_0')!;
    expect(second.isError).toBe(true);
    expect(resultsById(model.requests[2]!).get('call_2_0')).toEqual(second);
    expect(model.invalid()).toEqual([]);
  });
});

describe('a decision is asked for once', () => {
  it('the first decision for a call wins; repeats and contradictions are ignored; no second approval.requested', async () => {
    const { tool, ran } = guardedTool();
    const model = script([write('a.txt'), write('b.txt')]);
    const { actor, asked } = agent(model, [tool]);
    actor.start();
    expect(await awaitingApproval(actor)).toEqual(['call_1_0', 'call_1_1']);

    actor.send({ type: 'approve', toolCallId: 'call_1_0' });
    actor.send({ type: 'deny', toolCallId: 'call_1_0', reason: 'changed my mind' });
    actor.send({ type: 'approve', toolCallId: 'call_1_0' });
    await tick(20);
    expect(actor.getSnapshot().context.approvals.decisions).toEqual({ call_1_0: { approved: true, digest: callDigest(write('a.txt')) } });
    expect(actor.getSnapshot().matches(AWAITING_APPROVAL)).toBe(true);
    expect(asked).toHaveLength(1);

    actor.send({ type: 'deny', toolCallId: 'call_1_1', reason: 'no' });
    const output = await runToCompletion(actor);
    expect(ran.map((r) => r.id)).toEqual(['call_1_0']);
    expect(asked).toHaveLength(1);
    expect(callIds(asked[0]!.calls)).toEqual(['call_1_0', 'call_1_1']);
    expect(resultsById(output.messages).get('call_1_1')?.isError).toBe(true);
    expect(model.invalid()).toEqual([]);
  });

  it('a snapshot taken while waiting (one of two decided) restores into a new actor that asks only for the other call', async () => {
    const { tool, ran } = guardedTool();
    const model = script([write('a.txt'), write('b.txt')]);
    const machine = createAgentMachine({ model: model.model, tools: [tool], retry: false });
    const first = createActor(machine, { input: { prompt: 'go', sessionId: 's' } });
    first.start();
    await awaitingApproval(first);
    first.send({ type: 'approve', toolCallId: 'call_1_0' });
    const persisted = JSON.parse(JSON.stringify(first.getPersistedSnapshot()));
    first.stop();
    expect(ran).toEqual([]);

    const restored: AgentActor = createActor(machine, { snapshot: persisted });
    const asked = collect(restored, 'approval.requested');
    restored.start();
    const snapshot = restored.getSnapshot();
    expect(snapshot.matches(AWAITING_APPROVAL)).toBe(true);
    expect(snapshot.context.approvals.waiting).toEqual(['call_1_0', 'call_1_1']);
    expect(snapshot.context.approvals.decisions).toEqual({ call_1_0: { approved: true, digest: callDigest(write('a.txt')) } });
    restored.send({ type: 'approve', toolCallId: 'call_1_1' });
    const output = await runToCompletion(restored);
    expect(ran.map((r) => r.id)).toEqual(['call_1_0', 'call_1_1']);
    expect(asked.flatMap((e) => callIds(e.calls))).not.toContain('call_1_0');
    expect(output.outcome).toEqual({ type: 'Completed', finalText: 'done' });
    expect(model.invalid()).toEqual([]);
  });
});

describe('leaving a batch that waits', () => {
  it('cancel while waiting: Cancelled, the waiting call never runs, the kept history is coherent', async () => {
    const { tool, ran } = guardedTool();
    const free = freeTool();
    const model = script([ask('lookup', { key: 'k' }), write('a.txt')]);
    const { actor } = agent(model, [free.tool, tool]);
    actor.start();
    await awaitingApproval(actor);
    // The question comes at once; the free call finishes beside it.
    await tick(20);
    actor.send({ type: 'cancel' });
    const output = await runToCompletion(actor);
    expect(output.outcome).toEqual({ type: 'Cancelled' });
    expect(ran).toEqual([]);
    expect(providerValid(output.messages)).toBe(true);
    const results = resultsById(output.messages);
    expect(results.get('call_1_0')?.content).toBe('value of k');
    // It waited for its approval: it never started.
    expect(results.get('call_1_1')).toMatchObject({ isError: true, content: 'interrupted: the run was cancelled before this tool call started; it did not run' });
    // The next run does not inherit the stale batch's waiting list.
    expect(actor.getSnapshot().context.approvals.waiting).toEqual([]);
  });

  it('seal while waiting: Sealed with the reason, the waiting call never runs, history coherent', async () => {
    const { tool, ran } = guardedTool();
    const model = script([write('a.txt')]);
    const { actor } = agent(model, [tool]);
    actor.start();
    await awaitingApproval(actor);
    actor.send({ type: 'seal', reason: 'user walked away' });
    const output = await runToCompletion(actor);
    expect(output.outcome).toEqual({ type: 'Sealed', reason: 'user walked away' });
    expect(ran).toEqual([]);
    expect(providerValid(output.messages)).toBe(true);
    expect(output.messages.at(-1)).toMatchObject({ role: 'tool', toolCallId: 'call_1_0', isError: true });
    expect(model.invalid()).toEqual([]);
    expect(output.messages[0]).toEqual(user('go'));
  });
});

/**
 * A decision binds to what was shown (issue 26 item 1): the call id, its digest and its run.
 * Stale, earlier-run, unknown, repeated and late decisions are refused, recorded as refused,
 * and never decide anything; a restored decision that cannot prove itself is asked again.
 */
import { describe, expect, it } from 'vitest';
import { createActor } from 'xstate';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import { type AgentEmitted } from '../../../src/agent/protocol/actor-types.js';
import type { ApprovalRequest } from '../../../src/agent/approvals/approval-binding.js';
import { scriptedModel } from '../../../src/models/scripted.js';
import { DurableSession } from '../../../src/sessions/durable-session.js';
import { ApprovalRefusedError } from '../../../src/sessions/stored-decision.js';
import { readSessionTrace, type TraceEntry } from '../../../src/sessions/trace.js';
import { MemoryBacking, MemorySessionStore } from '../../../src/stores/memory.js';
import { rowsOf } from '../../../src/viewer/rows.js';
import { runToCompletion } from '../../support/driver.js';
import { AWAITING_APPROVAL, awaitingApproval, collect, guardedTool } from '../../support/hitl.js';

const write = (path: string, id = 'w1') => ({ id, name: 'write_file', args: { path, content: 'x' } });
const lastRequest = (asked: Extract<AgentEmitted, { type: 'approval.requested' }>[]): ApprovalRequest => asked.at(-1)!.requests[0]!;

async function traceOf(store: MemorySessionStore, id: string): Promise<TraceEntry[]> {
  return (await readSessionTrace(store, id)).flatMap((r) => ('entry' in r ? [r.entry] : []));
}
const decisionsIn = (trace: TraceEntry[]) => trace.filter((e) => e.type === 'approval' || e.type === 'approval.refused');

describe('a decision binds to the call it was made for', () => {
  it('a decision for a call shown before steering changed its arguments is refused (changed); the new call still waits', async () => {
    const { tool, ran } = guardedTool();
    // The model asks under the same id again after the denial and the steer, with other arguments.
    const model = scriptedModel([{ toolCalls: [write('a.txt')] }, { toolCalls: [write('b.txt')] }, { text: 'done' }]);
    const actor = createActor(createAgentMachine({ model, tools: [tool], retry: false }), { input: { prompt: 'go', sessionId: 's' } });
    const asked = collect(actor, 'approval.requested');
    const refused = collect(actor, 'approval.refused');
    actor.start();
    await awaitingApproval(actor);
    const shownToBob = lastRequest(asked);
    actor.send({ type: 'steer', message: 'write b.txt instead' });
    actor.send({ type: 'deny', toolCallId: 'w1', digest: shownToBob.digest, run: 1, by: 'alice' });
    await awaitingApproval(actor);
    expect(lastRequest(asked)).toMatchObject({ toolCallId: 'w1', args: { path: 'b.txt' }, turn: 2 });

    // Bob approves what he saw: a.txt. It must not approve b.txt.
    actor.send({ type: 'approve', toolCallId: 'w1', digest: shownToBob.digest, run: 1, by: 'bob' });
    expect(refused).toEqual([expect.objectContaining({ toolCallId: 'w1', refusal: 'changed', by: 'bob' })]);
    expect(actor.getSnapshot().matches(AWAITING_APPROVAL)).toBe(true);
    expect(actor.getSnapshot().context.approvals.decisions).toEqual({});
    expect(ran).toEqual([]);

    actor.send({ type: 'approve', ...lastRequest(asked), by: 'bob' });
    await runToCompletion(actor);
    expect(ran.map((r) => r.path)).toEqual(['b.txt']);
  });

  it('a decision for a call of an earlier run is refused (other-run) through the session API, recorded as refused', async () => {
    const { tool, ran } = guardedTool();
    const model = scriptedModel([{ toolCalls: [write('a.txt')] }, { text: 'one' }, { toolCalls: [write('a.txt')] }, { text: 'two' }]);
    const store = new MemorySessionStore(new MemoryBacking());
    const asked: Extract<AgentEmitted, { type: 'approval.requested' }>[] = [];
    const session = await DurableSession.open({ machine: createAgentMachine({ model, tools: [tool], retry: false }), store, sessionId: 'runs', attach: (a) => a.on('approval.requested', (e) => asked.push(e)) });
    session.send({ type: 'input', message: 'first' });
    await awaitingApproval(session.actor);
    const first = lastRequest(asked);
    await session.decide(first, { approved: true, by: 'ana' });
    await session.whenIdle();
    session.send({ type: 'input', message: 'second' });
    await awaitingApproval(session.actor);
    // Same id, same arguments, but run 2: the run-1 decision replayed must not approve it.
    expect(lastRequest(asked)).toMatchObject({ toolCallId: 'w1', digest: first.digest, run: 2 });
    const error = await session.decide(first, { approved: true, by: 'mallory' }).catch((e: unknown) => e);
    expect(ApprovalRefusedError.isInstance(error)).toBe(true);
    expect((error as ApprovalRefusedError).reason).toBe('other-run');
    expect(ran).toHaveLength(1);
    expect(session.actor.getSnapshot().matches(AWAITING_APPROVAL)).toBe(true);
    await session.decide(lastRequest(asked), { approved: false, by: 'ana', reason: 'once is enough' });
    await session.whenIdle();
    await session.close();
    expect(decisionsIn(await traceOf(store, 'runs'))).toEqual([
      expect.objectContaining({ type: 'approval', run: 1, approved: true, by: 'ana', digest: first.digest }),
      expect.objectContaining({ type: 'approval.refused', run: 2, refusal: 'other-run', by: 'mallory' }),
      expect.objectContaining({ type: 'approval', run: 2, approved: false, by: 'ana', reason: 'once is enough' }),
    ]);
  });

  it('an unknown call, a second decision and a decision after the call ran are refused, never written as decisions; the viewer shows them refused', async () => {
    const { tool } = guardedTool();
    const model = scriptedModel([{ toolCalls: [write('a.txt')] }, { text: 'done' }]);
    const store = new MemorySessionStore(new MemoryBacking());
    const session = await DurableSession.open({ machine: createAgentMachine({ model, tools: [tool], retry: false }), store, sessionId: 'late' });
    session.send({ type: 'input', message: 'go' });
    await awaitingApproval(session.actor);
    session.send({ type: 'deny', toolCallId: 'nope', by: 'bob' });
    session.send({ type: 'approve', toolCallId: 'w1', by: 'ana' });
    session.send({ type: 'deny', toolCallId: 'w1', by: 'bob' });
    await session.whenIdle();
    session.send({ type: 'deny', toolCallId: 'w1', by: 'carol' });
    await session.close();
    const trace = await traceOf(store, 'late');
    expect(decisionsIn(trace).map((e) => [e.type, e.toolCallId, e.by, e.type === 'approval.refused' ? e.refusal : e.approved])).toEqual([
      ['approval.refused', 'nope', 'bob', 'unknown-call'],
      ['approval', 'w1', 'ana', true],
      ['approval.refused', 'w1', 'bob', 'already-decided'],
      ['approval.refused', 'w1', 'carol', 'already-ran'],
    ]);
    const rows = rowsOf({ session: { trace: await readSessionTrace(store, 'late') } as never });
    const titles = rows.rows.filter((r) => r.kind === 'approval' || r.kind === 'refused').map((r) => [r.kind, r.title]);
    expect(titles.filter(([kind]) => kind === 'refused')).toHaveLength(3);
    expect(titles.some(([, title]) => /denied w1 by (bob|carol)/.test(title!))).toBe(false);
    expect(titles).toContainEqual(['refused', 'refused denial of w1 by carol: already-ran']);
  });

  it('a restored snapshot whose decision is half-written (no digest, or unreadable) asks again and runs nothing', async () => {
    const { tool, ran } = guardedTool();
    const machine = createAgentMachine({ model: scriptedModel([{ toolCalls: [write('a.txt')] }, { text: 'done' }]), tools: [tool], retry: false });
    const first = createActor(machine, { input: { prompt: 'go', sessionId: 's' } });
    first.start();
    await awaitingApproval(first);
    first.send({ type: 'approve', toolCallId: 'w1' });
    const persisted = JSON.parse(JSON.stringify(first.getPersistedSnapshot()));
    first.stop();
    expect(ran).toEqual([]); // stopped before the approved call could run
    for (const broken of [{ approved: true }, { digest: persisted.context.approvals.decisions.w1.digest }]) {
      const snapshot = structuredClone(persisted);
      snapshot.context.approvals.decisions.w1 = broken;
      const restored = createActor(machine, { snapshot });
      const asked = collect(restored, 'approval.requested');
      restored.start();
      await awaitingApproval(restored);
      expect(asked.map((e) => e.calls.map((c) => c.id))).toEqual([['w1']]);
      expect(restored.getSnapshot().context.approvals.decisions).toEqual({});
      restored.stop();
    }
    expect(ran).toEqual([]);
  });
});

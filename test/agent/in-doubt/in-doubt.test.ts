/**
 * Tools in doubt (issue 26 item 2), in one process: the rules as pure functions, the chart's
 * waiting state and decisions on a store shared by two sessions (the first one stopped while its
 * tool ran, as a crash leaves it), and bad input refused with nothing stored lost. The SIGKILL
 * series on SQLite and PostgreSQL is test/agent/in-doubt/in-doubt.crash.test.ts; Restate's is in
 * test/distributed/session-object.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import { type AgentEmitted } from '../../../src/agent/protocol/actor-types.js';
import { callDigest } from '../../../src/agent/approvals/approval-binding.js';
import { restoredDoubt, takeDoubtDecision } from '../../../src/agent/in-doubt/in-doubt.js';
import { NO_DOUBT, type DoubtState } from '../../../src/agent/core/call-decisions.js';
import { startKeys } from '../../../src/agent/protocol/keys.js';
import { inDoubtPolicy } from '../../../src/tools/define-tool.js';
import { InvalidFeedError } from '../../../src/errors.js';
import { scriptedModel } from '../../../src/models/scripted.js';
import { DurableSession } from '../../../src/sessions/durable-session.js';
import { decideDoubtStored } from '../../../src/sessions/stored-doubt.js';
import { ApprovalRefusedError } from '../../../src/sessions/stored-decision.js';
import { MemorySessionStore } from '../../../src/stores/memory.js';
import { readSessionTrace } from '../../../src/sessions/trace.js';
import { rowsOf } from '../../../src/viewer/rows.js';
import { defineTool } from '../../../src/tools/define-tool.js';
import { InvalidToolError } from '../../../src/tools/errors.js';
import type { ToolCall } from '../../../src/schemas.js';

const call: ToolCall = { id: 'c1', name: 'pay', args: { amount: 1 } };
const brain = (calls: ToolCall[]) =>
  ({ value: 'AwaitingTools', context: { history: [], pending: [], pendingTools: calls.map((c) => ({ call: c })), turnsTaken: 1 } }) as never;
const state = (doubt: DoubtState | undefined, calls = [call]) => ({ brain: brain(calls), toolJournal: [], approvals: { waiting: [], decisions: {}, standing: {} }, runIndex: 1, doubt });

describe('in-doubt rules', () => {
  it("defaults to 'ask' for a tool that needs approval and 'rerun' otherwise; a tool's own policy wins", () => {
    expect(inDoubtPolicy({ needsApproval: true })).toBe('ask');
    expect(inDoubtPolicy({ needsApproval: () => false })).toBe('ask');
    expect(inDoubtPolicy({ needsApproval: false })).toBe('rerun');
    expect(inDoubtPolicy({})).toBe('rerun');
    expect(inDoubtPolicy({ needsApproval: true, inDoubt: 'rerun' })).toBe('rerun');
    expect(inDoubtPolicy({ inDoubt: 'ask' })).toBe('ask');
  });

  it('each rerun has a start marker and a step of its own; the first keeps the call key', () => {
    expect(startKeys('s:run-1:turn-1:tools', 'c1', 0)).toEqual({ marker: 's:run-1:turn-1:tools:c1:started', step: 's:run-1:turn-1:tools:c1' });
    expect(startKeys('s:run-1:turn-1:tools', 'c1', 2)).toEqual({ marker: 's:run-1:turn-1:tools:c1:started-2', step: 's:run-1:turn-1:tools:c1:rerun-2' });
  });

  it('a decision binds to a call waiting in doubt: other calls, runs, digests and a second decision are refused', () => {
    const waiting = { ...NO_DOUBT, waiting: ['c1'] };
    let taken: ReturnType<typeof takeDoubtDecision> | undefined;
    const refusal = (doubt: DoubtState | undefined, event: object) => ('refusal' in (taken = takeDoubtDecision(state(doubt), { toolCallId: 'c1', action: 'rerun', ...event })) ? taken.refusal.reason : null);
    expect(refusal(undefined, {})).toBe('not-waiting');
    expect(refusal(waiting, { toolCallId: 'c9' })).toBe('unknown-call');
    expect(refusal(waiting, { run: 2 })).toBe('other-run');
    expect(refusal(waiting, { digest: 'f'.repeat(64) })).toBe('changed');
    expect(refusal(waiting, { digest: callDigest(call) })).toBeNull();
    const decided = (taken as unknown as { doubt: DoubtState }).doubt;
    expect(decided).toMatchObject({ waiting: [], reruns: { c1: 1 }, decisions: { c1: { action: 'rerun', digest: callDigest(call) } } });
    expect(refusal(decided, {})).toBe('already-decided');
    expect(refusal(waiting, { action: 'result', result: 10n })).toBe('not-waiting');
  });

  it('after a restore, a decision that does not prove itself is dropped and its call waits again; a hand result joins the journal', () => {
    const result = { role: 'tool' as const, toolCallId: 'c1', toolName: 'pay', content: '"ok"' };
    const kept = restoredDoubt({ waiting: [], decisions: { c1: { action: 'result', digest: callDigest(call), result } }, reruns: {} }, state(undefined));
    expect(kept.toolJournal).toEqual([result]);
    const stale = restoredDoubt({ waiting: [], decisions: { c1: { action: 'result', digest: 'f'.repeat(64), result } }, reruns: {} }, state(undefined));
    expect(stale).toEqual({ doubt: { waiting: ['c1'], decisions: {}, reruns: {} }, toolJournal: [] });
  });

  it('an unknown policy value in a tool definition is an InvalidToolError', () => {
    expect(() => defineTool({ name: 't', description: '', input: z.object({}), inDoubt: 'maybe' as never, execute: () => 1 })).toThrow(InvalidToolError);
  });
});

describe('a call in doubt in the chart', () => {
  const setup = () => {
    const runs: string[] = [];
    const pay = defineTool({
      name: 'pay',
      description: 'Pays.',
      input: z.object({ amount: z.number() }),
      needsApproval: false,
      inDoubt: 'ask',
      execute: async ({ amount }, ctx) => {
        runs.push(ctx.idempotencyKey);
        if (runs.length === 1) await new Promise((resolve) => setTimeout(resolve, 60_000)); // the first process "dies" here
        return `paid ${amount}`;
      },
    });
    const machine = () =>
      createAgentMachine({
        model: scriptedModel([{ toolCalls: [{ id: 'c1', name: 'pay', args: { amount: 3 } }] }, (req) => ({ text: `saw ${req.messages.at(-1)!.content as string}` })]),
        tools: [pay],
        retry: false,
      });
    return { runs, machine, store: new MemorySessionStore() };
  };

  /** The first session stops mid-tool as a killed process would (no close); the second reopens the store. */
  const inDoubt = async ({ runs, machine, store }: ReturnType<typeof setup>) => {
    const first = await DurableSession.open({ machine: machine(), store, sessionId: 's' });
    first.send({ type: 'input', message: 'pay' });
    for (let i = 0; i < 200 && runs.length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 5));
    await first.flush();
    first.actor.stop();
    const events: AgentEmitted[] = [];
    const second = await DurableSession.open({ machine: machine(), store, sessionId: 's', attach: (a) => a.on('*', (e) => events.push(e)) });
    for (let i = 0; i < 200 && !events.some((e) => e.type === 'tool.inDoubt'); i++) await new Promise((resolve) => setTimeout(resolve, 5));
    return { second, events, request: (events.find((e) => e.type === 'tool.inDoubt') as Extract<AgentEmitted, { type: 'tool.inDoubt' }>).requests[0]! };
  };

  it('waits in its own state, runs nothing, and takes a hand result that the model reads', async () => {
    const parts = setup();
    const { second, events, request } = await inDoubt(parts);
    expect(JSON.stringify(second.actor.getSnapshot().value)).toContain('"Doubt":"AwaitingDecision"');
    expect(parts.runs).toHaveLength(1);
    second.send({ type: 'doubt.decide', toolCallId: 'c1', action: 'result', result: 10n } as never);
    expect(events.find((e) => e.type === 'event.rejected')).toMatchObject({ event: 'doubt.decide' });
    second.send({ type: 'doubt.decide', toolCallId: 'zz', action: 'fail' });
    expect(events.find((e) => e.type === 'doubt.refused')).toMatchObject({ toolCallId: 'zz', refusal: 'unknown-call' });
    second.send({ type: 'doubt.decide', ...request, action: 'result', result: { ok: true }, by: 'ana' });
    const output = await second.whenIdle();
    expect(output?.messages.at(-1)).toMatchObject({ content: 'saw {"ok":true}' });
    expect(parts.runs).toHaveLength(1);
    await second.close();
    // The viewer shows the wait, the decision and the refusal, each as what it was.
    const titles = rowsOf({ session: { trace: await readSessionTrace(parts.store, 's') } as never }).rows.map((row) => row.title);
    expect(titles).toEqual(
      expect.arrayContaining([
        'in doubt after a restart: c1 (started, no result): waiting for a decision',
        'refused decision (fail) for zz in doubt by unknown: unknown-call',
        'c1 in doubt: result given by hand by ana',
      ]),
    );
  });

  it('a session stored waiting on a call in doubt, opened again, asks again and takes a live decision to run it again', async () => {
    const parts = setup();
    const { second, request } = await inDoubt(parts);
    // The process that found the call in doubt stops too: the row now says the call waits.
    await second.flush();
    second.actor.stop();
    const events: AgentEmitted[] = [];
    const third = await DurableSession.open({ machine: parts.machine(), store: parts.store, sessionId: 's', attach: (a) => a.on('*', (e) => events.push(e)) });
    expect(JSON.stringify(third.actor.getSnapshot().value)).toContain('"Doubt":"AwaitingDecision"');
    expect(events.find((e) => e.type === 'tool.inDoubt')).toMatchObject({ requests: [{ toolCallId: 'c1' }] });
    third.send({ type: 'doubt.decide', ...request, action: 'rerun' });
    const output = await Promise.race([third.whenIdle(), new Promise<null>((resolve) => setTimeout(() => resolve(null), 3_000))]);
    expect(output?.messages.at(-1)).toMatchObject({ content: 'saw paid 3' });
    expect(parts.runs).toHaveLength(2);
    await third.close();
  });

  it('decideDoubtStored refuses a hand result that is not JSON and a call not in doubt, writing nothing', async () => {
    const parts = setup();
    const { second, request } = await inDoubt(parts);
    await second.close();
    const before = await parts.store.load('s');
    await expect(decideDoubtStored(parts.store, 's', request, { action: 'result', result: new Date() })).rejects.toThrow(InvalidFeedError);
    await expect(decideDoubtStored(parts.store, 's', { ...request, toolCallId: 'nope' }, { action: 'rerun' })).rejects.toThrow(ApprovalRefusedError);
    expect((await parts.store.load('s'))!.version).toBe(before!.version);
    await decideDoubtStored(parts.store, 's', request, { action: 'rerun', by: 'ana' });
    // The rerun runs with the call's own idempotency key.
    const third = await DurableSession.open({ machine: parts.machine(), store: parts.store, sessionId: 's' });
    expect((await third.whenIdle())?.messages.at(-1)).toMatchObject({ content: 'saw paid 3' });
    expect(parts.runs).toEqual([parts.runs[0], parts.runs[0]]);
    await third.close();
  });
});

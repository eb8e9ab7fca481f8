/**
 * What a case's recording answers, and for which call: a recorded result or approval belongs to
 * the call the recording made (its tool name and whole arguments), never to another call that
 * happens to share its id or the first characters of its arguments.
 */
import { z } from 'zod';
import { describe, expect, it } from 'vitest';
import { createAgentMachine } from '../../machines/agent.machine.js';
import type { AgentConfig } from '../../src/agent/core/config.js';
import { recordCase } from '../../src/evals/record.js';
import { runCase } from '../../src/evals/run-case.js';
import { scoreCase } from '../../src/evals/run-eval.js';
import { outputEquals, toolCalls } from '../../src/evals/scorers.js';
import type { Model } from '../../src/model.js';
import { scriptedModel, type ScriptEntry } from '../../src/models/scripted.js';
import { DurableSession } from '../../src/sessions/durable-session.js';
import { MemorySessionStore } from '../../src/stores/memory.js';
import { defineTool } from '../../src/tools/define-tool.js';
import { calls, recordSession, supportAgent } from './support.js';

/** Calls of the real refund: a quarantined run leaves it alone. */
const ran: string[] = [];
const refund = defineTool({
  name: 'refund',
  description: 'Refunds an order.',
  input: z.object({ order: z.string() }),
  needsApproval: true,
  execute: ({ order }) => {
    ran.push(order);
    return `refunded ${order}`;
  },
});

/** The model asks for one refund (id call_1_0, the scripted model's), then answers. */
const refunding = (order: string): AgentConfig => ({ model: scriptedModel([{ toolCalls: [{ name: 'refund', args: { order } }] }, { text: 'done' }] as ScriptEntry[]), tools: [refund] });

/** A session that refunded `order` with the host's approval, recorded as a case. */
async function recordedRefund(order: string) {
  const store = new MemorySessionStore();
  const config = refunding(order);
  const session = await DurableSession.open({ machine: createAgentMachine(config), store, sessionId: 'refund' });
  session.actor.on('approval.requested', ({ requests }) => {
    for (const request of requests) session.send({ type: 'approve', toolCallId: request.toolCallId, digest: request.digest, by: 'ana' });
  });
  session.send({ type: 'input', message: 'Refund my order.' });
  await session.whenIdle();
  await session.close();
  return recordCase(store, 'refund');
}

describe('the recorded world of a case', () => {
  it("a recorded approval decides only the call it was given for: a live model's other call under the same id is denied as unrecorded", async () => {
    const evalCase = await recordedRefund('A1');
    expect(evalCase.recording!.trace.find((entry) => entry.type === 'approval')).toMatchObject({ toolCallId: 'call_1_0', approved: true });
    ran.length = 0;
    const run = await runCase(evalCase, refunding('B2'));
    expect(run.decisions.map((d) => d.what)).toContain('call tools refund({"order":"B2"})');
    expect(run.decisions.find((d) => d.kind === 'approval' && d.what.startsWith('approval'))).toMatchObject({ what: 'approval denied', rule: expect.stringContaining('unrecorded approval') });
    // The same call as recorded, under its recorded id, is still approved as it was.
    const same = await runCase(evalCase, refunding('A1'));
    expect(same.decisions.find((d) => d.kind === 'approval' && d.what.startsWith('approval'))).toMatchObject({ what: 'approval granted' });
    expect(same.difference).toBeNull();
    expect(ran).toEqual([]);
  });

  it('a recorded result answers only a call with the same whole arguments, however long: two orders that share their first 120 characters are two calls', async () => {
    const store = new MemorySessionStore();
    const order = (last: string) => `${'0'.repeat(130)}${last}`;
    const asking = (last: string) => supportAgent([{ toolCalls: [{ name: 'lookup', args: { order: order(last) } }] }, { text: 'done' }]);
    await recordSession(store, 'long', asking('A'));
    const evalCase = await recordCase(store, 'long');
    calls.lookup = 0;
    const other = await runCase(evalCase, asking('B'));
    expect(other.toolCalls).toEqual([expect.objectContaining({ source: 'unrecorded', isError: true, args: { order: order('B') } })]);
    // The decision diff and the scorers tell the two calls apart too.
    expect(other.difference).toMatchObject({ step: 2, recorded: { kind: 'tools' }, got: { kind: 'tools' } });
    expect(other.difference!.recorded!.what).not.toBe(other.difference!.got!.what);
    const scores = await scoreCase(evalCase, { ...other, output: { order: order('B') } }, [toolCalls([{ name: 'lookup', args: { order: order('A') } }], 'any'), outputEquals({ order: order('A') })]);
    expect(scores['tool calls (any)']!.score).toBe(0);
    expect(scores['output equals']!.score).toBe(0);
    const same = await runCase(evalCase, asking('A'));
    expect(same.toolCalls).toEqual([expect.objectContaining({ source: 'recorded', isError: false, content: expect.stringContaining(order('A')) })]);
    expect(calls.lookup).toBe(0);
  });

  it('a model that numbers its calls per reply (c0 each time): each call takes the result and the approval recorded for it, in its own run and turn', async () => {
    const store = new MemorySessionStore();
    /** Refunds A1 at the start of every run, always as call c0, then says what it read. */
    const perReply: Model = {
      name: 'per-reply-ids',
      async generate(request) {
        const sinceUser = request.messages.slice(request.messages.findLastIndex((m) => m.role === 'user'));
        const read = request.messages.filter((m) => m.role === 'tool').map((m) => m.content);
        if (!sinceUser.some((m) => m.role === 'tool')) return { message: { role: 'assistant', content: '', toolCalls: [{ id: 'c0', name: 'refund', args: { order: 'A1' } }] }, finishReason: 'tool-calls' };
        return { message: { role: 'assistant', content: `read ${read.join(' / ')}` }, finishReason: 'stop' };
      },
    };
    let runs = 0;
    const counting = defineTool({ name: 'refund', description: 'Refunds an order.', input: z.object({ order: z.string() }), needsApproval: true, execute: ({ order }) => `refund ${++runs} of ${order}` });
    const config = (): AgentConfig => ({ model: perReply, tools: [counting] });
    const session = await DurableSession.open({ machine: createAgentMachine(config()), store, sessionId: 'twice' });
    // The first two runs' refunds are approved, the third run's (the same call, the same id each time) denied.
    let asked = 0;
    session.actor.on('approval.requested', ({ requests }) => {
      for (const request of requests) session.send({ type: ++asked < 3 ? 'approve' : 'deny', toolCallId: request.toolCallId, digest: request.digest });
    });
    for (const prompt of ['Refund A1.', 'Refund A1 again.', 'And once more.']) {
      session.send({ type: 'input', message: prompt });
      await session.whenIdle();
    }
    await session.close();
    const evalCase = await recordCase(store, 'twice');
    runs = 0;
    const run = await runCase(evalCase, config(), { model: 'recorded' });
    expect(run.difference).toBeNull();
    expect(run.decisions.filter((d) => d.kind === 'approval' && d.what.startsWith('approval')).map((d) => d.what)).toEqual(['approval granted', 'approval granted', 'approval denied']);
    expect(run.toolCalls.map((call) => call.content)).toEqual(['refund 1 of A1', 'refund 2 of A1']);
    expect(runs).toBe(0);
  });
});

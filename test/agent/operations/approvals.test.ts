/** Approvals as one operation on the yield mechanism (issue 15): the same decisions through `operation.resume`, the same yield event. */
import { describe, expect, it } from 'vitest';
import { createActor, waitFor } from 'xstate';
import { z } from 'zod';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import { APPROVALS_OPERATION } from '../../../src/agent/approvals/approval-events.js';
import { type AgentEmitted } from '../../../src/agent/protocol/actor-types.js';
import type { Operation } from '../../../src/agent/operations/operation.js';
import { scriptedModel } from '../../../src/models/scripted.js';
import { defineTool } from '../../../src/tools/define-tool.js';
import { WAIT_MS } from '../../support/driver.js';

const ran: string[] = [];
const wire = defineTool({
  name: 'wire',
  description: 'Wires money.',
  input: z.object({ amount: z.number() }),
  needsApproval: true,
  execute: ({ amount }) => (ran.push(String(amount)), `wired ${amount}`),
});
const script = () =>
  scriptedModel([{ toolCalls: [{ name: 'wire', args: { amount: 5 } }, { name: 'wire', args: { amount: 9 } }] }, { text: 'Done.' }]);

describe('approvals, the built-in approval-like operation', () => {
  it("yields like any operation (operation.yielded names 'approvals') and takes its decisions as operation.resume", async () => {
    ran.length = 0;
    const actor = createActor(createAgentMachine({ model: script(), tools: [wire] }), { input: { prompt: 'Pay.' } });
    const emitted: AgentEmitted[] = [];
    for (const type of ['operation.yielded', 'event.rejected', 'tool.finished'] as const) actor.on(type, (e) => emitted.push(e));
    actor.start();
    await waitFor(actor, (s) => JSON.stringify(s.value).includes('AwaitingApproval'), { timeout: WAIT_MS });
    expect(emitted).toEqual([{ type: 'operation.yielded', operation: APPROVALS_OPERATION, reason: 'approval', payload: { calls: ['call_1_0', 'call_1_1'], requests: [expect.objectContaining({ toolCallId: 'call_1_0', run: 1 }), expect.objectContaining({ toolCallId: 'call_1_1', run: 1 })] } }]);

    // A payload the approvals schema refuses: event.rejected, nothing decided, the actor waits on.
    actor.send({ type: 'operation.resume', operation: 'approvals', payload: { toolCallId: 'call_1_0', approved: 'yes' } });
    expect(emitted.at(-1)).toMatchObject({ type: 'event.rejected', event: 'operation.resume', reason: expect.stringMatching(/^payload for 'approvals'/) });
    expect(actor.getSnapshot().context.approvals.decisions).toEqual({});

    actor.send({ type: 'operation.resume', operation: 'approvals', payload: { toolCallId: 'call_1_0', approved: true } });
    actor.send({ type: 'operation.resume', operation: 'approvals', payload: { toolCallId: 'call_1_1', approved: false, reason: 'too much' } });
    const done = await waitFor(actor, (s) => s.status === 'done', { timeout: WAIT_MS });
    expect(ran).toEqual(['5']);
    expect(done.output!.messages.filter((m) => m.role === 'tool')).toEqual([
      { role: 'tool', toolCallId: 'call_1_0', toolName: 'wire', content: 'wired 5' },
      { role: 'tool', toolCallId: 'call_1_1', toolName: 'wire', content: 'denied: too much', isError: true },
    ]);
  });

  it('an operation that runs tools, with tools that need approval, is a configuration error (approval must come first)', () => {
    const runner: Operation = { name: 'cache', runsTools: true, beforeTools: () => undefined };
    expect(() => createAgentMachine({ model: script(), tools: [wire], operations: [runner] })).toThrow(/operation 'cache' runs tools, but tools here need approval/);
    expect(() => createAgentMachine({ model: script(), tools: [wire], operations: [{ name: 'approvals' }] })).toThrow(/operation name 'approvals' is taken/);
    expect(() => createAgentMachine({ model: script(), operations: [runner] })).not.toThrow();
  });
});

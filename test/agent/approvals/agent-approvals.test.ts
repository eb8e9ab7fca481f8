/**
 * Issue 10, bug 7 in approvals: decisions are keyed by the model's call ids and standing
 * decisions by tool names. A decision for a call whose id is `__proto__` (or `toString`) is a
 * decision like any other, also after the session is stored and opened again.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import { type AgentEmitted } from '../../../src/agent/protocol/actor-types.js';
import { ApprovalsSchema } from '../../../src/agent/core/call-decisions.js';
import { scriptedModel } from '../../../src/models/scripted.js';
import { DurableSession } from '../../../src/sessions/durable-session.js';
import { MemoryBacking, MemorySessionStore } from '../../../src/stores/memory.js';
import { defineTool } from '../../../src/tools/define-tool.js';

const ran: string[] = [];
const write = defineTool({
  name: 'write',
  description: 'Writes',
  input: z.object({ path: z.string() }),
  needsApproval: true,
  // The first process closes while the approved call may be starting: re-run it on reopen (the
  // default for a tool that needs approval, 'ask', would wait for a person; test/agent/in-doubt).
  inDoubt: 'rerun',
  execute: ({ path }, { toolCallId }) => (ran.push(toolCallId), `wrote ${path}`),
});
const machine = () =>
  createAgentMachine({
    model: scriptedModel([
      { toolCalls: [{ id: '__proto__', name: 'write', args: { path: 'a' } }, { id: 'toString', name: 'write', args: { path: 'b' } }] },
      { text: 'done' },
    ]),
    tools: [write],
  });

describe('approval decisions keyed by prototype names', () => {
  it('the schema keeps a __proto__ key as data', () => {
    const parsed = ApprovalsSchema.parse(JSON.parse('{"waiting":["__proto__"],"decisions":{"__proto__":{"approved":true}},"standing":{}}'));
    expect(Object.hasOwn(parsed.decisions, '__proto__')).toBe(true);
    expect(Object.getPrototypeOf(parsed.decisions)).toBe(Object.prototype);
  });

  it('a decision for __proto__ survives a stored session; toString still waits for its own', async () => {
    ran.length = 0;
    const backing = new MemoryBacking();
    const first = await DurableSession.open({ machine: machine(), store: new MemorySessionStore(backing), sessionId: 'p' });
    const asked = new Promise<AgentEmitted>((resolve) => first.actor.on('approval.requested', resolve));
    first.send({ type: 'input', message: 'go' });
    expect(await asked).toMatchObject({ calls: [{ id: '__proto__' }, { id: 'toString' }] });
    first.send({ type: 'approve', toolCallId: '__proto__' });
    const first0 = Object.getOwnPropertyDescriptor(first.actor.getSnapshot().context.approvals.decisions, '__proto__')!.value as unknown;
    await first.close();

    const askedAgain: AgentEmitted[] = [];
    const second = await DurableSession.open({
      machine: machine(),
      store: new MemorySessionStore(backing),
      sessionId: 'p',
      attach: (actor) => actor.on('approval.requested', (e) => askedAgain.push(e)),
    });
    expect(second.actor.getSnapshot().context.approvals.decisions).toEqual(JSON.parse(`{"__proto__":{"approved":true,"digest":"${(first0 as { digest: string }).digest}"}}`));
    expect(askedAgain).toEqual([expect.objectContaining({ calls: [expect.objectContaining({ id: 'toString' })] })]);
    second.send({ type: 'deny', toolCallId: 'toString' });
    const output = await second.whenIdle();
    await second.close();
    expect(output!.outcome).toEqual({ type: 'Completed', finalText: 'done' });
    expect(ran.filter((id) => id.endsWith('__proto__'))).toHaveLength(ran.length);
    expect(ran.length).toBeGreaterThanOrEqual(1);
  });
});

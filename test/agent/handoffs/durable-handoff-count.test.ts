/**
 * The handoffs a run has made are part of the session's state (docs/agent/handoffs.md: "a run
 * resumed in another process goes on counting where it was"): a durable session stores the count
 * in its row. Before, the row left it out, so a run reopened after a crash counted from zero and
 * could hand the conversation over past `maxHandoffs`.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import type { Model } from '../../../src/model.js';
import { DurableSession } from '../../../src/sessions/durable-session.js';
import { MemorySessionStore } from '../../../src/stores/memory.js';
import { defineTool } from '../../../src/tools/define-tool.js';

async function until(check: () => boolean, ms = 3_000): Promise<void> {
  for (const end = Date.now() + ms; !check(); await new Promise((resolve) => setTimeout(resolve, 5))) {
    if (Date.now() > end) throw new Error(`not so after ${ms} ms`);
  }
}

describe('the handoff count of a run under a durable session', () => {
  it('survives a reopen: a transfer past maxHandoffs after the crash is refused', async () => {
    let waits = 0;
    // Billing's first tool call is where the first process "dies".
    const wait = defineTool({ name: 'wait', description: 'x', input: z.object({}), execute: async () => ((waits += 1), waits === 1 ? new Promise<string>(() => {}) : 'done') });
    const triage: Model = {
      name: 'triage-model',
      generate: async () => ({ message: { role: 'assistant', content: '', toolCalls: [{ id: `t${Date.now()}`, name: 'transfer_to_billing', args: {} }] }, finishReason: 'tool-calls' }),
    };
    // Billing waits once, then hands back to triage.
    const billing: Model = {
      name: 'billing-model',
      generate: async (request) => {
        const waited = request.messages.some((m) => m.role === 'tool' && m.toolName === 'wait');
        const call = waited ? { id: 'b2', name: 'transfer_to_triage', args: {} } : { id: 'b1', name: 'wait', args: {} };
        return { message: { role: 'assistant', content: '', toolCalls: [call] }, finishReason: 'tool-calls' };
      },
    };
    const machine = () =>
      createAgentMachine({
        model: triage,
        handoffs: { name: 'triage', maxHandoffs: 1, agents: [{ name: 'billing', description: 'b', tools: [wait], model: billing, handoffs: ['triage'] }] },
      });
    const store = new MemorySessionStore();
    const first = await DurableSession.open({ machine: machine(), store, sessionId: 'desk' });
    first.send({ type: 'input', message: 'refund' });
    await until(() => waits === 1);
    expect(first.actor.getSnapshot().context.handoffs).toBe(1);
    await first.flush();
    first.actor.stop();
    const second = await DurableSession.open({ machine: machine(), store, sessionId: 'desk' });
    expect(second.actor.getSnapshot().context.handoffs).toBe(1);
    const output = await Promise.race([second.whenIdle(), new Promise<never>((_, reject) => setTimeout(() => reject(new Error('still running')), 3_000))]);
    await second.close();
    expect(output?.outcome).toMatchObject({ type: 'Sealed', reason: expect.stringMatching(/^maxHandoffs: /) });
  });
});

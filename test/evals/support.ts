/** A recorded session for the eval tests: a support agent that looks an order up, then answers. */
import { z } from 'zod';
import { createAgentMachine } from '../../machines/agent.machine.js';
import type { AgentConfig } from '../../src/agent/core/config.js';
import { scriptedModel } from '../../src/models/scripted.js';
import type { ScriptEntry } from '../../src/models/scripted.js';
import { DurableSession } from '../../src/sessions/durable-session.js';
import type { SessionStore } from '../../src/stores/session-store.js';
import { defineTool } from '../../src/tools/define-tool.js';

/** Calls of the real tool: a quarantined run must leave this at 0. */
export const calls = { lookup: 0, refund: 0 };

export const lookup = defineTool({
  name: 'lookup',
  description: 'Looks an order up.',
  input: z.object({ order: z.string() }),
  execute: ({ order }) => {
    calls.lookup++;
    return { order, status: 'delivered', total: 40 };
  },
});

export const refund = defineTool({
  name: 'refund',
  description: 'Refunds an order.',
  input: z.object({ order: z.string() }),
  execute: ({ order }) => {
    calls.refund++;
    return `refunded ${order}`;
  },
});

export const SCRIPT: ScriptEntry[] = [
  { toolCalls: [{ name: 'lookup', args: { order: 'A1' } }], usage: { inputTokens: 50, outputTokens: 10 } },
  { text: 'Order A1 was delivered; the total was 40.', usage: { inputTokens: 80, outputTokens: 12 } },
];

export function supportAgent(script: ScriptEntry[] = SCRIPT, extra: Partial<AgentConfig> = {}): AgentConfig {
  return { model: scriptedModel(script), instructions: 'You help with orders.', tools: [lookup, refund], ...extra };
}

/** Records one session: the run of `prompt` with the agent, stored with its trace. */
export async function recordSession(store: SessionStore, sessionId: string, config: AgentConfig = supportAgent(), prompt = 'Where is order A1?'): Promise<void> {
  const session = await DurableSession.open({ machine: createAgentMachine(config), store, sessionId });
  session.send({ type: 'input', message: prompt });
  await session.whenIdle();
  await session.close();
}

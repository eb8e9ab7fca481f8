/**
 * The agent under evaluation: a support agent that looks an order up before it answers. Its
 * "model" is a scripted function (offline, deterministic) so the example runs anywhere; put a real
 * model here (openAICompatibleModel, aiSdkModel) and the evaluation is the same.
 *
 * `loopchart eval examples/evals/dataset --agent examples/evals/agent.ts --scorers examples/evals/scorers.ts`
 */
import { z } from 'zod';
import { defineTool, type AgentConfig, type Model } from '../../src/index.js';
import { scriptedModel } from '../../src/testing.js';

/** The order system. An evaluation never reaches it: its tools are answered from the recording. */
export const orders = new Map([
  ['A1', { status: 'delivered', total: 40 }],
  ['B2', { status: 'in transit', total: 15 }],
]);
export const reached = { lookup: 0 };

export const lookup = defineTool({
  name: 'lookup',
  description: 'Looks an order up by its id.',
  input: z.object({ order: z.string() }),
  execute: ({ order }) => {
    reached.lookup++;
    return orders.get(order) ?? `no order ${order}`;
  },
});

/** The model's script: look up the order the user names, then say what the lookup said. */
export function supportModel(options: { lookUp?: boolean } = {}): Model {
  const lookUp = options.lookUp ?? true;
  const turn = (request: { messages: readonly { role: string; content: string }[] }) => {
    const last = request.messages.at(-1)!;
    if (last.role === 'tool') {
      const found = JSON.parse(last.content) as { status: string; total: number };
      return { text: `Your order is ${found.status} (total ${found.total}).` };
    }
    const order = /\b[A-Z]\d+\b/.exec(last.content)?.[0];
    if (order && lookUp) return { toolCalls: [{ name: 'lookup', args: { order } }] };
    return { text: 'Please tell me your order number.' };
  };
  return scriptedModel(Array.from({ length: 8 }, () => turn), { name: 'support-script' });
}

/** One config per case: each case gets a fresh model (a script is used up as it answers). */
export const agent = (): AgentConfig => ({
  model: supportModel(),
  instructions: 'You help customers with their orders. Look an order up before you answer.',
  tools: [lookup],
  policy: { maxTurns: 4 },
});

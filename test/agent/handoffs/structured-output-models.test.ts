/**
 * With an output schema, how the answer travels (the provider's JSON mode, or a `final_answer`
 * tool) is chosen for every model that may speak: the entry agent's list and the handoff agents'
 * own models alike. Before, only the entry agent's were read, so a handoff agent whose model has
 * no JSON mode was sent a response format it cannot read and offered no `final_answer` tool: it
 * could not answer at all (its answer calls were unknown tools until repetition sealed the run).
 */
import { createActor, toPromise } from 'xstate';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import type { Model, ModelRequest } from '../../../src/model.js';
import { scriptedModel } from '../../../src/models/scripted.js';

describe('structured output with handoff agents', () => {
  it("a handoff agent whose model has no JSON mode is offered final_answer, and its answer completes the run", async () => {
    const entryRequests: ModelRequest[] = [];
    // The entry agent's model reads a response format; it hands over at once.
    const entry: Model = {
      name: 'json-entry',
      supports: { responseFormat: 1 },
      generate: async (request) => (
        entryRequests.push(request), { message: { role: 'assistant', content: '', toolCalls: [{ id: 't1', name: 'transfer_to_billing', args: {} }] }, finishReason: 'tool-calls' }
      ),
    };
    const billingRequests: ModelRequest[] = [];
    const billing = scriptedModel([(request) => (billingRequests.push(request), { toolCalls: [{ name: 'final_answer', args: { refunded: true } }] })], { name: 'billing-model' });
    const agent = createAgentMachine({
      model: entry,
      output: z.object({ refunded: z.boolean() }),
      handoffs: { name: 'triage', history: 'filtered', agents: [{ name: 'billing', description: 'Refunds.', model: billing }] },
    });
    const output = await Promise.race([toPromise(createActor(agent, { input: { prompt: 'refund A-7' } }).start()), new Promise<never>((_, reject) => setTimeout(() => reject(new Error('still running')), 3_000))]);
    expect(output.outcome).toMatchObject({ type: 'Completed', output: { refunded: true } });
    expect(billingRequests[0]!.responseFormat).toBeUndefined();
    expect(billingRequests[0]!.tools.map((tool) => tool.name)).toContain('final_answer');
    expect(entryRequests[0]!.tools.map((tool) => tool.name)).toContain('final_answer');
  });
});

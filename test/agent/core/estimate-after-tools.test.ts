/**
 * One measure (issue 41 #10): the driver's estimate of the next request is the measure of the
 * request the model then receives, after a tool batch and at the start of a later run too.
 * Before, each tool batch and each new run's prompt added the reply priming (3 tokens) again,
 * so an unchanged conversation looked 3 tokens larger than what was sent.
 */
import { describe, expect, it } from 'vitest';
import { createActor, waitFor, type Actor } from 'xstate';
import { z } from 'zod';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import { requestTokens } from '../../../src/agent/core/request-size.js';
import type { Model, ModelReply, ModelRequest } from '../../../src/model.js';
import { defineTool } from '../../../src/tools/define-tool.js';

const lookup = defineTool({ name: 'lookup', description: 'Looks a word up.', input: z.object({ word: z.string() }), execute: ({ word }) => `${word}: a word of ${word.length} letters` });

describe('the estimate after a tool batch', () => {
  it('equals the measure of the request the model receives, at every call of two runs', async () => {
    const replies: ModelReply[] = [
      { message: { role: 'assistant', content: '', toolCalls: [{ id: 'a', name: 'lookup', args: { word: 'statechart' } }] }, finishReason: 'tool-calls' },
      { message: { role: 'assistant', content: 'Two more.', toolCalls: [{ id: 'b', name: 'lookup', args: { word: 'brain' } }, { id: 'c', name: 'lookup', args: { word: 'driver' } }] }, finishReason: 'tool-calls' },
      { message: { role: 'assistant', content: 'Done looking.' }, finishReason: 'stop' },
      { message: { role: 'assistant', content: '', toolCalls: [{ id: 'd', name: 'lookup', args: { word: 'again' } }] }, finishReason: 'tool-calls' },
      { message: { role: 'assistant', content: 'Done again.' }, finishReason: 'stop' },
    ];
    const seen: { estimate: number; sent: number }[] = [];
    let actor: Actor<ReturnType<typeof createAgentMachine>> | undefined;
    const model: Model = {
      name: 'measured',
      generate: async (request: ModelRequest) => {
        // The model sees its request: measured with the driver's own function.
        const sent = requestTokens({ system: [], messages: request.messages, tools: request.tools });
        seen.push({ estimate: actor!.getSnapshot().context.brain.context.contextTokens, sent });
        return replies[seen.length - 1]!;
      },
    };
    actor = createActor(createAgentMachine({ model, tools: [lookup], instructions: 'Look words up.', retry: false }), { input: { sessionId: 's' } }).start();
    actor.send({ type: 'input', message: 'Look up statechart.' });
    await waitFor(actor, (s) => s.matches('Idle') && s.context.runIndex === 1, { timeout: 5_000 });
    actor.send({ type: 'input', message: 'And once more.' });
    const idle = await waitFor(actor, (s) => s.matches('Idle') && s.context.runIndex === 2, { timeout: 5_000 });
    actor.stop();
    expect(idle.context.lastRun!.outcome).toEqual({ type: 'Completed', finalText: 'Done again.' });
    expect(seen).toHaveLength(5);
    for (const [i, { estimate, sent }] of seen.entries()) expect(estimate, `model call ${i + 1}`).toBe(sent);
  });
});

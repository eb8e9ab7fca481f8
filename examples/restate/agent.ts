/**
 * The example's agent: an offline model that answers from the conversation (every worker, and
 * every replay, answers alike) and two tools, one of which needs a human's approval.
 */
import { z } from 'zod';
import { createAgentMachine, defineTool, type Model } from 'loopchart';

const lastUser = (messages: readonly { role: string; content: unknown }[]) =>
  String([...messages].reverse().find((message) => message.role === 'user')?.content ?? '');

const model: Model = {
  name: 'example',
  async generate(request) {
    const prompt = lastUser(request.messages);
    const toolResult = request.messages.at(-1)?.role === 'tool' ? String(request.messages.at(-1)!.content) : undefined;
    if (toolResult !== undefined) {
      const text = `Done: ${toolResult}.`;
      for (const word of text.split(' ')) request.onTextDelta?.(`${word} `);
      return { message: { role: 'assistant', content: text }, finishReason: 'stop' };
    }
    const call = prompt.includes('deploy')
      ? { id: 'call-1', name: 'deploy', args: { service: 'web' } }
      : { id: 'call-1', name: 'wordCount', args: { text: prompt } };
    return { message: { role: 'assistant', content: '', toolCalls: [call] }, finishReason: 'tool-calls' };
  },
};

const wordCount = defineTool({
  name: 'wordCount',
  description: 'Counts the words of a text',
  input: z.object({ text: z.string() }),
  execute: ({ text }) => `${text.split(/\s+/).filter(Boolean).length} words`,
});

const deploy = defineTool({
  name: 'deploy',
  description: 'Deploys a service',
  input: z.object({ service: z.string() }),
  needsApproval: true,
  execute: ({ service }, ctx) => `${service} deployed (key ${ctx.idempotencyKey})`,
});

export const machine = createAgentMachine({ model, tools: [wordCount, deploy] });

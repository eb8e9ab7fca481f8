/**
 * The example's agent, offline: a scripted model whose reply depends on the question. "What is 6
 * times 7?" calls the calculator; "Send 5 to Alice." calls `transfer`, a tool that asks the page
 * first (and prints `transfer 5` on the server each time it runs); anything else gets a long story
 * streamed over a few seconds (time to press Stop, reload, or restart the server).
 */
import { z } from 'zod';
import { agentTool, calculatorTool, createAgentMachine, defineTool, type ModelRequest } from '../../src/index.js';
import { scriptedModel } from '../../src/testing.js';

/** The long answer, streamed over about five seconds. */
export const STORY =
  'Once upon a time a statechart ran an agent loop. It called the model, ran the tools it asked for, waited for a human when a tool needed one, and stopped when asked. Every step of it was stored, so nothing was ever lost or said twice. The end.';

/** The reply to the conversation so far, by its last question and the replies that followed it. */
function reply(request: ModelRequest) {
  const lastUser = request.messages.map((m) => m.role).lastIndexOf('user');
  const question = String(request.messages[lastUser]?.content ?? '');
  const replies = request.messages.slice(lastUser).filter((m) => m.role === 'assistant').length;
  if (/6 times 7/i.test(question)) {
    return replies === 0
      ? { text: 'Let me calculate that.', toolCalls: [{ name: 'calculator', args: { expression: '6*7' } }], delayMs: 600 }
      : { text: 'Six times seven is 42.', delayMs: 600 };
  }
  if (/ask the assistant/i.test(question)) {
    const task = question.replace(/^.*?ask the assistant to /i, '');
    return replies === 0 ? { text: 'I will hand that to the assistant.', toolCalls: [{ name: 'assistant', args: { task } }] } : { text: 'The assistant has finished.' };
  }
  const amount = /send (\d+)/i.exec(question)?.[1];
  if (amount !== undefined) return replies === 0 ? { text: 'I will ask you first.', toolCalls: [{ name: 'transfer', args: { amount: Number(amount) } }] } : { text: 'Done: see the tool result above.' };
  return { text: STORY, delayMs: 5000 };
}

const transfer = defineTool({
  name: 'transfer',
  description: 'Move money (asks a human first).',
  input: z.object({ amount: z.number().positive() }),
  needsApproval: true,
  execute: ({ amount }) => {
    console.log(`transfer ${amount}`);
    return `sent ${amount}`;
  },
});

const script = () => Array.from({ length: 500 }, () => reply);

/** The chart of the example's agent; the script answers up to 500 model calls. Its `assistant` tool runs a subagent with `transfer`. */
export const exampleMachine = () => {
  const assistant = createAgentMachine({ model: scriptedModel(script(), { name: 'scripted-assistant' }), tools: [transfer], instructions: 'You carry out one task.' });
  return createAgentMachine({
    model: scriptedModel(script(), { name: 'scripted-chat' }),
    tools: [calculatorTool(), transfer, agentTool({ agent: assistant, name: 'assistant', description: 'Hands a task to an assistant agent.' })],
  });
};

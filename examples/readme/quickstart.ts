// examples/readme/quickstart.ts
import { defineTool, openAICompatibleModel, runAgent, type Model } from 'loopchart';
import { scriptedModel } from 'loopchart/testing';
import { z } from 'zod';

const add = defineTool({
  name: 'add',
  description: 'Adds two numbers.',
  input: z.object({ a: z.number(), b: z.number() }),
  execute: ({ a, b }) => a + b,
});

// A real model when OPENAI_BASE_URL is set (OpenAI, Ollama, vLLM...), else a scripted one, offline.
const model: Model = process.env.OPENAI_BASE_URL
  ? openAICompatibleModel({ baseURL: process.env.OPENAI_BASE_URL, apiKey: process.env.OPENAI_API_KEY, model: 'gpt-4o-mini' })
  : scriptedModel([{ toolCalls: [{ name: 'add', args: { a: 2, b: 3 } }] }, { text: '2 + 3 = 5.' }]);

const { text, outcome, messages, usage, error } = await runAgent({
  model,
  tools: [add],
  instructions: 'You are a careful calculator. Use the add tool.',
  prompt: 'What is 2 + 3?',
  signal: AbortSignal.timeout(60_000),
});
if (outcome.type !== 'Completed') {
  // One line with the cause and the fix, e.g. "Failed: authentication failed (401 Unauthorized) ... Check the API key".
  console.error(`${outcome.type}: ${error?.message ?? 'the run did not complete'}`);
  process.exit(1);
}
console.log(outcome.type, text); // Completed 2 + 3 = 5.
console.log(`${messages.length} messages, ${usage.inputTokens + usage.outputTokens} tokens`);

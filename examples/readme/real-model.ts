// examples/readme/real-model.ts
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { openAICompatibleModel, runAgent } from 'loopchart';
import { aiSdkModel } from 'loopchart/ai-sdk';

const baseURL = process.env.OPENAI_BASE_URL ?? 'http://localhost:11434/v1';

// Dependency-free, Chat Completions over fetch with SSE streaming:
const http = openAICompatibleModel({ baseURL, apiKey: process.env.OPENAI_API_KEY, model: 'gpt-4o-mini' });

// Any AI SDK provider (AI SDK 5, 6 or 7), here @ai-sdk/openai-compatible (its settings refuse an
// apiKey of undefined under exactOptionalPropertyTypes, so the key is given only when set):
const apiKey = process.env.OPENAI_API_KEY;
const provider = createOpenAICompatible({ name: 'local', baseURL, ...(apiKey && { apiKey }), includeUsage: true });
// The adapter is not told the key the provider sends: `secrets` names what no error may quote.
const sdk = aiSdkModel(provider.chatModel('gpt-4o-mini'), { secrets: [process.env.OPENAI_API_KEY] });

for (const model of [http, sdk]) {
  const { outcome, text, error } = await runAgent({ model, prompt: 'Say hello.', signal: AbortSignal.timeout(30_000) });
  console.log(model.name, outcome.type, text);
  if (outcome.type !== 'Completed') {
    console.error(`${model.name}: ${error?.message ?? outcome.type}`); // the cause and what to check
    process.exitCode = 1;
  }
}

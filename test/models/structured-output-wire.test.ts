import { createOpenAICompatible as createV2 } from '@ai-sdk/openai-compatible';
import { createOpenAICompatible as createV3 } from 'ai-sdk-openai-compatible-v2';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { runAgent } from '../../src/agent/hosts/run-agent.js';
import { openAICompatibleModel } from '../../src/models/openai-compatible.js';
import { aiSdkModel } from '../../src/models/ai-sdk.js';
import type { AiSdkLanguageModel } from '../../src/models/ai-sdk-spec.js';
import { TEST_MODEL, useChatServer } from '../support/chat-server.js';

/**
 * Structured output over real HTTP (issue 21): the local Chat Completions server sees the schema
 * as `response_format` (json_schema) from the HTTP adapter and from an AI SDK provider that has
 * structured outputs, and as a `final_answer` tool from one that has not.
 */

const Answer = z.object({ city: z.string(), population: z.number().int() });
const wireSchema = { type: 'object', properties: { city: { type: 'string' }, population: { type: 'integer' } }, required: ['city', 'population'] };

const server = useChatServer();

type Body = { response_format?: { type: string; json_schema: { name: string; schema: Record<string, unknown> } }; tools?: { function: { name: string } }[]; messages: { role: string; content: string }[] };
const bodies = () => server.requests.map((r) => r.body as Body);

/** The server answers with an invalid JSON answer, then a valid one. */
const invalidThenValid = () =>
  server.enqueue(
    { type: 'reply', text: ['{"city":"Lyon",', '"population":"many"}'] },
    { type: 'reply', text: ['{"city":"Lyon",', '"population":520000}'] },
  );

async function expectJsonSchemaMode(model: Parameters<typeof runAgent>[0]['model']) {
  invalidThenValid();
  const result = await runAgent({ model, prompt: 'A French city?', output: Answer, retry: false });
  expect(result.outcome.type, JSON.stringify(result.outcome)).toBe('Completed');
  expect(result.output).toEqual({ city: 'Lyon', population: 520_000 });
  const [first, second] = bodies();
  expect(first!.response_format).toMatchObject({ type: 'json_schema', json_schema: { name: 'final_answer', schema: wireSchema } });
  expect(first!.tools).toBeUndefined();
  expect(second!.response_format).toEqual(first!.response_format);
  expect(second!.messages.at(-1)).toMatchObject({ role: 'user', content: expect.stringContaining('- at population: ') });
}

async function expectToolMode(model: Parameters<typeof runAgent>[0]['model']) {
  server.enqueue(
    { type: 'reply', toolCalls: [{ name: 'final_answer', arguments: { city: 'Lyon', population: 1.5 } }] },
    { type: 'reply', toolCalls: [{ name: 'final_answer', arguments: { city: 'Lyon', population: 520_000 } }] },
  );
  const result = await runAgent({ model, prompt: 'A French city?', output: Answer, retry: false });
  expect(result.output).toEqual({ city: 'Lyon', population: 520_000 });
  const [first, second] = bodies();
  expect(first!.response_format).toBeUndefined();
  expect(first!.tools!.map((t) => t.function.name)).toEqual(['final_answer']);
  expect(second!.messages.at(-1)!.content).toContain('Call final_answer again');
}

describe('structured output on the wire: the HTTP adapter', () => {
  it('sends response_format json_schema and validates the streamed answer', async () => {
    await expectJsonSchemaMode(openAICompatibleModel({ baseURL: server.baseURL, model: TEST_MODEL }));
  });

  it('with structuredOutputs: false, offers the final_answer tool instead', async () => {
    await expectToolMode(openAICompatibleModel({ baseURL: server.baseURL, model: TEST_MODEL, structuredOutputs: false }));
  });
});

const settings = (baseURL: string) => ({ name: 'local', baseURL, apiKey: 'sk-test', includeUsage: true });
const providers: { name: string; make: (structured: boolean) => AiSdkLanguageModel }[] = [
  { name: 'V2 (@ai-sdk/openai-compatible@1)', make: (structured) => createV2({ ...settings(server.baseURL), ...(structured && { supportsStructuredOutputs: true }) }).chatModel(TEST_MODEL) },
  { name: 'V3 (@ai-sdk/openai-compatible@2)', make: (structured) => createV3({ ...settings(server.baseURL), ...(structured && { supportsStructuredOutputs: true }) }).chatModel(TEST_MODEL) },
];

describe.each(providers)('structured output on the wire: an AI SDK provider, $name', ({ make }) => {
  it('with structured outputs, responseFormat reaches the server as response_format json_schema', async () => {
    await expectJsonSchemaMode(aiSdkModel(make(true)));
  });

  it('without them (the provider default), the final_answer tool is used: the schema is not dropped', async () => {
    await expectToolMode(aiSdkModel(make(false)));
  });
});

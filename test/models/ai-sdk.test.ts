import { APICallError, type LanguageModelV2StreamPart } from '@ai-sdk/provider';
import { convertArrayToReadableStream, MockLanguageModelV2 } from 'ai/test';
import { beforeAll, describe, expect, it } from 'vitest';
import type { Message } from '../../src/schemas.js';
import type { ModelRequest, ToolDefinition } from '../../src/model.js';
import { ModelError } from '../../src/model.js';
import { aiSdkModel } from '../../src/models/ai-sdk.js';
import { MalformedStreamError, ReadTimeoutError } from '../../src/models/errors.js';
import { UnsupportedModelError, type AiSdkLanguageModel } from '../../src/models/ai-sdk-spec.js';
import { PROVIDER_MAJORS } from '../support/ai-sdk-providers.js';
import { useChatServer } from '../support/chat-server.js';
import { failure } from './support.js';

const weather: ToolDefinition = {
  name: 'get_weather',
  description: 'Weather for a city',
  inputSchema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
};

function request(extra: Partial<ModelRequest> = {}): ModelRequest {
  return {
    messages: [{ role: 'user', content: 'hi' }],
    tools: [],
    signal: new AbortController().signal,
    idempotencyKey: 'run-1:turn-1',
    ...extra,
  };
}

/** The same suite for every provider major: a real provider package over HTTP to the local server. */
describe.each(PROVIDER_MAJORS)('aiSdkModel through $name against the local server', (major) => {
  let languageModel: AiSdkLanguageModel;
  // A major this Node cannot run is reported as skipped, with why, not silently left out.
  if (major.skip !== undefined) {
    it.skip(`(${major.skip})`, () => {});
    return;
  }
  const server = useChatServer();
  beforeAll(async () => {
    languageModel = await major.make(server.baseURL);
  });

  function model() {
    return aiSdkModel(languageModel);
  }

  it(`is told apart by its specification version (${major.specificationVersion})`, () => {
    expect(languageModel.specificationVersion).toBe(major.specificationVersion);
  });

  it('streams text deltas and reports usage and the finish reason', async () => {
    server.enqueue({ type: 'reply', text: ['Hel', 'lo ', 'there'], usage: { prompt_tokens: 9, completion_tokens: 3 }, writeSize: 11 });
    const deltas: string[] = [];
    const reply = await model().generate(request({ onTextDelta: (d) => deltas.push(d) }));
    expect(deltas).toEqual(['Hel', 'lo ', 'there']);
    expect(reply).toEqual({
      message: { role: 'assistant', content: 'Hello there' },
      finishReason: 'stop',
      usage: { inputTokens: 9, outputTokens: 3 },
    });
    expect(server.requests[0]?.headers['idempotency-key']).toBe('run-1:turn-1');
    expect(server.requests[0]?.headers.authorization).toBe('Bearer sk-test');
  });

  it('assembles parallel tool calls split across chunks and sends a provider-valid follow-up', async () => {
    server.enqueue({
      type: 'reply',
      toolCalls: [
        { id: 'call_a', name: 'get_weather', arguments: { city: 'Paris' } },
        { id: 'call_b', name: 'get_weather', arguments: { city: 'Oslo' } },
      ],
      argumentPieces: 4,
    });
    const first = await model().generate(request({ tools: [weather] }));
    expect(first.finishReason).toBe('tool-calls');
    expect(first.message).toEqual({
      role: 'assistant',
      content: '',
      toolCalls: [
        { id: 'call_a', name: 'get_weather', args: { city: 'Paris' } },
        { id: 'call_b', name: 'get_weather', args: { city: 'Oslo' } },
      ],
    });

    server.enqueue({ type: 'reply', text: ['Both sunny.'] });
    const history: Message[] = [
      { role: 'system', content: 'be brief' },
      { role: 'user', content: 'weather?' },
      first.message,
      { role: 'tool', toolCallId: 'call_a', toolName: 'get_weather', content: 'sunny' },
      { role: 'tool', toolCallId: 'call_b', toolName: 'get_weather', content: 'boom', isError: true },
    ];
    const second = await model().generate(request({ messages: history, tools: [weather] }));
    expect(second.message.content).toBe('Both sunny.');
    const body = server.requests[1]?.body as { messages: unknown[]; tools: unknown[] };
    expect(body.messages).toEqual([
      { role: 'system', content: 'be brief' },
      { role: 'user', content: 'weather?' },
      {
        role: 'assistant',
        // The SDK, like our HTTP adapter, sends null content on a tool-calls-only turn.
        content: null,
        tool_calls: [
          { id: 'call_a', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } },
          { id: 'call_b', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } },
        ],
      },
      { role: 'tool', tool_call_id: 'call_a', content: 'sunny' },
      { role: 'tool', tool_call_id: 'call_b', content: 'boom' },
    ]);
    expect(body.tools).toEqual([
      { type: 'function', function: { name: 'get_weather', description: 'Weather for a city', parameters: weather.inputSchema } },
    ]);
  });

  it('maps a 429 with retry-after to a retryable ModelError with the delay', async () => {
    server.enqueue({ type: 'error', status: 429, headers: { 'retry-after': '3' }, body: { error: { message: 'Slow down' } } });
    const error = await failure(model().generate(request()));
    expect(error).toBeInstanceOf(ModelError);
    expect(error).toMatchObject({ status: 429, retryable: true, retryAfterMs: 3000 });
    expect((error as Error).message).toContain('Slow down');
  });

  it.each([
    ['length', 'length'],
    ['content_filter', 'content-filter'],
    ['stop', 'stop'],
  ])('maps the server finish reason %s to %s', async (wire, ours) => {
    server.enqueue({ type: 'reply', text: ['x'], finishReason: wire });
    expect((await model().generate(request())).finishReason).toBe(ours);
  });

  it('reports the usage the server sent, and none when it sent none', async () => {
    server.enqueue({ type: 'reply', text: ['a'], usage: { prompt_tokens: 120, completion_tokens: 7 } }, { type: 'reply', text: ['b'], usage: null });
    expect((await model().generate(request())).usage).toEqual({ inputTokens: 120, outputTokens: 7 });
    expect(await model().generate(request())).not.toHaveProperty('usage');
  });

  it('maps a 404 (unknown model) to a clear non-retryable error', async () => {
    server.enqueue({ type: 'error', status: 404, body: { error: { message: 'The model `test-model` does not exist' } } });
    const error = await failure(model().generate(request()));
    expect(error).toBeInstanceOf(ModelError);
    expect(error).toMatchObject({ status: 404, retryable: false });
    expect((error as Error).message).toContain('does not exist');
  });

  it('maps a 500 to retryable and a 401 to a clear non-retryable error', async () => {
    server.enqueue(
      { type: 'error', status: 500, body: { error: { message: 'The server had an error' } } },
      { type: 'error', status: 401, body: { error: { message: 'Incorrect API key provided' } } },
    );
    expect(await failure(model().generate(request()))).toMatchObject({ status: 500, retryable: true });
    const unauthorized = (await failure(model().generate(request()))) as ModelError;
    expect(unauthorized).toMatchObject({ status: 401, retryable: false });
    expect(unauthorized.message).toContain('Incorrect API key provided');
    expect(unauthorized.message).toMatch(/API key/);
  });

  it('maps a malformed chunk to MalformedStreamError', async () => {
    server.enqueue({ type: 'malformed', afterFrames: 2 });
    const error = await failure(model().generate(request()));
    expect(error).toBeInstanceOf(MalformedStreamError);
    expect((error as Error).message).toMatch(/^malformed stream chunk/);
  });

  it('aborts a real HTTP stream mid-way with an AbortError', async () => {
    server.enqueue({ type: 'reply', text: Array.from({ length: 100 }, () => 'tick '), delayMs: 20 });
    const controller = new AbortController();
    let seen = 0;
    const started = Date.now();
    const error = await failure(
      model().generate(
        request({
          signal: controller.signal,
          onTextDelta: () => {
            if (++seen === 2) controller.abort();
          },
        }),
      ),
    );
    expect(error).toMatchObject({ name: 'AbortError' });
    expect(Date.now() - started).toBeLessThan(1_000);
    await expect.poll(() => server.requests[0]?.clientClosedEarly).toBe(true);
  });
});

describe('aiSdkModel with MockLanguageModelV2', () => {
  const usage = { inputTokens: 4, outputTokens: 2, totalTokens: 6 };

  function streaming(parts: LanguageModelV2StreamPart[]) {
    return new MockLanguageModelV2({ doStream: async () => ({ stream: convertArrayToReadableStream(parts) }) });
  }

  it('passes the prompt, tools, tool choice and idempotency header in the provider format', async () => {
    const mock = streaming([{ type: 'finish', finishReason: 'stop', usage }]);
    await aiSdkModel(mock).generate(
      request({
        tools: [weather],
        messages: [
          { role: 'system', content: 's' },
          { role: 'user', content: 'u' },
          { role: 'assistant', content: 'let me check', toolCalls: [{ id: 't1', name: 'get_weather', args: { city: 'X' } }] },
          { role: 'tool', toolCallId: 't1', toolName: 'get_weather', content: 'rain', isError: false },
          { role: 'assistant', content: 'rain' },
        ],
      }),
    );
    const call = mock.doStreamCalls[0]!;
    expect(call.prompt).toEqual([
      { role: 'system', content: 's' },
      { role: 'user', content: [{ type: 'text', text: 'u' }] },
      {
        role: 'assistant',
        content: [
          { type: 'text', text: 'let me check' },
          { type: 'tool-call', toolCallId: 't1', toolName: 'get_weather', input: { city: 'X' } },
        ],
      },
      { role: 'tool', content: [{ type: 'tool-result', toolCallId: 't1', toolName: 'get_weather', output: { type: 'text', value: 'rain' } }] },
      { role: 'assistant', content: [{ type: 'text', text: 'rain' }] },
    ]);
    expect(call.tools).toEqual([{ type: 'function', name: 'get_weather', description: weather.description, inputSchema: weather.inputSchema }]);
    expect(call.toolChoice).toEqual({ type: 'auto' });
    expect(call.headers).toEqual({ 'Idempotency-Key': 'run-1:turn-1' });
    expect(call.abortSignal).toBeInstanceOf(AbortSignal);
  });

  it.each([
    ['stop', 'stop'],
    ['length', 'length'],
    ['content-filter', 'content-filter'],
    ['tool-calls', 'tool-calls'],
    ['other', 'other'],
  ] as const)('maps the SDK finish reason %s to %s', async (sdk, ours) => {
    const mock = streaming([{ type: 'text-delta', id: '1', delta: 'x' }, { type: 'finish', finishReason: sdk, usage }]);
    expect((await aiSdkModel(mock).generate(request())).finishReason).toBe(ours);
  });

  it('takes complete tool-call parts, keeps unparsable input raw, skips provider-executed calls', async () => {
    const mock = streaming([
      { type: 'tool-input-start', id: 'a', toolName: 'get_weather' },
      { type: 'tool-input-delta', id: 'a', delta: '{"city":' },
      { type: 'tool-input-end', id: 'a' },
      { type: 'tool-call', toolCallId: 'a', toolName: 'get_weather', input: '{"city":"Lima"}' },
      { type: 'tool-call', toolCallId: 'b', toolName: 'get_weather', input: '{"city": Li' },
      { type: 'tool-call', toolCallId: 'c', toolName: 'web_search', input: '{}', providerExecuted: true },
      // Some providers say "stop" with tool calls; the reply still reports tool-calls.
      { type: 'finish', finishReason: 'stop', usage: { inputTokens: undefined, outputTokens: undefined, totalTokens: undefined } },
    ]);
    const reply = await aiSdkModel(mock).generate(request({ tools: [weather] }));
    expect(reply).toEqual({
      message: {
        role: 'assistant',
        content: '',
        toolCalls: [
          { id: 'a', name: 'get_weather', args: { city: 'Lima' } },
          { id: 'b', name: 'get_weather', args: '{"city": Li' },
        ],
      },
      finishReason: 'tool-calls',
    });
  });

  it('an abort mid-stream rejects promptly with an AbortError even if the provider ignores the signal', async () => {
    const mock = new MockLanguageModelV2({
      doStream: async () => ({
        stream: new ReadableStream<LanguageModelV2StreamPart>({
          start(controller) {
            controller.enqueue({ type: 'text-delta', id: '1', delta: 'partial' });
            // …and then nothing, forever.
          },
        }),
      }),
    });
    const controller = new AbortController();
    const pending = aiSdkModel(mock).generate(request({ signal: controller.signal, onTextDelta: () => controller.abort() }));
    const error = await failure(pending);
    expect(error).toMatchObject({ name: 'AbortError' });
  });

  it('an abort while doStream itself hangs rejects with an AbortError', async () => {
    const mock = new MockLanguageModelV2({ doStream: () => new Promise(() => {}) });
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 20);
    expect(await failure(aiSdkModel(mock).generate(request({ signal: controller.signal })))).toMatchObject({ name: 'AbortError' });
  });

  it('a provider stream that stalls fails with a ReadTimeoutError', async () => {
    const mock = new MockLanguageModelV2({
      doStream: async () => ({ stream: new ReadableStream<LanguageModelV2StreamPart>({ start: (c) => c.enqueue({ type: 'stream-start', warnings: [] }) }) }),
    });
    const error = await failure(aiSdkModel(mock, { readTimeoutMs: 60 }).generate(request()));
    expect(error).toBeInstanceOf(ReadTimeoutError);
    expect(error).toMatchObject({ retryable: true });
  });

  it('maps APICallError thrown by doStream: status, isRetryable, retry-after-ms header', async () => {
    const mock = new MockLanguageModelV2({
      doStream: async () => {
        throw new APICallError({
          message: 'Overloaded',
          url: 'https://api.example.com/v1/messages',
          requestBodyValues: {},
          statusCode: 529,
          responseHeaders: { 'Retry-After-Ms': '1500' },
          responseBody: '{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}',
        });
      },
    });
    const error = await failure(aiSdkModel(mock).generate(request()));
    expect(error).toBeInstanceOf(ModelError);
    expect(error).toMatchObject({ status: 529, retryable: true, retryAfterMs: 1500 });
    expect((error as Error).message).toContain('Overloaded');
  });

  it('maps an error part in the stream; a provider error object keeps its message', async () => {
    const mock = streaming([
      { type: 'text-delta', id: '1', delta: 'par' },
      { type: 'error', error: { message: 'The server had an error processing your request', type: 'server_error' } },
    ]);
    const error = await failure(aiSdkModel(mock).generate(request()));
    expect(error).toBeInstanceOf(ModelError);
    expect(error).toMatchObject({ retryable: true });
    expect((error as Error).message).toContain('The server had an error processing your request');
  });

  it('a V2 finish reason "error" is a stream that did not finish: retryable, nothing comes out, as from V3', async () => {
    const mock = streaming([{ type: 'text-delta', id: '1', delta: 'half an ans' }, { type: 'finish', finishReason: 'error', usage }]);
    const error = await failure(aiSdkModel(mock).generate(request()));
    expect(error).toBeInstanceOf(ModelError);
    expect(error).toMatchObject({ retryable: true });
    expect((error as Error).message).toBe('the stream ended before the model finished (the provider reported finish reason "error")');
  });

  it.each([
    ['an object without stream', { response: {} }, 'an object with keys [response]'],
    ['null', null, 'null'],
  ])('doStream resolving to %s is a MalformedStreamError', async (_, result, got) => {
    const mock = new MockLanguageModelV2({ doStream: async () => result as never });
    const error = await failure(aiSdkModel(mock).generate(request()));
    expect(error).toBeInstanceOf(MalformedStreamError);
    expect((error as Error).message).toBe(`malformed stream chunk: doStream resolved without a readable stream (got ${got})`);
  });

  it('a stream that ends without a finish part is a retryable error', async () => {
    const error = await failure(aiSdkModel(streaming([{ type: 'text-delta', id: '1', delta: 'x' }])).generate(request()));
    expect(error).toMatchObject({ retryable: true });
    expect((error as Error).message).toBe('the stream ended before the model finished (no finish part)');
  });
});

describe('aiSdkModel: which models it takes', () => {
  it.each([
    ['a V1 model (AI SDK 4)', { specificationVersion: 'v1', provider: 'p', modelId: 'm', doStream: async () => ({}) }, 'v1'],
    ['a version from the future', { specificationVersion: 'v9', provider: 'p', modelId: 'm', doStream: async () => ({}) }, 'v9'],
    ['an object without doStream', { specificationVersion: 'v3', provider: 'p', modelId: 'm' }, undefined],
    ['null', null, undefined],
  ])('%s is refused when wrapped, with UnsupportedModelError', (_, value, version) => {
    let thrown: unknown;
    try {
      aiSdkModel(value as unknown as AiSdkLanguageModel);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(UnsupportedModelError);
    expect(thrown).toMatchObject({ code: 'UnsupportedModel', specificationVersion: version });
  });
});

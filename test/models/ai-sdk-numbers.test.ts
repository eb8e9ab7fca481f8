import type { LanguageModelV2StreamPart } from '@ai-sdk/provider';
import type { LanguageModelV3StreamPart } from 'ai-sdk-provider-v3';
import { convertArrayToReadableStream, MockLanguageModelV2 } from 'ai/test';
import { beforeAll, describe, expect, it } from 'vitest';
import type { ModelRequest, ToolDefinition } from '../../src/model.js';
import { InvalidConfigError } from '../../src/errors.js';
import { ModelError } from '../../src/model.js';
import { aiSdkModel, type AiSdkModelOptions } from '../../src/models/ai-sdk.js';
import type { AiSdkLanguageModel } from '../../src/models/ai-sdk-spec.js';
import { MalformedStreamError, ModelDeadlineError } from '../../src/models/errors.js';
import { openAICompatibleModel } from '../../src/models/openai-compatible.js';
import { UsageSchema } from '../../src/schemas.js';
import { PROVIDER_MAJORS } from '../support/ai-sdk-providers.js';
import { TEST_MODEL, useChatServer } from '../support/chat-server.js';

const weather: ToolDefinition = {
  name: 'get_weather',
  description: 'Weather for a city',
  inputSchema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
};

function request(deltas: string[] = []): ModelRequest {
  return {
    messages: [{ role: 'user', content: 'hi' }],
    tools: [weather],
    signal: new AbortController().signal,
    idempotencyKey: 'k',
    onTextDelta: (d) => deltas.push(d),
  };
}

async function failure(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => {
      throw new Error('expected the call to fail');
    },
    (error: unknown) => error,
  );
}

function streaming(parts: LanguageModelV2StreamPart[]) {
  return new MockLanguageModelV2({ doStream: async () => ({ stream: convertArrayToReadableStream(parts) }) });
}

function finishWith(inputTokens: number | undefined, outputTokens: number | undefined) {
  return streaming([
    { type: 'text-delta', id: '1', delta: 'ok' },
    { type: 'finish', finishReason: 'stop', usage: { inputTokens, outputTokens, totalTokens: undefined } },
  ]);
}

describe('aiSdkModel: numbers from the provider are normalised where they enter', () => {
  it('a fractional usage is rounded, so it passes its own schema', async () => {
    const reply = await aiSdkModel(finishWith(1.5, 1)).generate(request());
    expect(reply.usage).toEqual({ inputTokens: 2, outputTokens: 1 });
    expect(UsageSchema.safeParse(reply.usage).success).toBe(true);
  });

  it.each([
    [-100, 1],
    [1e300, 1],
    [Number.NaN, 1],
    [1, Number.POSITIVE_INFINITY],
  ])('an impossible usage (%d, %d) is dropped', async (input, output) => {
    const reply = await aiSdkModel(finishWith(input, output)).generate(request());
    expect(reply).not.toHaveProperty('usage');
  });
});

/** A V3 provider model whose stream is these parts (the provider contract, not a provider package). */
function v3Streaming(parts: unknown[]): AiSdkLanguageModel {
  return {
    specificationVersion: 'v3',
    provider: 'v3-stub',
    modelId: 'm',
    doStream: async () => ({ stream: convertArrayToReadableStream(parts as LanguageModelV3StreamPart[]) }),
  };
}

const v3Finish = (usage: unknown, unified = 'stop') => [
  { type: 'text-delta', id: '1', delta: 'ok' },
  { type: 'finish', finishReason: { unified, raw: unified }, usage },
];

describe('aiSdkModel: a V3 finish part is checked where it enters', () => {
  const nested = (input: unknown, output: unknown) => ({
    inputTokens: { total: input, noCache: undefined, cacheRead: undefined, cacheWrite: undefined },
    outputTokens: { total: output, text: undefined, reasoning: undefined },
  });

  it('reads the nested totals, and normalises them as every usage is', async () => {
    expect((await aiSdkModel(v3Streaming(v3Finish(nested(10, 2.4)))).generate(request())).usage).toEqual({ inputTokens: 10, outputTokens: 2 });
    expect(await aiSdkModel(v3Streaming(v3Finish(nested(-1, 2)))).generate(request())).not.toHaveProperty('usage');
  });

  it.each([
    ['flat V2 counts', { inputTokens: 4, outputTokens: 2 }],
    ['a string', 'lots'],
    ['totals that are strings', nested('4', '2')],
  ])('a usage in the wrong shape (%s) is dropped and the reply still counts', async (_, usage) => {
    const reply = await aiSdkModel(v3Streaming(v3Finish(usage))).generate(request());
    expect(reply.message.content).toBe('ok');
    expect(reply).not.toHaveProperty('usage');
  });

  it('a finish reason in V2 form from a V3 model is a MalformedStreamError', async () => {
    const error = await failure(aiSdkModel(v3Streaming([{ type: 'finish', finishReason: 'stop', usage: nested(1, 1) }])).generate(request()));
    expect(error).toBeInstanceOf(MalformedStreamError);
  });

  it.each(['error', 'interrupted'])('finish reason %s is a stream that did not finish: retryable, nothing comes out', async (unified) => {
    const error = await failure(aiSdkModel(v3Streaming(v3Finish(nested(1, 1), unified))).generate(request()));
    expect(error).toMatchObject({ retryable: true });
    expect((error as Error).message).toMatch(/^the stream ended before the model finished/);
  });
});

describe.each(PROVIDER_MAJORS)('aiSdkModel through $name against a real HTTP server', (major) => {
  let languageModel: AiSdkLanguageModel;
  if (major.skip !== undefined) {
    it.skip(`(${major.skip})`, () => {});
    return;
  }
  const server = useChatServer({ checkRequests: false });
  beforeAll(async () => {
    languageModel = await major.make(server.baseURL);
  });

  function model(options: AiSdkModelOptions = {}) {
    return aiSdkModel(languageModel, options);
  }

  it('a stream cut before its finish reason is a retryable error, and its half tool call never comes out', async () => {
    // The server ends the body cleanly but without a finish_reason: the provider flushes the
    // half-received tool call and a finish part with reason "unknown".
    server.enqueue({
      type: 'reply',
      text: ['Let me '],
      toolCalls: [{ id: 'c1', name: 'get_weather', arguments: { city: 'Paris' } }],
      finishReason: null,
      usage: null,
      done: false,
    });
    const error = await failure(model().generate(request()));
    expect(error).toBeInstanceOf(ModelError);
    expect(error).toMatchObject({ retryable: true, status: undefined });
    expect((error as Error).message).toMatch(/^the stream ended before the model finished/);
  });

  it('a stream cut before its finish reason fails the same way without tool calls', async () => {
    server.enqueue({ type: 'reply', text: ['cut ', 'mid-'], finishReason: null, usage: null, done: true });
    const error = await failure(model().generate(request()));
    expect((error as Error).message).toMatch(/^the stream ended before the model finished/);
  });

  it('a lost connection is reported like openAICompatibleModel reports it: no status, retryable', async () => {
    server.enqueue({ type: 'disconnect', afterFrames: 2 }, { type: 'disconnect', afterFrames: 2 });
    const viaSdk = await failure(model().generate(request()));
    const viaHttp = await failure(openAICompatibleModel({ baseURL: server.baseURL, model: TEST_MODEL }).generate(request()));
    for (const error of [viaSdk, viaHttp]) {
      expect(error).toBeInstanceOf(ModelError);
      expect(error).toMatchObject({ status: undefined, retryable: true });
      expect((error as Error).message).toMatch(/^the connection was lost mid-stream: /);
    }
    expect((viaSdk as Error).message).not.toContain('HTTP 200');
  });

  it('a provider message ending in a period does not end up with two', async () => {
    server.enqueue({
      type: 'error',
      status: 401,
      body: { error: { message: 'Incorrect API key provided. You can find your API key at https://platform.openai.com/account/api-keys.' } },
    });
    const error = await failure(model().generate(request()));
    expect((error as Error).message).toContain('/account/api-keys. Check the API key');
    expect((error as Error).message).not.toContain('..');
  });

  it('a nonsense read timeout or deadline is refused when the model is made, not read as "none"', () => {
    expect(() => model({ readTimeoutMs: 0 })).toThrow(InvalidConfigError);
    expect(() => model({ deadlineMs: -1 })).toThrow(InvalidConfigError);
    expect(() => model({ readTimeoutMs: Infinity, deadlineMs: Infinity })).not.toThrow();
  });

  it('endless keep-alive comments end with a non-retryable ModelDeadlineError', async () => {
    const frames = Array.from({ length: 400 }, () => ': keep-alive\n\n');
    server.enqueue({ type: 'frames', frames, delayMs: 20 });
    const error = await failure(model({ readTimeoutMs: 2_000, deadlineMs: 400 }).generate(request()));
    expect(error).toBeInstanceOf(ModelDeadlineError);
    expect(error).toMatchObject({ retryable: false });
  });
});

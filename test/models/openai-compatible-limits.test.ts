import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import type { ModelRequest } from '../../src/model.js';
import { InvalidConfigError } from '../../src/errors.js';
import { ModelError } from '../../src/model.js';
import { MalformedStreamError, ModelDeadlineError } from '../../src/models/errors.js';
import { openAICompatibleModel, type OpenAICompatibleOptions } from '../../src/models/openai-compatible.js';
import { UsageSchema } from '../../src/schemas.js';
import { replyFrames, TEST_MODEL, useChatServer } from '../support/chat-server.js';

const server = useChatServer({ checkRequests: false });

function model(extra: Partial<OpenAICompatibleOptions> = {}) {
  return openAICompatibleModel({ baseURL: server.baseURL, apiKey: 'sk-test', model: TEST_MODEL, ...extra });
}

function request(): ModelRequest {
  return { messages: [{ role: 'user', content: 'hi' }], tools: [], signal: new AbortController().signal, idempotencyKey: 'k' };
}

async function failure(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => {
      throw new Error('expected the call to fail');
    },
    (error: unknown) => error,
  );
}

function nestedJson(depth: number): string {
  return `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;
}

describe('openAICompatibleModel: numbers from the provider are normalised where they enter', () => {
  it('a fractional prompt_tokens is rounded, so the usage passes its own schema', async () => {
    server.enqueue({ type: 'reply', text: ['ok'], usage: { prompt_tokens: 10.5, completion_tokens: 2 } });
    const reply = await model().generate(request());
    expect(reply.usage).toEqual({ inputTokens: 11, outputTokens: 2 });
    expect(UsageSchema.safeParse(reply.usage).success).toBe(true);
  });

  it.each([
    { prompt_tokens: -100, completion_tokens: 2 },
    { prompt_tokens: 1e300, completion_tokens: 2 },
    { prompt_tokens: 5, completion_tokens: 2e9 },
  ])('an impossible usage %j is dropped (the driver estimates instead)', async (usage) => {
    server.enqueue({ type: 'reply', text: ['ok'], usage });
    const reply = await model().generate(request());
    expect(reply).toEqual({ message: { role: 'assistant', content: 'ok' }, finishReason: 'stop' });
  });

  it('a usage string or NaN-like value in a raw frame is dropped too', async () => {
    server.enqueue({
      type: 'frames',
      frames: [
        'data: {"choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":"stop"}]}\n\n',
        'data: {"choices":[],"usage":{"prompt_tokens":"NaN","completion_tokens":1}}\n\n',
        'data: [DONE]\n\n',
      ],
    });
    expect(await model().generate(request())).not.toHaveProperty('usage');
  });

  it('tool arguments nested 10,000 deep stay the raw text, so nothing downstream overflows the stack', async () => {
    const deep = nestedJson(10_000);
    server.enqueue({ type: 'reply', toolCalls: [{ id: 'c1', name: 'get_weather', arguments: deep }], argumentPieces: 1 });
    const reply = await model().generate(request());
    expect(reply.message.toolCalls).toEqual([{ id: 'c1', name: 'get_weather', args: deep }]);
  });
});

describe('openAICompatibleModel: error messages', () => {
  it('a provider message ending in a period does not end up with two', async () => {
    server.enqueue({
      type: 'error',
      status: 401,
      body: { error: { message: 'Incorrect API key provided: sk-test. You can find your API key at https://platform.openai.com/account/api-keys.' } },
    });
    const error = await failure(model().generate(request()));
    expect(error).toBeInstanceOf(ModelError);
    expect((error as Error).message).toContain('/account/api-keys. Check the API key');
    expect((error as Error).message).not.toContain('..');
  });
});

describe('openAICompatibleModel: an overall deadline besides the read timeout', () => {
  it('endless keep-alive comments end with a non-retryable ModelDeadlineError', async () => {
    // Each comment arrives well within the read timeout, so only the deadline can end the call.
    const frames = Array.from({ length: 400 }, () => ': keep-alive\n\n');
    server.enqueue({ type: 'frames', frames, delayMs: 20 });
    const started = Date.now();
    const error = await failure(model({ readTimeoutMs: 2_000, deadlineMs: 400 }).generate(request()));
    expect(error).toBeInstanceOf(ModelDeadlineError);
    expect(error).toMatchObject({ retryable: false, deadlineMs: 400, status: undefined });
    expect(Date.now() - started).toBeLessThan(4_000);
  });

  it('endless text ends with ModelDeadlineError too', async () => {
    const text = Array.from({ length: 400 }, () => 'more ');
    server.enqueue({ type: 'frames', frames: replyFrames({ text }), delayMs: 20 });
    const error = await failure(model({ readTimeoutMs: 2_000, deadlineMs: 400 }).generate(request()));
    expect(error).toBeInstanceOf(ModelDeadlineError);
  });

  it('a nonsense deadline or read timeout is refused when the model is made; Infinity turns it off', () => {
    expect(() => model({ deadlineMs: 0 })).toThrow(InvalidConfigError);
    expect(() => model({ deadlineMs: Number.NaN })).toThrow(InvalidConfigError);
    expect(() => model({ deadlineMs: Infinity })).not.toThrow();
    expect(() => model({ readTimeoutMs: 0 })).toThrow(InvalidConfigError);
    expect(() => model({ readTimeoutMs: -5 })).toThrow(InvalidConfigError);
    expect(() => model({ readTimeoutMs: Infinity })).not.toThrow();
    // Before: a raw RangeError, not the LoopchartError every other bad option is.
    expect(() => model({ readTimeoutMs: '5' as never })).toThrow(/readTimeoutMs must be a positive number/);
    expect(() => model({ maxResponseBytes: -1 })).toThrow(InvalidConfigError);
    expect(() => model({ maxResponseBytes: 1.5 })).toThrow(/maxResponseBytes must be a positive integer/);
  });

  it('options of the wrong type are refused when the model is made, naming the option and no header value', () => {
    // Before: each was accepted, and every call then failed (a ModelError) or read it wrongly.
    for (const [options, problem] of [
      [{ apiKey: 5 }, /apiKey must be a string/],
      [{ headers: 'x' }, /headers must be an object of string values/],
      [{ headers: { 'x-team': 5 } }, /headers must be an object of string values/],
      [{ fetch: 'x' }, /fetch must be a function/],
      [{ structuredOutputs: 'yes' }, /structuredOutputs must be a boolean/],
      [{ headers: { 'x-team': 'a\nsecret' } }, /headers\.x-team must not contain control characters .*U\+000A at index 1/],
      [{ apiKey: 'sk-\nsecret' }, /apiKey must not contain control characters .*U\+000A at index 3/],
      [{ apiKey: 'sk-…secret' }, /headers \(or apiKey\) hold a name or value HTTP does not allow: .*authorization/],
      [{ headers: { 'x team': 'secret' } }, /headers \(or apiKey\) hold a name or value HTTP does not allow: .*x team/],
    ] as const) {
      expect(() => model(options as never)).toThrow(InvalidConfigError);
      expect(() => model(options as never)).toThrow(problem);
      expect(() => model(options as never)).not.toThrow(/secret/);
    }
  });
});

describe('openAICompatibleModel: the whole response is bounded, not only each line', () => {
  it('many small events past maxResponseBytes fail with MalformedStreamError', async () => {
    const text = Array.from({ length: 2_000 }, () => 'x'.repeat(100));
    server.enqueue({ type: 'reply', text });
    const error = await failure(model({ maxResponseBytes: 64 * 1024 }).generate(request()));
    expect(error).toBeInstanceOf(MalformedStreamError);
    expect((error as Error).message).toContain('the response passed 65536 bytes');
  });

  it.each(['text/event-stream', 'application/json'])('a gzip bomb (%s) is refused once its unpacked bytes pass the limit', async (contentType) => {
    // 64 MiB that gzip packs into about 64 KB.
    const body = gzipSync(Buffer.alloc(64 * 1024 * 1024, 'a'));
    const bomb = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': contentType, 'content-encoding': 'gzip', 'content-length': body.length });
      res.end(body);
    });
    await new Promise<void>((resolve) => bomb.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = bomb.address() as AddressInfo;
      const bombed = openAICompatibleModel({ baseURL: `http://127.0.0.1:${port}/v1`, model: TEST_MODEL, maxResponseBytes: 1024 * 1024 });
      const error = await failure(bombed.generate(request()));
      expect(error).toBeInstanceOf(MalformedStreamError);
      expect((error as Error).message).toContain('the response passed 1048576 bytes');
    } finally {
      bomb.closeAllConnections();
      await new Promise((resolve) => bomb.close(resolve));
    }
  });
});

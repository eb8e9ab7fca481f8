import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { describe, expect, it } from 'vitest';
import type { Model, ModelRequest } from '../../src/model.js';
import { ModelError } from '../../src/model.js';
import { aiSdkModel } from '../../src/models/ai-sdk.js';
import { openAICompatibleModel } from '../../src/models/openai-compatible.js';
import { withRetry } from '../../src/models/retry.js';
import { TEST_MODEL, useChatServer } from '../support/chat-server.js';

/**
 * The adapters only report `status` / `retryable` / `retryAfterMs`; the retry wrapper acts on
 * them. These tests run both together against the local server, with the waits recorded instead
 * of slept so the `retry-after` floor is visible without slowing the suite.
 */

const server = useChatServer();

const adapters: Array<[string, () => Model]> = [
  ['openAICompatibleModel', () => openAICompatibleModel({ baseURL: server.baseURL, apiKey: 'sk-test', model: TEST_MODEL })],
  [
    'aiSdkModel(createOpenAICompatible)',
    () => aiSdkModel(createOpenAICompatible({ name: 'local', baseURL: server.baseURL, apiKey: 'sk-test', includeUsage: true }).chatModel(TEST_MODEL)),
  ],
];

function request(): ModelRequest {
  return { messages: [{ role: 'user', content: 'hi' }], tools: [], signal: new AbortController().signal, idempotencyKey: 'conv-1:turn-4' };
}

function retrying(model: Model) {
  const waits: number[] = [];
  const retried = withRetry(model, {
    maxRetries: 3,
    baseDelayMs: 10,
    random: () => 0.5,
    sleep: async (ms) => void waits.push(ms),
  });
  return { retried, waits };
}

describe.each(adapters)('%s under withRetry', (_, make) => {
  it('429 with retry-after, then success: waits at least what the server asked, same idempotency key', async () => {
    server.enqueue(
      { type: 'error', status: 429, headers: { 'retry-after': '2' }, body: { error: { message: 'Rate limit reached' } } },
      { type: 'reply', text: ['after ', 'the wait'] },
    );
    const { retried, waits } = retrying(make());
    const reply = await retried.generate(request());
    expect(reply.message.content).toBe('after the wait');
    expect(waits).toEqual([2000]);
    expect(server.requests.map((r) => r.headers['idempotency-key'])).toEqual(['conv-1:turn-4', 'conv-1:turn-4']);
  });

  it('500 twice, then success', async () => {
    server.enqueue(
      { type: 'error', status: 500, body: { error: { message: 'The server had an error' } } },
      { type: 'error', status: 500, body: { error: { message: 'The server had an error' } } },
      { type: 'reply', text: ['third time lucky'] },
    );
    const { retried, waits } = retrying(make());
    const reply = await retried.generate(request());
    expect(reply.message.content).toBe('third time lucky');
    expect(waits).toHaveLength(2);
    expect(server.requests).toHaveLength(3);
  });

  it('401 fails fast: one request, no wait, the clear message intact', async () => {
    server.enqueue({ type: 'error', status: 401, body: { error: { message: 'Incorrect API key provided' } } });
    const { retried, waits } = retrying(make());
    const error = await retried.generate(request()).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(ModelError);
    expect(error).toMatchObject({ status: 401, retryable: false });
    expect((error as Error).message).toMatch(/API key/);
    expect(waits).toEqual([]);
    expect(server.requests).toHaveLength(1);
  });
});

describe('openAICompatibleModel under withRetry: broken streams', () => {
  // The read timeout bounds a gap between chunks: long enough that the second, healthy reply is never cut on a loaded machine (100 ms was, once).
  it('a stalled stream times out and the retry gets the reply', async () => {
    server.enqueue({ type: 'stall', afterBytes: 120 }, { type: 'reply', text: ['recovered'] });
    const { retried, waits } = retrying(openAICompatibleModel({ baseURL: server.baseURL, model: TEST_MODEL, readTimeoutMs: 750 }));
    const reply = await retried.generate(request());
    expect(reply.message.content).toBe('recovered');
    expect(waits).toHaveLength(1);
  });

  it('a malformed chunk is not retried', async () => {
    server.enqueue({ type: 'malformed' });
    const { retried, waits } = retrying(openAICompatibleModel({ baseURL: server.baseURL, model: TEST_MODEL }));
    await expect(retried.generate(request())).rejects.toMatchObject({ name: 'MalformedStreamError' });
    expect(waits).toEqual([]);
  });
});

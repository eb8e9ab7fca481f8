/**
 * How a Chat Completions stream may end short of `data: [DONE]` after a reply, against the local
 * server: a stream of [DONE] alone, a finish reason followed by silence, a JSON error body sent
 * under the stream's content type, a delta whose content is not text.
 */
import { describe, expect, it, vi } from 'vitest';
import type { ModelRequest } from '../../src/model.js';
import { ModelError } from '../../src/model.js';
import { MalformedStreamError } from '../../src/models/errors.js';
import { openAICompatibleModel, type OpenAICompatibleOptions } from '../../src/models/openai-compatible.js';
import { replyFrames, TEST_MODEL, useChatServer } from '../support/chat-server.js';
import { failure } from './support.js';

const server = useChatServer();

function model(extra: Partial<OpenAICompatibleOptions> = {}) {
  return openAICompatibleModel({ baseURL: server.baseURL, model: TEST_MODEL, ...extra });
}

function request(): ModelRequest {
  return { messages: [{ role: 'user', content: 'hi' }], tools: [], signal: new AbortController().signal, idempotencyKey: 'run-1:turn-1' };
}

describe('openAICompatibleModel: how a stream ends', () => {
  it.each([
    ['[DONE] alone', ['data: [DONE]\n\n']],
    ['usage, then [DONE]', ['data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":0}}\n\n', 'data: [DONE]\n\n']],
  ])('%s is a retryable ModelError, not an empty reply', async (_, frames) => {
    server.enqueue({ type: 'frames', frames });
    const error = await failure(model().generate(request()));
    expect(error).toBeInstanceOf(ModelError);
    expect(error).toMatchObject({ retryable: true, status: undefined });
    expect((error as Error).message).toBe('the stream carried [DONE] but no reply (no choice, no finish_reason)');
  });

  it('a finish reason and usage followed by silence return the reply after a short grace, closing the connection', async () => {
    // Every frame but [DONE], and the connection held open.
    server.enqueue({ type: 'stall', afterBytes: 1e6, reply: { text: ['complete ', 'answer'], usage: { prompt_tokens: 5, completion_tokens: 2 }, done: false } });
    const started = Date.now();
    const reply = await model({ readTimeoutMs: 4_000 }).generate(request());
    expect(reply).toEqual({ message: { role: 'assistant', content: 'complete answer' }, finishReason: 'stop', usage: { inputTokens: 5, outputTokens: 2 } });
    expect(Date.now() - started).toBeLessThan(2_500);
    await expect.poll(() => server.requests[0]?.clientClosedEarly).toBe(true);
  });

  // The grace counts on the monotonic clock. Before, each read after the finish reason waited
  // graceEndsAt - Date.now(): a wall clock stepped back an hour during the grace stretched it by
  // the hour, so a server (or proxy) that keeps the stream alive with comments held the complete
  // reply until it stopped sending them (8 s here; for ever, up to the call's deadline, for one that never does).
  it('a wall clock stepped back during the grace does not stretch it past a server\'s keep-alive comments', async () => {
    const frame = (choice: Record<string, unknown>) => `data: ${JSON.stringify({ id: 'chatcmpl-grace', object: 'chat.completion.chunk', created: 1, model: TEST_MODEL, choices: [{ index: 0, logprobs: null, ...choice }] })}\n\n`;
    const keepAlive = Array.from({ length: 80 }, () => ': keep-alive\n\n');
    server.enqueue({ type: 'frames', delayMs: 100, frames: [frame({ delta: { role: 'assistant', content: '' }, finish_reason: null }), frame({ delta: { content: 'complete answer' }, finish_reason: 'stop' }), ...keepAlive] });
    const realNow = Date.now.bind(Date);
    let offset = 0;
    const spy = vi.spyOn(Date, 'now').mockImplementation(() => realNow() + offset);
    try {
      const started = performance.now();
      // Stepped back once the chunk with the finish reason is read (the grace's end already taken from the clock).
      const reply = await model().generate({ ...request(), onTextDelta: () => void setImmediate(() => (offset = -3_600_000)) });
      expect(offset).toBeLessThan(0);
      expect(reply.message.content).toBe('complete answer');
      // The grace is 1 s; the keep-alive comments go on for 8 s.
      expect(performance.now() - started).toBeLessThan(4_000);
    } finally {
      spy.mockRestore();
    }
  });

  it('the grace ends before a short read timeout would', async () => {
    server.enqueue({ type: 'stall', afterBytes: 1e6, reply: { text: ['quick'], done: false } });
    const reply = await model({ readTimeoutMs: 300 }).generate(request());
    expect(reply.message.content).toBe('quick');
  });

  it.each([
    ['insufficient_quota', 'You exceeded your current quota', false],
    ['server_error', 'The engine is overloaded', true],
  ])('a JSON error body (%s) under text/event-stream keeps the provider message and is classified like a JSON response', async (type, message, retryable) => {
    server.enqueue({ type: 'frames', frames: [`\n${JSON.stringify({ error: { message, type, code: type } })}\n`] });
    const error = await failure(model().generate(request()));
    expect(error).toBeInstanceOf(ModelError);
    expect(error).toMatchObject({ retryable });
    expect((error as Error).message).toBe(`the provider reported an error mid-stream: ${message}`);
  });

  it('a delta whose content is not a string is a MalformedStreamError, not an empty reply', async () => {
    const chunk = { choices: [{ index: 0, delta: { content: 12345 }, finish_reason: 'stop' }] };
    server.enqueue({ type: 'frames', frames: [`data: ${JSON.stringify(chunk)}\n\n`, 'data: [DONE]\n\n'] });
    const error = await failure(model().generate(request()));
    expect(error).toBeInstanceOf(MalformedStreamError);
    expect((error as Error).message).toContain('"content" is neither a string nor a list of content parts: 12345');
  });

  it('a delta whose content is a list of content parts (as some servers send it) gives their text', async () => {
    const chunk = { choices: [{ index: 0, delta: { content: [{ type: 'text', text: 'Hello, ' }, { type: 'text', text: 'Oslo.' }] }, finish_reason: 'stop' }] };
    server.enqueue({ type: 'frames', frames: [`data: ${JSON.stringify(chunk)}\n\n`, 'data: [DONE]\n\n'] });
    const reply = await model().generate(request());
    expect(reply.message.content).toBe('Hello, Oslo.');
  });

  it('a null content (a tool-call delta) is still fine', async () => {
    server.enqueue({ type: 'frames', frames: replyFrames({ toolCalls: [{ name: 'get_weather', arguments: { city: 'Oslo' } }] }) });
    const reply = await model().generate(request());
    expect(reply.finishReason).toBe('tool-calls');
  });
});

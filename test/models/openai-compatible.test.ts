import { describe, expect, it } from 'vitest';
import type { Message } from '../../src/schemas.js';
import type { ModelRequest, ToolDefinition } from '../../src/model.js';
import { ModelError } from '../../src/model.js';
import { MalformedStreamError, ReadTimeoutError } from '../../src/models/errors.js';
import { openAICompatibleModel, type OpenAICompatibleOptions } from '../../src/models/openai-compatible.js';
import { replyFrames, TEST_MODEL, useChatServer, startChatServer } from '../support/chat-server.js';
import { failure } from './support.js';

const server = useChatServer();

const weather: ToolDefinition = {
  name: 'get_weather',
  description: 'Weather for a city',
  inputSchema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
};

function model(extra: Partial<OpenAICompatibleOptions> = {}) {
  return openAICompatibleModel({ baseURL: server.baseURL, apiKey: 'sk-test', model: TEST_MODEL, ...extra });
}

function request(extra: Partial<ModelRequest> = {}): ModelRequest {
  return {
    messages: [{ role: 'user', content: 'hi' }],
    tools: [],
    signal: new AbortController().signal,
    idempotencyKey: 'run-1:turn-1',
    ...extra,
  };
}

describe('openAICompatibleModel: streaming', () => {
  it('streams text deltas in order and returns the assembled message, finish reason and usage', async () => {
    server.enqueue({ type: 'reply', text: ['Hel', 'lo, ', 'wörld 👋'], usage: { prompt_tokens: 21, completion_tokens: 4 } });
    const deltas: string[] = [];
    const reply = await model().generate(request({ onTextDelta: (d) => deltas.push(d) }));
    expect(deltas).toEqual(['Hel', 'lo, ', 'wörld 👋']);
    expect(reply).toEqual({
      message: { role: 'assistant', content: 'Hello, wörld 👋' },
      finishReason: 'stop',
      usage: { inputTokens: 21, outputTokens: 4 },
    });
  });

  it('survives a byte stream cut into 7-byte writes with keep-alive comments in between', async () => {
    server.enqueue({ type: 'reply', text: ['ünï', 'cödé ', '✓'], writeSize: 7, keepAlive: true });
    const deltas: string[] = [];
    const reply = await model().generate(request({ onTextDelta: (d) => deltas.push(d) }));
    expect(deltas.join('')).toBe('ünïcödé ✓');
    expect(reply.message.content).toBe('ünïcödé ✓');
  });

  it('assembles parallel tool calls whose arguments arrive in pieces, interleaved across chunks', async () => {
    server.enqueue({
      type: 'reply',
      text: ['Checking both.'],
      toolCalls: [
        { id: 'call_a', name: 'get_weather', arguments: { city: 'Paris', unit: 'c' } },
        { id: 'call_b', name: 'get_weather', arguments: { city: 'Oslo', days: [1, 2, 3] } },
      ],
      argumentPieces: 5,
      interleave: true,
      writeSize: 13,
    });
    const reply = await model().generate(request({ tools: [weather] }));
    expect(reply.finishReason).toBe('tool-calls');
    expect(reply.message).toEqual({
      role: 'assistant',
      content: 'Checking both.',
      toolCalls: [
        { id: 'call_a', name: 'get_weather', args: { city: 'Paris', unit: 'c' } },
        { id: 'call_b', name: 'get_weather', args: { city: 'Oslo', days: [1, 2, 3] } },
      ],
    });
  });

  it('keeps unparsable arguments as the raw string, and empty arguments as {}', async () => {
    server.enqueue({
      type: 'reply',
      toolCalls: [
        { id: 'c1', name: 'get_weather', arguments: '{"city": "Par' },
        { id: 'c2', name: 'get_weather', arguments: '' },
      ],
    });
    const reply = await model().generate(request({ tools: [weather] }));
    expect(reply.message.toolCalls).toEqual([
      { id: 'c1', name: 'get_weather', args: '{"city": "Par' },
      { id: 'c2', name: 'get_weather', args: {} },
    ]);
  });

  it('normalizes finish reasons: a reply cut by length says so', async () => {
    server.enqueue({ type: 'reply', text: ['trunc'], finishReason: 'length' });
    server.enqueue({ type: 'reply', text: [''], finishReason: 'content_filter' });
    server.enqueue({ type: 'reply', text: ['x'], finishReason: 'something_new' });
    expect((await model().generate(request())).finishReason).toBe('length');
    expect((await model().generate(request())).finishReason).toBe('content-filter');
    expect((await model().generate(request())).finishReason).toBe('other');
  });

  it('reports no usage when the server sends none, and accepts a stream without [DONE] once finished', async () => {
    server.enqueue({ type: 'reply', text: ['ok'], usage: null, done: false });
    const reply = await model().generate(request());
    expect(reply).toEqual({ message: { role: 'assistant', content: 'ok' }, finishReason: 'stop' });
  });

  it('accepts a non-streamed JSON completion from a server that ignores stream: true', async () => {
    server.enqueue({
      type: 'json',
      body: {
        choices: [
          {
            index: 0,
            message: {
              role: 'assistant',
              content: null,
              tool_calls: [{ id: 'c9', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Rome"}' } }],
            },
            finish_reason: 'tool_calls',
          },
        ],
        usage: { prompt_tokens: 5, completion_tokens: 6 },
      },
    });
    const reply = await model().generate(request({ tools: [weather] }));
    expect(reply).toEqual({
      message: { role: 'assistant', content: '', toolCalls: [{ id: 'c9', name: 'get_weather', args: { city: 'Rome' } }] },
      finishReason: 'tool-calls',
      usage: { inputTokens: 5, outputTokens: 6 },
    });
  });
});

describe('openAICompatibleModel: the request it sends', () => {
  it('maps messages, tool calls, tool results and tools to the wire format, with usage requested', async () => {
    server.enqueue({ type: 'reply', text: ['done'] });
    const messages: Message[] = [
      { role: 'system', content: 'be brief' },
      { role: 'user', content: 'weather?' },
      {
        role: 'assistant',
        content: '',
        toolCalls: [
          { id: 'call_1', name: 'get_weather', args: { city: 'Paris' } },
          { id: 'call_2', name: 'get_weather', args: '{"city": "Par' },
        ],
      },
      { role: 'tool', toolCallId: 'call_1', toolName: 'get_weather', content: 'sunny' },
      { role: 'tool', toolCallId: 'call_2', toolName: 'get_weather', content: 'invalid arguments', isError: true },
      { role: 'assistant', content: 'Sunny in Paris.' },
      { role: 'user', content: 'thanks' },
    ];
    await model({ headers: { 'X-Extra': 'yes' } }).generate(
      request({ messages, tools: [weather], idempotencyKey: 'conv-9:turn-3' }),
    );
    const [sent] = server.requests;
    expect(sent?.path).toBe('/v1/chat/completions');
    expect(sent?.headers['idempotency-key']).toBe('conv-9:turn-3');
    expect(sent?.headers.authorization).toBe('Bearer sk-test');
    expect(sent?.headers['x-extra']).toBe('yes');
    expect(sent?.body).toEqual({
      model: TEST_MODEL,
      stream: true,
      stream_options: { include_usage: true },
      tools: [{ type: 'function', function: { name: 'get_weather', description: 'Weather for a city', parameters: weather.inputSchema } }],
      messages: [
        { role: 'system', content: 'be brief' },
        { role: 'user', content: 'weather?' },
        {
          role: 'assistant',
          content: null,
          tool_calls: [
            { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } },
            { id: 'call_2', type: 'function', function: { name: 'get_weather', arguments: '"{\\"city\\": \\"Par"' } },
          ],
        },
        { role: 'tool', tool_call_id: 'call_1', content: 'sunny' },
        { role: 'tool', tool_call_id: 'call_2', content: 'invalid arguments' },
        { role: 'assistant', content: 'Sunny in Paris.' },
        { role: 'user', content: 'thanks' },
      ],
    });
  });

  it('lets a custom Authorization header replace the API key header, whatever its case', async () => {
    server.enqueue({ type: 'reply', text: ['x'] });
    await model({ headers: { Authorization: 'Token abc' } }).generate(request());
    expect(server.requests[0]?.headers.authorization).toBe('Token abc');
  });

  it('omits tools when there are none and sends no Authorization without an API key', async () => {
    server.enqueue({ type: 'reply', text: ['x'] });
    await model({ apiKey: undefined, baseURL: `${server.baseURL}/` }).generate(request());
    const [sent] = server.requests;
    expect(sent?.path).toBe('/v1/chat/completions');
    expect(sent?.headers.authorization).toBeUndefined();
    expect(sent?.body).not.toHaveProperty('tools');
  });
});

describe('openAICompatibleModel: HTTP errors', () => {
  it('429 with retry-after in seconds is retryable and carries the delay', async () => {
    server.enqueue({
      type: 'error',
      status: 429,
      headers: { 'retry-after': '2' },
      body: { error: { message: 'Rate limit reached for requests', type: 'requests', code: 'rate_limit_exceeded' } },
    });
    const error = await failure(model().generate(request()));
    expect(error).toBeInstanceOf(ModelError);
    expect(error).toMatchObject({ status: 429, retryable: true, retryAfterMs: 2000 });
    expect((error as Error).message).toContain('Rate limit reached for requests');
  });

  it('prefers retry-after-ms, and reads retry-after as an HTTP date', async () => {
    server.enqueue({ type: 'error', status: 429, headers: { 'retry-after-ms': '350', 'retry-after': '1' } });
    server.enqueue({ type: 'error', status: 503, headers: { 'retry-after': new Date(Date.now() + 5_000).toUTCString() } });
    expect(await failure(model().generate(request()))).toMatchObject({ retryAfterMs: 350 });
    const dated = (await failure(model().generate(request()))) as ModelError;
    expect(dated).toMatchObject({ status: 503, retryable: true });
    // An HTTP date has one-second resolution.
    expect(dated.retryAfterMs).toBeGreaterThan(3_000);
    expect(dated.retryAfterMs).toBeLessThanOrEqual(5_000);
  });

  it.each(
    ['0x10', '1e3', '5, 10', 'Infinity', '-1', '16s'].flatMap((value) => [
      ['retry-after', value],
      ['retry-after-ms', value],
    ]),
  )('ignores %s %j: only decimal digits or an HTTP date count', async (header, value) => {
    server.enqueue({ type: 'error', status: 429, headers: { [header]: value } });
    expect(await failure(model().generate(request()))).toMatchObject({ status: 429, retryable: true, retryAfterMs: undefined });
  });

  it('reads retry-after in all three HTTP date forms', async () => {
    const later = new Date(Date.now() + 60_000);
    const [weekday, day, month, year, time] = later.toUTCString().split(/,? /) as [string, string, string, string, string];
    const long = later.toLocaleDateString('en-US', { weekday: 'long', timeZone: 'UTC' });
    const forms = [later.toUTCString(), `${long}, ${day}-${month}-${year.slice(2)} ${time} GMT`, `${weekday} ${month} ${day.replace(/^0/, ' ')} ${time} ${year}`];
    for (const form of forms) server.enqueue({ type: 'error', status: 503, headers: { 'retry-after': form } });
    for (const form of forms) {
      const error = (await failure(model().generate(request()))) as ModelError;
      expect(error.retryAfterMs, form).toBeGreaterThan(50_000);
    }
  });

  it.each([500, 502, 503, 529, 408, 409])('%i is retryable', async (status) => {
    server.enqueue({ type: 'error', status, body: 'upstream trouble' });
    const error = await failure(model().generate(request()));
    expect(error).toMatchObject({ status, retryable: true, retryAfterMs: undefined });
    expect((error as Error).message).toContain('upstream trouble');
  });

  it('401 fails fast, not retryable, naming the API key and quoting the provider', async () => {
    server.enqueue({
      type: 'error',
      status: 401,
      body: { error: { message: 'Incorrect API key provided: sk-test.', type: 'invalid_request_error', code: 'invalid_api_key' } },
    });
    const error = (await failure(model().generate(request()))) as ModelError;
    expect(error).toMatchObject({ status: 401, retryable: false });
    expect(error.message).toContain('Incorrect API key provided');
    expect(error.message).toMatch(/API key/);
    expect(server.requests).toHaveLength(1);
  });

  it('404 names the model and the URL; 400 and 403 quote the provider; none is retryable', async () => {
    server.enqueue(
      { type: 'error', status: 404, body: { error: { message: 'The model `nope` does not exist' } } },
      { type: 'error', status: 400, body: { error: { message: "Invalid parameter: 'tools' is too short" } } },
      { type: 'error', status: 403, body: { error: 'Project does not have access' } },
    );
    const notFound = (await failure(model().generate(request()))) as ModelError;
    expect(notFound).toMatchObject({ status: 404, retryable: false });
    expect(notFound.message).toContain('does not exist');
    expect(notFound.message).toContain(TEST_MODEL);
    expect(notFound.message).toContain(`${server.baseURL}/chat/completions`);
    const bad = (await failure(model().generate(request()))) as ModelError;
    expect(bad).toMatchObject({ status: 400, retryable: false });
    expect(bad.message).toContain("'tools' is too short");
    const denied = (await failure(model().generate(request()))) as ModelError;
    expect(denied).toMatchObject({ status: 403, retryable: false });
    expect(denied.message).toContain('Project does not have access');
  });

  it('an unreachable server is a retryable ModelError without status', async () => {
    const closed = await startChatServer();
    const baseURL = closed.baseURL;
    await closed.close();
    const error = await failure(model({ baseURL }).generate(request()));
    expect(error).toBeInstanceOf(ModelError);
    expect(error).toMatchObject({ status: undefined, retryable: true });
    expect((error as Error).message).toContain('could not reach');
    // The last sentence says what to do, whole.
    expect((error as Error).message).toMatch(/\. Check that the server is running and that the baseURL is right$/);
  });
});

describe('openAICompatibleModel: broken streams', () => {
  it('a stream that stalls fails with a retryable ReadTimeoutError after readTimeoutMs of silence', async () => {
    server.enqueue({ type: 'stall', afterBytes: 180 });
    const deltas: string[] = [];
    const started = Date.now();
    const error = await failure(model({ readTimeoutMs: 150 }).generate(request({ onTextDelta: (d) => deltas.push(d) })));
    expect(error).toBeInstanceOf(ReadTimeoutError);
    expect(error).toMatchObject({ retryable: true, name: 'ReadTimeoutError' });
    expect((error as Error).message).toMatch(/^read timeout/);
    expect(Date.now() - started).toBeLessThan(2_000);
    await expect.poll(() => server.requests[0]?.clientClosedEarly).toBe(true);
  });

  it('a server that never sends headers also times out', async () => {
    server.enqueue({ type: 'stall', afterBytes: 0 });
    const error = await failure(model({ readTimeoutMs: 100 }).generate(request()));
    expect(error).toBeInstanceOf(ReadTimeoutError);
  });

  it('a slow but steady stream outlives the read timeout (the timer measures silence, not duration)', async () => {
    server.enqueue({ type: 'reply', text: Array.from({ length: 12 }, (_, i) => `${i} `), delayMs: 40 });
    const started = Date.now();
    const reply = await model({ readTimeoutMs: 150 }).generate(request());
    expect(Date.now() - started).toBeGreaterThan(300);
    expect(reply.message.content).toBe('0 1 2 3 4 5 6 7 8 9 10 11 ');
  });

  it('a malformed chunk is a typed, non-retryable MalformedStreamError', async () => {
    server.enqueue({ type: 'malformed', afterFrames: 2 });
    const error = await failure(model().generate(request()));
    expect(error).toBeInstanceOf(MalformedStreamError);
    expect(error).toBeInstanceOf(ModelError);
    expect(error).toMatchObject({ retryable: false, name: 'MalformedStreamError', code: 'ModelError' });
    expect((error as Error).message).toMatch(/^malformed stream chunk: \{"id":"chatcmpl-bad"/);
  });

  it('a chunk that is JSON but not a chunk is malformed too', async () => {
    server.enqueue({ type: 'frames', frames: ['data: {"choices":"nope"}\n\n'] });
    expect(await failure(model().generate(request()))).toBeInstanceOf(MalformedStreamError);
  });

  it('an error object inside the stream becomes a ModelError with the provider message', async () => {
    server.enqueue({
      type: 'frames',
      frames: ['data: {"choices":[{"index":0,"delta":{"content":"par"}}]}\n\n', 'data: {"error":{"message":"The server had an error","type":"server_error"}}\n\n'],
    });
    const error = await failure(model().generate(request()));
    expect(error).toBeInstanceOf(ModelError);
    expect(error).toMatchObject({ retryable: true });
    expect((error as Error).message).toContain('The server had an error');
  });

  it('a connection cut mid-stream is retryable, as is a stream that ends before any finish_reason', async () => {
    server.enqueue({ type: 'disconnect', afterFrames: 2 });
    server.enqueue({ type: 'reply', text: ['cut'], finishReason: null, usage: null, done: false });
    const cut = await failure(model().generate(request()));
    expect(cut).toBeInstanceOf(ModelError);
    expect(cut).toMatchObject({ retryable: true });
    const early = await failure(model().generate(request()));
    expect(early).toMatchObject({ retryable: true });
    expect((early as Error).message).toContain('ended before the model finished');
  });
});

describe('openAICompatibleModel: abort', () => {
  it('an abort mid-stream stops promptly and rejects with an AbortError; the server sees the hang-up', async () => {
    server.enqueue({ type: 'reply', text: Array.from({ length: 200 }, () => 'tick '), delayMs: 20 });
    const controller = new AbortController();
    const deltas: string[] = [];
    const pending = model().generate(
      request({
        signal: controller.signal,
        onTextDelta: (d) => {
          deltas.push(d);
          if (deltas.length === 3) controller.abort();
        },
      }),
    );
    const started = Date.now();
    const error = await failure(pending);
    expect(Date.now() - started).toBeLessThan(500);
    expect(error).toMatchObject({ name: 'AbortError' });
    expect(deltas).toHaveLength(3);
    await expect.poll(() => server.requests[0]?.clientClosedEarly).toBe(true);
  });

  it('an abort while waiting for headers rejects with an AbortError too, keeping a custom reason as cause', async () => {
    server.enqueue({ type: 'stall', afterBytes: 0 });
    const controller = new AbortController();
    const pending = model().generate(request({ signal: controller.signal }));
    setTimeout(() => controller.abort(new Error('user pressed stop')), 50);
    const error = (await failure(pending)) as Error;
    expect(error.name).toBe('AbortError');
    expect((error.cause as Error).message).toBe('user pressed stop');
  });

  it('an abort from inside onTextDelta stops delivery even when one read holds many chunks', async () => {
    const frames = replyFrames({ text: ['a', 'b', 'c', 'd', 'e'] }).join('');
    const oneRead: typeof fetch = async () =>
      new Response(new TextEncoder().encode(frames), { headers: { 'content-type': 'text/event-stream' } });
    const controller = new AbortController();
    const deltas: string[] = [];
    const error = await failure(
      model({ fetch: oneRead }).generate(
        request({
          signal: controller.signal,
          onTextDelta: (d) => {
            deltas.push(d);
            if (d === 'b') controller.abort();
          },
        }),
      ),
    );
    expect(error).toMatchObject({ name: 'AbortError' });
    expect(deltas).toEqual(['a', 'b']);
  });

  it('an already-aborted signal sends nothing', async () => {
    const controller = new AbortController();
    controller.abort();
    const error = await failure(model().generate(request({ signal: controller.signal })));
    expect(error).toMatchObject({ name: 'AbortError' });
    expect(server.requests).toHaveLength(0);
  });
});

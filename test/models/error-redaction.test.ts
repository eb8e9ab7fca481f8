/**
 * A provider's key never leaves a model adapter inside the error it throws: not in the message,
 * nor anywhere in the cause chain a logger, an error reporter, `util.inspect` or `JSON.stringify`
 * walks (cause.cause, AggregateError.errors, fields such as the AI SDK's `url`, `responseBody` and
 * `data`), nor in what an agent stores and traces of it (SQLite trace rows, OpenTelemetry spans).
 * Each case fails a real call against a real HTTP server on 127.0.0.1 (or a port nothing listens
 * on), and the error keeps what the retry policy and the fallback read: class, `status`,
 * `retryable`, `retryAfterMs`, `code` down the causes.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inspect } from 'node:util';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { createOpenAICompatible as createV3 } from 'ai-sdk-openai-compatible-v2';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createAgentMachine } from '../../machines/agent.machine.js';
import { fallbackTrigger } from '../../src/agent/fallback/fallback.js';
import { runAgent } from '../../src/agent/hosts/run-agent.js';
import { ModelError, type Model, type ModelRequest } from '../../src/model.js';
import { aiSdkModel } from '../../src/models/ai-sdk.js';
import type { AiSdkLanguageModel } from '../../src/models/ai-sdk-spec.js';
import { openAICompatibleModel } from '../../src/models/openai-compatible.js';
import { redactError, redactText } from '../../src/models/redact.js';
import { isRetryable } from '../../src/models/retry.js';
import { DurableSession } from '../../src/sessions/durable-session.js';
import { SqliteSessionStore } from '../../src/stores/sqlite.js';
import { memoryTracing } from '../agent/tracing/support.js';
import { failure } from './support.js';

/** A key of no known shape: only an adapter that knows it (its `apiKey`) can find it in a body. */
const KEY = 'Zq7vR2mN9xK4pL8wT3yB';
/** An OpenAI-shaped key, for the AI SDK bridge, which is never told the key its provider sends. */
const SK_KEY = 'sk-proj-Zq7vR2mN9xK4pL8wT3yB6cD0';

type Behaviour =
  /** 401 whose JSON body quotes the key it was sent (bearer) and the request's path and query. */
  | 'echo401'
  /** A proxy's 502 in plain text that repeats the request line and its Authorization header. */
  | 'proxyEcho'
  /** Destroys the socket before any response byte (fetch: "other side closed"). */
  | 'hangUp'
  /** One good SSE frame, then the socket is destroyed mid-stream. */
  | 'cutMidStream'
  /** 429 with `retry-after: 2` whose body names the key that is over its quota. */
  | 'rateLimited'
  /** 400 for a prompt over the window, the key quoted beside it. */
  | 'tooLong';

let behaviour: Behaviour = 'echo401';
let server: Server;
let live: string;
/** A base URL on a port nothing listens on: connection refused. */
let refused: string;

function answer(req: IncomingMessage, res: ServerResponse): void {
  const bearer = (req.headers.authorization ?? '').replace(/^Bearer /, '');
  switch (behaviour) {
    case 'echo401':
      res.writeHead(401, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: `Incorrect API key provided: ${bearer}. (${req.url})`, type: 'invalid_request_error', code: 'invalid_api_key' } }));
      return;
    case 'proxyEcho':
      res.writeHead(502, { 'content-type': 'text/plain' });
      res.end(`upstream failed for ${req.method} ${req.url}\nAuthorization: ${req.headers.authorization ?? ''}\n`);
      return;
    case 'hangUp':
      req.socket.destroy();
      return;
    case 'rateLimited':
      res.writeHead(429, { 'content-type': 'application/json', 'retry-after': '2' });
      res.end(JSON.stringify({ error: { message: `Rate limit reached for key ${bearer}`, type: 'rate_limit_exceeded' } }));
      return;
    case 'tooLong':
      res.writeHead(400, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: `This model's maximum context length is 8192 tokens (key ${bearer})`, code: 'context_length_exceeded' } }));
      return;
    case 'cutMidStream':
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(`data: ${JSON.stringify({ id: 'c1', choices: [{ index: 0, delta: { role: 'assistant', content: 'Hel' } }] })}\n\n`);
      setTimeout(() => req.socket.destroy(), 20);
      return;
  }
}

beforeAll(async () => {
  server = createServer((req, res) => {
    req.resume();
    req.on('end', () => answer(req, res));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  live = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  const closed = createServer();
  await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
  refused = `http://127.0.0.1:${(closed.address() as AddressInfo).port}/v1`;
  await new Promise<void>((resolve) => closed.close(() => resolve()));
});

afterEach(() => {
  behaviour = 'echo401';
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

function request(): ModelRequest {
  return { messages: [{ role: 'user', content: 'hi' }], tools: [], signal: new AbortController().signal, idempotencyKey: 'run-1:turn-1' };
}

/**
 * Every place `secret` can be read from `error`: any own property (enumerable or not, symbol
 * keys, getters) of the error and of everything it holds, as deep as it goes, plus what
 * `JSON.stringify` of each error in the chain, `util.inspect` and `String` print.
 */
function leaks(error: unknown, secret: string): string[] {
  const found: string[] = [];
  const seen = new Set<unknown>();
  const errors: unknown[] = [];
  const walk = (value: unknown, path: string) => {
    if (typeof value === 'string') {
      if (value.includes(secret)) found.push(path);
      return;
    }
    if (value === null || typeof value !== 'object' || seen.has(value)) return;
    seen.add(value);
    if (value instanceof Error) errors.push(value);
    if (value instanceof URL) return walk(value.href, path);
    for (const key of Reflect.ownKeys(value)) {
      let inner: unknown;
      try {
        inner = (value as Record<PropertyKey, unknown>)[key];
      } catch {
        continue;
      }
      walk(inner, `${path}.${String(key)}`);
    }
  };
  walk(error, 'error');
  errors.forEach((each, i) => {
    if ((JSON.stringify(each) ?? '').includes(secret)) found.push(`JSON.stringify(error chain[${i}])`);
  });
  if (inspect(error, { depth: Infinity, showHidden: true }).includes(secret)) found.push('util.inspect');
  if (String(error).includes(secret)) found.push('String(error)');
  return found;
}

/** The causes under `error`, outermost first. */
function causes(error: unknown): unknown[] {
  const out: unknown[] = [];
  for (let at = (error as { cause?: unknown }).cause; at !== undefined && out.length < 10; at = (at as { cause?: unknown }).cause) out.push(at);
  return out;
}

const codes = (error: unknown) => causes(error).map((cause) => (cause as { code?: unknown }).code).filter((code) => code !== undefined);
const isAiSdkError = (value: unknown, name: string) => (value as Record<symbol, unknown>)[Symbol.for(`vercel.ai.error.${name}`)] === true;

/** A fetch that puts the key in the query string, as Google's API takes it, and words a failure as node-fetch does. */
function keyInQueryFetch(key: string): typeof fetch {
  return async (input, init) => {
    const url = new URL(String(input));
    url.searchParams.set('key', key);
    try {
      return await fetch(url, init);
    } catch (error) {
      throw new TypeError(`request to ${url.href} failed, reason: ${(error as Error).message}`, { cause: error });
    }
  };
}

describe('openAICompatibleModel: no key in what it throws', () => {
  it('connection refused, the URL carrying ?key=: message, stack and inspect are clean; retryable, ECONNREFUSED kept', async () => {
    const error = await failure(openAICompatibleModel({ baseURL: refused, model: 'm', fetch: keyInQueryFetch(KEY) }).generate(request()));
    expect(leaks(error, KEY)).toEqual([]);
    expect(error).toBeInstanceOf(ModelError);
    expect((error as ModelError).retryable).toBe(true);
    expect(isRetryable(error)).toBe(true);
    expect((error as Error).message).toContain('key=***');
    const [wrapper] = causes(error);
    expect(wrapper).toBeInstanceOf(TypeError);
    expect((wrapper as Error).message).toContain(`${refused}/chat/completions?key=***`);
    expect(codes(error)).toContain('ECONNREFUSED');
    expect(fallbackTrigger(error)).toBe('server-error');
  });

  it('a baseURL with ?key= in it: the message that quotes the URL does not quote the key', async () => {
    const error = await failure(openAICompatibleModel({ baseURL: `${refused}?key=${KEY}`, model: 'm' }).generate(request()));
    expect(leaks(error, KEY)).toEqual([]);
    expect((error as ModelError).retryable).toBe(true);
    expect(codes(error)).toContain('ECONNREFUSED');
  });

  it('a 401 whose body echoes the apiKey: the provider words stay, the key does not; 401, not retryable', async () => {
    const error = await failure(openAICompatibleModel({ baseURL: live, model: 'm', apiKey: KEY }).generate(request()));
    expect(leaks(error, KEY)).toEqual([]);
    expect(error).toMatchObject({ name: 'ModelError', status: 401, retryable: false });
    expect((error as Error).message).toContain('Incorrect API key provided: ***');
  });

  it('a key in a custom Authorization header echoed by a proxy 502: redacted, still retryable with its status', async () => {
    behaviour = 'proxyEcho';
    const error = await failure(openAICompatibleModel({ baseURL: live, model: 'm', headers: { Authorization: `Bearer ${KEY}` } }).generate(request()));
    expect(leaks(error, KEY)).toEqual([]);
    expect(error).toMatchObject({ status: 502, retryable: true });
    expect((error as Error).message).toContain('upstream failed for POST /v1/chat/completions');
  });

  it('a socket hang-up and a cut mid-stream, the key in the query: clean, retryable, UND_ERR_SOCKET kept', async () => {
    for (const cut of ['hangUp', 'cutMidStream'] as const) {
      behaviour = cut;
      const error = await failure(openAICompatibleModel({ baseURL: live, model: 'm', fetch: keyInQueryFetch(KEY) }).generate(request()));
      expect(leaks(error, KEY), cut).toEqual([]);
      expect((error as ModelError).retryable, cut).toBe(true);
      expect(codes(error), cut).toContain('UND_ERR_SOCKET');
    }
  });

  it('what the retry policy and the fallback read survives: a 429 keeps retryAfterMs, a 400 over the window its context-length words', async () => {
    behaviour = 'rateLimited';
    const limited = await failure(openAICompatibleModel({ baseURL: live, model: 'm', apiKey: KEY }).generate(request()));
    expect(leaks(limited, KEY)).toEqual([]);
    expect(limited).toMatchObject({ status: 429, retryable: true, retryAfterMs: 2000 });
    expect(fallbackTrigger(limited)).toBe('rate-limit');
    behaviour = 'tooLong';
    const tooLong = await failure(openAICompatibleModel({ baseURL: live, model: 'm', apiKey: KEY }).generate(request()));
    expect(leaks(tooLong, KEY)).toEqual([]);
    expect(tooLong).toMatchObject({ status: 400, retryable: false });
    expect(fallbackTrigger(tooLong)).toBe('context-length');
  });

  it('an AggregateError from a fetch that tried two mirrors: each of its errors is redacted', async () => {
    const mirrors: typeof fetch = async (input, init) => {
      const failures: Error[] = [];
      for (const base of [refused, refused.replace('127.0.0.1', 'localhost')]) {
        const url = `${String(input).replace(refused, base)}?key=${KEY}`;
        try {
          return await fetch(url, init);
        } catch (error) {
          failures.push(new Error(`${url}: ${(error as Error).message}`, { cause: error }));
        }
      }
      throw new AggregateError(failures, 'every mirror failed');
    };
    const error = await failure(openAICompatibleModel({ baseURL: refused, model: 'm', fetch: mirrors }).generate(request()));
    expect(leaks(error, KEY)).toEqual([]);
    const aggregate = causes(error)[0];
    expect(aggregate).toBeInstanceOf(AggregateError);
    expect((aggregate as AggregateError).errors).toHaveLength(2);
    expect(codes((aggregate as AggregateError).errors[0])).toContain('ECONNREFUSED');
  });
});

/** The provider settings these cases set, the same in both majors. */
interface Settings {
  name: string;
  baseURL: string;
  apiKey?: string;
  queryParams?: Record<string, string>;
}

const SDK_MAJORS: [string, (settings: Settings) => AiSdkLanguageModel][] = [
  ['V2 (AI SDK 5)', (settings) => createOpenAICompatible(settings).chatModel('m')],
  ['V3 (AI SDK 6)', (settings) => createV3(settings).chatModel('m') as unknown as AiSdkLanguageModel],
];

describe.each(SDK_MAJORS)('aiSdkModel over @ai-sdk/openai-compatible %s: no key in what it throws', (_, make) => {
  it('connection refused, the provider sending ?key=: APICallError.url and its JSON are redacted; retryable, ECONNREFUSED kept', async () => {
    const error = await failure(aiSdkModel(make({ name: 'p', baseURL: refused, queryParams: { key: KEY } })).generate(request()));
    expect(leaks(error, KEY)).toEqual([]);
    expect((error as ModelError).retryable).toBe(true);
    const [apiCallError] = causes(error);
    expect(isAiSdkError(apiCallError, 'AI_APICallError')).toBe(true);
    expect((apiCallError as { url: string }).url).toBe(`${refused}/chat/completions?key=***`);
    expect((apiCallError as { isRetryable: boolean }).isRetryable).toBe(true);
    expect(codes(error)).toContain('ECONNREFUSED');
    expect(fallbackTrigger(error)).toBe('server-error');
  });

  it('a 401 echoing an sk- key: message, responseBody and data are redacted; 401, not retryable', async () => {
    const error = await failure(aiSdkModel(make({ name: 'p', baseURL: live, apiKey: SK_KEY })).generate(request()));
    expect(leaks(error, SK_KEY)).toEqual([]);
    expect(error).toMatchObject({ status: 401, retryable: false });
    const [apiCallError] = causes(error);
    expect(apiCallError).toMatchObject({ statusCode: 401, isRetryable: false });
    expect((apiCallError as { responseBody: string }).responseBody).toContain('Incorrect API key provided: ***');
  });

  it('a 401 echoing a key of no known shape: found only when the key is given as a secret', async () => {
    const unknown = await failure(aiSdkModel(make({ name: 'p', baseURL: live, apiKey: KEY })).generate(request()));
    expect(leaks(unknown, KEY)).not.toEqual([]);
    const told = await failure(aiSdkModel(make({ name: 'p', baseURL: live, apiKey: KEY }), { secrets: [KEY] }).generate(request()));
    expect(leaks(told, KEY)).toEqual([]);
    expect(told).toMatchObject({ status: 401, retryable: false });
    expect(String((told as Error).message)).toContain('Incorrect API key provided: ***');
  });

  it('secrets must be a list of strings (undefined entries, an unset variable, are left out)', () => {
    expect(() => aiSdkModel(make({ name: 'p', baseURL: live }), { secrets: 'sk-x' as never })).toThrow(/secrets must be a list of strings/);
    expect(() => aiSdkModel(make({ name: 'p', baseURL: live }), { secrets: [42 as never] })).toThrow(/secrets must be a list of strings/);
    expect(() => aiSdkModel(make({ name: 'p', baseURL: live }), { secrets: [undefined] })).not.toThrow();
  });

  it('a 429 echoing the key keeps retryAfterMs and the fallback trigger', async () => {
    behaviour = 'rateLimited';
    const error = await failure(aiSdkModel(make({ name: 'p', baseURL: live, apiKey: SK_KEY })).generate(request()));
    expect(leaks(error, SK_KEY)).toEqual([]);
    expect(error).toMatchObject({ status: 429, retryable: true, retryAfterMs: 2000 });
    expect(fallbackTrigger(error)).toBe('rate-limit');
    expect((causes(error)[0] as { responseHeaders: Record<string, string> }).responseHeaders['retry-after']).toBe('2');
  });

  it('a proxy 502 echoing the Authorization header of a key of any shape: redacted, retryable 502', async () => {
    behaviour = 'proxyEcho';
    const error = await failure(aiSdkModel(make({ name: 'p', baseURL: live, apiKey: KEY })).generate(request()));
    expect(leaks(error, KEY)).toEqual([]);
    expect(error).toMatchObject({ status: 502, retryable: true });
  });

  it('a socket hang-up and a cut mid-stream with ?key=: clean and retryable', async () => {
    for (const cut of ['hangUp', 'cutMidStream'] as const) {
      behaviour = cut;
      const error = await failure(aiSdkModel(make({ name: 'p', baseURL: live, queryParams: { key: KEY } })).generate(request()));
      expect(leaks(error, KEY), cut).toEqual([]);
      expect((error as ModelError).retryable, cut).toBe(true);
    }
  });
});

describe('where an agent puts a model error', () => {
  const cases: [string, () => Model, Behaviour][] = [
    ['openAICompatibleModel, a proxy echoing the key', () => openAICompatibleModel({ baseURL: live, model: 'm', apiKey: KEY }), 'proxyEcho'],
    ['openAICompatibleModel, refused on a baseURL with ?key=', () => openAICompatibleModel({ baseURL: `${refused}?key=${KEY}`, model: 'm' }), 'echo401'],
    ['aiSdkModel, refused with ?key=', () => aiSdkModel(createOpenAICompatible({ name: 'p', baseURL: refused, queryParams: { key: KEY } }).chatModel('m')), 'echo401'],
    ['aiSdkModel, a proxy echoing the key', () => aiSdkModel(createOpenAICompatible({ name: 'p', baseURL: live, apiKey: KEY }).chatModel('m')), 'proxyEcho'],
  ];

  it.each(cases)('%s: not in the SQLite store (trace rows, file), the spans, nor runAgent’s error', async (_, model, failing) => {
    behaviour = failing;
    const dir = mkdtempSync(join(tmpdir(), 'loopchart-redaction-'));
    try {
      const tracing = memoryTracing();
      const retry = { maxRetries: 1, baseDelayMs: 0, maxDelayMs: 0 };
      const machine = createAgentMachine({ model: model(), retry, telemetry: { tracer: tracing.tracer } });
      const store = new SqliteSessionStore({ path: join(dir, 'sessions.db') });
      const session = await DurableSession.open({ machine, store, sessionId: 'leak-1' });
      session.send({ type: 'input', message: 'hi' });
      await session.whenIdle();
      await session.flush();
      expect(session.actor.getSnapshot().context.brain.context.outcome?.type).toBe('Failed');
      await session.close();
      const trace = (await store.readTrace?.('leak-1')) ?? [];
      expect(trace.some((record) => (record.entry as { type?: string }).type === 'retry')).toBe(true);
      expect(JSON.stringify(trace)).not.toContain(KEY);
      await store.close();
      for (const file of readdirSync(dir)) expect(readFileSync(join(dir, file)).toString('latin1'), file).not.toContain(KEY);
      const spans = tracing.spans();
      expect(spans.some((span) => span.status.code === 2)).toBe(true);
      expect(JSON.stringify(spans.map((span) => ({ attributes: span.attributes, events: span.events, status: span.status })))).not.toContain(KEY);

      const { outcome, error } = await runAgent({ model: model(), prompt: 'hi', retry });
      expect(outcome.type).toBe('Failed');
      expect(leaks(error, KEY)).toEqual([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('redactError and redactText', () => {
  it('redact URL user info, credential query parameters, authorization headers, bearer tokens and known key shapes; leave the rest', () => {
    const text = [
      'GET https://u:p4ss@h.example/v1?api-version=2024-10&key=abc123&X-Amz-Signature=f00d#x',
      'Authorization: Bearer abcdef123456',
      '{"x-api-key":"k-123456789","max_tokens":100,"Set-Cookie":"sid=s3cr3t"}',
      'sent Bearer eyJhbGciOi.J9.x and AIzaSyA1234567890abcdefghijklmnopqrstu and sk-ant-api03-abcdefghijklmnop',
      'Basic authentication required; sk-test is a test key',
    ].join('\n');
    expect(redactText(text)).toBe(
      [
        'GET https://***@h.example/v1?api-version=2024-10&key=***&X-Amz-Signature=***#x',
        'Authorization: ***',
        '{"x-api-key":"***","max_tokens":100,"Set-Cookie":"***"}',
        'sent Bearer *** and *** and ***',
        'Basic authentication required; sk-test is a test key',
      ].join('\n'),
    );
    expect(redactText(`key ${KEY} and ${encodeURIComponent('a+b/c=d=secret')}`, [KEY, 'a+b/c=d=secret'])).toBe('key *** and ***');
    expect(redactText('short keys are never searched for: ollama', ['ollama'])).toBe('short keys are never searched for: ollama');
  });

  it('copies an error chain with its classes, codes, flags and cycles, and leaves the original as it was', () => {
    const socket = Object.assign(new Error(`connect ECONNREFUSED for ?token=${KEY}`), { code: 'ECONNREFUSED', errno: -111 });
    const fetchFailed = new TypeError('fetch failed', { cause: socket });
    const aggregate = new AggregateError([fetchFailed, 'plain ?key=' + KEY], `all failed at https://h/?key=${KEY}`);
    const top = new ModelError('could not reach the provider', { status: 503, retryable: true, retryAfterMs: 10, cause: aggregate });
    (socket as Error & { loop?: unknown }).loop = top;
    const copy = redactError(top) as ModelError;
    expect(leaks(copy, KEY)).toEqual([]);
    expect(copy).not.toBe(top);
    expect(copy).toBeInstanceOf(ModelError);
    expect(ModelError.isInstance(copy)).toBe(true);
    expect(copy).toMatchObject({ name: 'ModelError', code: 'ModelError', status: 503, retryable: true, retryAfterMs: 10 });
    const [aggregateCopy] = causes(copy) as [AggregateError];
    expect(aggregateCopy).toBeInstanceOf(AggregateError);
    const [fetchCopy, plain] = aggregateCopy.errors as [TypeError, string];
    expect(fetchCopy).toBeInstanceOf(TypeError);
    expect(fetchCopy.message).toBe('fetch failed');
    expect(isRetryable(fetchCopy)).toBe(true);
    expect(plain).toBe('plain ?key=***');
    const socketCopy = fetchCopy.cause as Error & { code: string; errno: number; loop: unknown };
    expect(socketCopy).toMatchObject({ code: 'ECONNREFUSED', errno: -111, message: 'connect ECONNREFUSED for ?token=***' });
    expect(socketCopy.loop).toBe(copy);
    // The original is untouched: the provider (or a test) may hold it.
    expect(top.cause).toBe(aggregate);
    expect(socket.message).toContain(KEY);
    // An abort passes through as it is: a caller compares it with its own reason.
    const abort = new DOMException('stop', 'AbortError');
    expect(redactError(abort)).toBe(abort);
    // Another DOMException, whose name and code are getters that refuse any other object, is copied readable.
    const timeout = redactError(new DOMException(`timed out at https://h/?key=${KEY}`, 'TimeoutError')) as DOMException;
    expect(timeout).toBeInstanceOf(DOMException);
    expect(timeout).toMatchObject({ name: 'TimeoutError', code: 23, message: 'timed out at https://h/?key=***' });
    expect(inspect(timeout)).toContain('TimeoutError');
  });

  it('reads long bodies in linear time (200 kB of base64url, of dashes, of `name:` pairs)', () => {
    let seed = 1;
    const next = () => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31);
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    const bodies = [
      Array.from({ length: 200_000 }, () => alphabet[next() % alphabet.length]).join(''),
      'a-'.repeat(100_000),
      'x-y:'.repeat(50_000),
      '?a=b&'.repeat(40_000),
      `http://${'a'.repeat(200_000)}`,
    ];
    const started = performance.now();
    for (const body of bodies) redactText(body, [KEY]);
    // Linear: a few ms each. The first version took 6 s for a tenth of the first body.
    expect(performance.now() - started).toBeLessThan(1000);
  });
});

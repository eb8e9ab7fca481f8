import type { Model, ModelReply, ModelRequest } from '../model.js';
import { ModelError, RESPONSE_FORMAT_VERSION } from '../model.js';
import { CallGuard, DEFAULT_MODEL_DEADLINE_MS, timeoutOption } from './call-guard.js';
import { ChatChunkAssembler, preview } from './chat-chunks.js';
import { MalformedStreamError } from './errors.js';
import { describeError, httpModelError, parseRetryAfter, providerMessage, redactUrlCredentials } from './http-status.js';
import { apiKeyOption, checkHeaderValues, CONTROL_CHARACTER, controlCharacterAt } from './credentials.js';
import { headerSecrets, redactError } from './redact.js';
import { toWireMessages, toWireResponseFormat, toWireTools } from './openai-wire.js';
import { SseParser, type SseEvent } from './sse.js';
import { checkKnownKeys, optionKeys } from '../known-keys.js';
import { InvalidConfigError } from '../errors.js';
import { isPlainObject } from '../json-value.js';

export interface OpenAICompatibleOptions {
  /**
   * e.g. https://api.openai.com/v1, http://localhost:11434/v1 (Ollama), http://localhost:8000/v1 (vLLM):
   * an http(s) URL, without credentials or a #fragment (refused when the model is made). A query
   * (`?api-version=…`) stays after the path: calls go to `<path>/chat/completions?<query>`.
   */
  baseURL: string;
  /**
   * Sent as `Authorization: Bearer …`; local servers usually need none (`''` sends none, as
   * leaving it out does). Whitespace around the key is dropped; one that is only whitespace or
   * holds a control character is refused when the model is made.
   */
  apiKey?: string | undefined;
  /**
   * The model id the server knows (`gpt-4o`, `org/model:tag`, `llama3.1:8b`), sent as it is.
   * Empty, whitespace-only or holding a control character (a newline, a tab) is refused when the
   * model is made.
   */
  model: string;
  /**
   * Extra headers on every request (e.g. OpenRouter's HTTP-Referer): a plain object (not a Headers
   * or a Map). One named like a credential (`authorization`, `x-api-key`) that is only whitespace
   * or a scheme alone (`Bearer `), or any value fetch would refuse, is refused when the model is made.
   */
  headers?: Record<string, string> | undefined;
  /**
   * Longest silence tolerated between bytes (and before the response headers). Default 60 000 ms;
   * `Infinity` turns it off, 0 or a negative value is refused.
   */
  readTimeoutMs?: number | undefined;
  /**
   * Longest a whole call may take, stream included, default 600 000 ms (10 minutes); `Infinity`
   * turns it off. Past it the call fails with ModelDeadlineError (not retryable), even while data
   * keeps arriving: endless keep-alive comments or endless text would otherwise hold it open.
   */
  deadlineMs?: number | undefined;
  /**
   * Most bytes one response may carry once decompressed, default 268 435 456 (256 MiB): a
   * 128K-token reply streamed one token per chunk is about 30 MB. Past it the call fails with
   * MalformedStreamError, so a hostile or broken server (say 1 MB of gzip that unpacks to 1 GiB)
   * cannot fill memory. Each SSE line and event has its own limit too (MAX_SSE_LINE_LENGTH,
   * MAX_SSE_EVENT_LENGTH).
   */
  maxResponseBytes?: number | undefined;
  /** Replaces the global fetch (tests, proxies, instrumentation). */
  fetch?: typeof globalThis.fetch | undefined;
  /**
   * Whether the server takes `response_format: { type: 'json_schema', ... }` (OpenAI, vLLM,
   * Ollama, llama.cpp do): an agent with an output schema then asks for its answer that way.
   * Default true; false makes the agent use a `final_answer` tool instead.
   */
  structuredOutputs?: boolean | undefined;
}

const OPTION_KEYS = optionKeys<OpenAICompatibleOptions>()({
  baseURL: true,
  apiKey: true,
  model: true,
  headers: true,
  readTimeoutMs: true,
  deadlineMs: true,
  maxResponseBytes: true,
  fetch: true,
  structuredOutputs: true,
});

const DEFAULT_READ_TIMEOUT_MS = 60_000;
const DEFAULT_MAX_RESPONSE_BYTES = 256 * 1024 * 1024;
/** An error body is read for its message only; beyond this it is not worth holding. */
const MAX_ERROR_BODY_BYTES = 64 * 1024;

/**
 * After the finish reason, how long to wait for the trailing usage chunk and `[DONE]`: a server
 * that never sends `[DONE]` nor closes would otherwise hold a complete reply until the read
 * timeout, which then discards it. Under a read timeout of 2 s the grace is half of it, so it
 * always ends before the read timeout fires.
 */
const FINISH_GRACE_MS = 1000;

/**
 * A Model that speaks the Chat Completions streaming API with no dependency beyond `fetch`.
 * It never retries: it reports `status` / `retryable` / `retryAfterMs` and the retry wrapper decides.
 * A `baseURL` with credentials in it (`https://user:key@host/v1`) is refused with InvalidConfigError:
 * fetch cannot send them, and an error quoting the URL would leak them. Pass them as `apiKey` or
 * `headers` (e.g. `authorization: 'Basic …'`). What a failed call throws, its whole cause chain
 * included, has the API key, credential headers and other credentials redacted (`redactError`).
 * A stream that sent its finish reason but neither
 * `[DONE]` nor its end is returned after a grace of at most 1 s for the trailing usage chunk.
 *
 * @example
 * ```ts
 * const model = openAICompatibleModel({ baseURL: 'http://localhost:11434/v1', model: 'llama3.2' });
 * const agent = createAgentMachine({ model, tools: [calculatorTool()] });
 * ```
 */
export function openAICompatibleModel(options: OpenAICompatibleOptions): Model {
  checkKnownKeys(options, OPTION_KEYS, 'openAICompatibleModel');
  for (const key of ['baseURL', 'model'] as const) {
    if (typeof options?.[key] !== 'string' || options[key] === '') throw new InvalidConfigError(`openAICompatibleModel: ${key} must be a non-empty string`);
  }
  checkModelId(options.model);
  const url = chatCompletionsUrl(options.baseURL);
  const readTimeoutMs = timeoutOption('readTimeoutMs', options.readTimeoutMs, DEFAULT_READ_TIMEOUT_MS);
  const deadlineMs = timeoutOption('deadlineMs', options.deadlineMs, DEFAULT_MODEL_DEADLINE_MS);
  const finishGraceMs = Math.min(FINISH_GRACE_MS, readTimeoutMs / 2);
  const maxResponseBytes = options.maxResponseBytes === undefined ? DEFAULT_MAX_RESPONSE_BYTES : options.maxResponseBytes;
  if (!Number.isInteger(maxResponseBytes) || maxResponseBytes <= 0) {
    throw new InvalidConfigError(`openAICompatibleModel: maxResponseBytes must be a positive integer, got ${String(maxResponseBytes)}`);
  }
  optionTypes(options);
  const apiKey = apiKeyOption(options.apiKey);
  checkHeaderValues(options.headers ?? {});
  const doFetch = options.fetch ?? globalThis.fetch;
  const baseHeaders: Record<string, string> = {
    'content-type': 'application/json',
    accept: 'text/event-stream',
    ...(apiKey !== undefined && { authorization: `Bearer ${apiKey}` }),
    // Lower-cased so a user's `Authorization` replaces ours instead of being joined to it by fetch.
    ...Object.fromEntries(Object.entries(options.headers ?? {}).map(([k, v]) => [k.toLowerCase(), v])),
  };
  // Headers fetch would refuse (a newline in a value, a space in a name) failed every call; named here without their values (credentials).
  try {
    new Headers(baseHeaders);
  } catch {
    throw new InvalidConfigError(`openAICompatibleModel: headers (or apiKey) hold a name or value HTTP does not allow: ${Object.keys(baseHeaders).join(', ')}`);
  }
  // What this model sends as credentials: no error it throws may carry them (see redactError).
  const secrets = [...(apiKey !== undefined ? [apiKey] : []), ...headerSecrets(baseHeaders)];

  const structuredOutputs = options.structuredOutputs ?? true;
  return {
    name: `openai-compatible:${options.model}`,
    ...(structuredOutputs && { supports: { responseFormat: RESPONSE_FORMAT_VERSION } }),
    async generate(request: ModelRequest): Promise<ModelReply> {
      const guard = new CallGuard(request.signal, readTimeoutMs, deadlineMs);
      try {
        guard.throwIfStopped();
        const body = JSON.stringify({
          model: options.model,
          messages: toWireMessages(request.messages),
          // An empty `tools` array is rejected by OpenAI ("[] is too short"): omit it instead.
          ...(request.tools.length > 0 ? { tools: toWireTools(request.tools) } : {}),
          ...(request.responseFormat && structuredOutputs && { response_format: toWireResponseFormat(request.responseFormat) }),
          stream: true,
          stream_options: { include_usage: true },
        });
        let response: Response;
        try {
          response = await doFetch(url, {
            method: 'POST',
            headers: { ...baseHeaders, 'idempotency-key': request.idempotencyKey },
            body,
            signal: guard.signal,
          });
        } catch (error) {
          throw guard.stopReason() ?? new ModelError(redactUrlCredentials(`could not reach ${url}: ${describeError(error)}. Check that the server is running and that the baseURL is right`), { retryable: true, cause: error });
        }
        guard.touch();
        if (!response.ok) throw await failedResponse(response, guard, options.model, url);

        const assembler = new ChatChunkAssembler({
          onTextDelta: request.onTextDelta,
          fallbackIdPrefix: `call_${request.idempotencyKey}`,
        });
        const contentType = response.headers.get('content-type') ?? '';
        // A server that ignores `stream: true` answers with one JSON completion; accept it.
        if (contentType.includes('application/json')) {
          assembler.push(parseChunk(await readText(response, guard, maxResponseBytes)));
          return assembler.reply();
        }
        await readStream(response, guard, assembler, { maxBytes: maxResponseBytes, finishGraceMs });
        return assembler.reply();
      } catch (error) {
        // The one way out for a failure: fetch's errors, a provider's body and the URL may all quote a credential.
        throw redactError(error, secrets);
      } finally {
        guard.dispose();
      }
    },
  };
}

async function readStream(response: Response, guard: CallGuard, assembler: ChatChunkAssembler, limits: StreamLimits): Promise<void> {
  if (response.body === null) throw new ModelError('the provider sent an empty response body', { retryable: true });
  const reader = response.body.getReader();
  const head = new BodyHead(MAX_ERROR_BODY_BYTES);
  let sawDone = false;
  let sawEvent = false;
  let received = 0;
  const parser = new SseParser((event: SseEvent) => {
    // One network read can hold many events: once the caller aborts (even from inside
    // onTextDelta) no further delta may be delivered.
    if (guard.signal.aborted) guard.throwIfStopped();
    sawEvent = true;
    if (sawDone) return;
    if (event.data === '[DONE]') {
      sawDone = true;
      return;
    }
    if (event.type === 'error') throw errorEvent(event.data);
    assembler.push(parseChunk(event.data));
  });
  let graceEndsAt: number | undefined;
  let finishedReading = false;
  try {
    while (!sawDone) {
      const result = await readChunk(reader, guard, graceEndsAt);
      // The grace after the finish reason is over: the reply is complete without [DONE].
      if (result === undefined) break;
      if (result.done) {
        finishedReading = true;
        parser.end();
        break;
      }
      guard.touch();
      received += result.value.byteLength;
      if (received > limits.maxBytes) throw tooLarge(limits.maxBytes);
      if (!sawEvent) head.keep(result.value);
      parser.push(result.value);
      // On the monotonic clock: a wall clock stepped back must not stretch the grace by as much.
      if (graceEndsAt === undefined && assembler.finished) graceEndsAt = performance.now() + limits.finishGraceMs;
    }
  } finally {
    // After [DONE], the grace or an error there may be bytes left: cancel so the socket is released now.
    if (!finishedReading) reader.cancel().catch(() => {});
  }
  // No SSE event at all: the body may be one JSON object, typically an error the provider sent
  // with the stream's content type. Read like a non-streamed body, so it is classified the same.
  const json = sawEvent ? undefined : head.jsonText();
  if (json !== undefined) assembler.push(parseChunk(json));
  if (assembler.finished) return;
  // Without [DONE] the reply still counts when a finish reason arrived (some servers omit [DONE]);
  // otherwise the connection was cut and another attempt may succeed.
  if (!sawDone) throw new ModelError('the stream ended before the model finished (no finish_reason, no [DONE])', { retryable: true });
  // [DONE] after nothing but usage (or nothing at all) is an empty answer, not a reply with no text.
  if (!assembler.hasChoice) throw new ModelError('the stream carried [DONE] but no reply (no choice, no finish_reason)', { retryable: true });
}

interface StreamLimits {
  maxBytes: number;
  /** How long to wait for [DONE] once the finish reason arrived (see FINISH_GRACE_MS). */
  finishGraceMs: number;
}

/**
 * The next piece of the body. Once a finish reason arrived (`graceEndsAt` set) it is undefined
 * when nothing came in time, and a dropped connection ends the stream instead of failing it:
 * the reply is already complete.
 */
async function readChunk(
  reader: ReadableStreamDefaultReader<Uint8Array>,
  guard: CallGuard,
  graceEndsAt: number | undefined,
): Promise<Awaited<ReturnType<ReadableStreamDefaultReader<Uint8Array>['read']>> | undefined> {
  try {
    return graceEndsAt === undefined ? await reader.read() : await within(reader.read(), graceEndsAt - performance.now());
  } catch (error) {
    const stopped = guard.stopReason();
    if (stopped) throw stopped;
    if (graceEndsAt !== undefined) return undefined;
    throw new ModelError(`the connection was lost mid-stream: ${describeError(error)}`, { retryable: true, cause: error });
  }
}

/** `promise`'s result, or undefined when `ms` pass first. */
function within<T>(promise: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<undefined>((resolve) => {
    timer = setTimeout(resolve, Math.max(0, ms), undefined);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

/**
 * The start of a streamed body, kept until its first SSE event: a server may answer a stream
 * request with one JSON object (a quota error, say) under `text/event-stream`, which the SSE
 * parser drops as a line with no known field. Past `maxBytes` it is no such answer and is let go.
 */
class BodyHead {
  private readonly decoder = new TextDecoder();
  private text: string | undefined = '';
  private bytes = 0;
  private readonly maxBytes: number;

  constructor(maxBytes: number) {
    this.maxBytes = maxBytes;
  }

  keep(chunk: Uint8Array): void {
    if (this.text === undefined) return;
    this.bytes += chunk.byteLength;
    this.text = this.bytes > this.maxBytes ? undefined : this.text + this.decoder.decode(chunk, { stream: true });
  }

  /** The body, when it looks like one JSON object. */
  jsonText(): string | undefined {
    const text = this.text === undefined ? undefined : (this.text + this.decoder.decode()).trim();
    return text?.startsWith('{') ? text : undefined;
  }
}

/**
 * The options' types, checked when the model is made: a wrong one (apiKey 5, headers 'x', fetch
 * 'x', structuredOutputs 'yes') was accepted and failed, or was quietly misread, at every call.
 */
function optionTypes(options: OpenAICompatibleOptions): void {
  const problem = (key: string, what: string) => new InvalidConfigError(`openAICompatibleModel: ${key} must be ${what}`);
  const { apiKey, headers, fetch, structuredOutputs }: Record<string, unknown> = { ...options };
  if (apiKey !== undefined && typeof apiKey !== 'string') throw problem('apiKey', 'a string');
  // A plain object only: a Headers or a Map has no own entries, so its headers were silently not sent.
  if (headers !== undefined && (!isPlainObject(headers) || Object.values(headers).some((v) => typeof v !== 'string'))) {
    throw problem('headers', 'an object of string values');
  }
  if (fetch !== undefined && typeof fetch !== 'function') throw problem('fetch', 'a function');
  if (structuredOutputs !== undefined && typeof structuredOutputs !== 'boolean') throw problem('structuredOutputs', 'a boolean');
}

/**
 * The model id, checked when the model is made: one that is only whitespace or holds a control
 * character (a newline from a file or an env var read whole, a tab) can name no model, and
 * every call was sent with it and failed at the server. Any other text is left to the server:
 * ids take many forms (`gpt-4o`, `org/model:tag`, `llama3.1:8b`).
 */
function checkModelId(model: string): void {
  if (model.trim() === '') throw new InvalidConfigError('openAICompatibleModel: model must name a model, got only whitespace');
  // Named by code point, not quoted: the id may be long.
  const control = controlCharacterAt(model, CONTROL_CHARACTER);
  if (control) throw new InvalidConfigError(`openAICompatibleModel: model must not contain control characters (a newline, a tab), got ${control}`);
}

/**
 * The endpoint under the base URL, checked when the model is made: an http(s) URL, without
 * credentials (fetch refuses them, and every error quoting the URL would leak them) nor a
 * fragment. The messages name the problem without repeating the URL.
 */
function chatCompletionsUrl(baseURL: string): string {
  const problem = (what: string) => new InvalidConfigError(`openAICompatibleModel: ${what}`);
  let parsed: URL;
  try {
    parsed = new URL(baseURL);
  } catch {
    // Not quoted: a mistyped URL may hold a key.
    throw problem('baseURL must be an http(s) URL such as http://localhost:11434/v1; the text given does not parse as a URL');
  }
  // Any other scheme (ftp:, file:, a bare host:port read as a scheme) failed every call ('could not reach').
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') throw problem(`baseURL must be an http(s) URL such as http://localhost:11434/v1, got a ${parsed.protocol} URL`);
  if (parsed.username !== '' || parsed.password !== '') {
    throw problem('baseURL must not contain credentials (user:password@); pass the key as apiKey or in an authorization header');
  }
  // The path is added after it (`…#part/chat/completions`), and fetch sends no fragment: every call went to the bare base.
  if (parsed.hash !== '') throw problem('baseURL must not have a #fragment: it is never sent, and the path /chat/completions would land in it');
  // The path goes before a query (Azure's `?api-version=`): appended to the text, it landed in the query.
  parsed.pathname = `${parsed.pathname.replace(/\/+$/, '')}/chat/completions`;
  return parsed.href;
}

function parseChunk(data: string): unknown {
  try {
    return JSON.parse(data) as unknown;
  } catch (error) {
    throw new MalformedStreamError(preview(data), { cause: error });
  }
}

/** An SSE `event: error` frame (some proxies use these instead of an `{"error":…}` chunk). */
function errorEvent(data: string): ModelError {
  return new ModelError(`the provider reported an error mid-stream: ${providerMessage(data) ?? 'no details'}`, { retryable: false });
}

async function failedResponse(response: Response, guard: CallGuard, model: string, url: string): Promise<Error> {
  let text = '';
  try {
    text = await readText(response, guard, MAX_ERROR_BODY_BYTES);
  } catch {
    // A cancel or timeout while reading the error body still wins; otherwise report the status alone.
    const stopped = guard.stopReason();
    if (stopped) return stopped;
  }
  return httpModelError({
    status: response.status,
    message: providerMessage(text, response.headers.get('content-type')) ?? (response.statusText || undefined),
    retryAfterMs: parseRetryAfter((name) => response.headers.get(name)),
    model,
    url,
  });
}

/** A whole (non-streamed) body as text, read in pieces so it can be refused past `maxBytes`. */
async function readText(response: Response, guard: CallGuard, maxBytes: number): Promise<string> {
  if (response.body === null) return '';
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  const parts: string[] = [];
  let received = 0;
  let finished = false;
  try {
    for (;;) {
      let result: Awaited<ReturnType<typeof reader.read>>;
      try {
        result = await reader.read();
      } catch (error) {
        throw guard.stopReason() ?? new ModelError(`the connection was lost reading the response: ${describeError(error)}`, { retryable: true, cause: error });
      }
      if (result.done) {
        finished = true;
        parts.push(decoder.decode());
        return parts.join('');
      }
      guard.touch();
      received += result.value.byteLength;
      if (received > maxBytes) throw tooLarge(maxBytes);
      parts.push(decoder.decode(result.value, { stream: true }));
    }
  } finally {
    if (!finished) reader.cancel().catch(() => {});
  }
}

function tooLarge(maxBytes: number): MalformedStreamError {
  return new MalformedStreamError(`the response passed ${maxBytes} bytes (maxResponseBytes)`);
}

import type { APICallError, JSONParseError, TypeValidationError } from '@ai-sdk/provider';
import type { ToolCall } from '../schemas.js';
import type { Model, ModelReply, ModelRequest } from '../model.js';
import { ModelError, parseModelReply, RESPONSE_FORMAT_VERSION, type ResponseFormat } from '../model.js';
import { toLanguageModelPrompt, toLanguageModelTools } from './ai-sdk-prompt.js';
import { isUnfinished, readFinishPart, specificationVersionOf, type AiSdkDriven, type AiSdkLanguageModel, type AiSdkSpecificationVersion, type AiSdkStreamOptions, type FinishPart } from './ai-sdk-spec.js';
import { CallGuard, DEFAULT_MODEL_DEADLINE_MS, timeoutOption } from './call-guard.js';
import { parseArguments, streamedError } from './chat-chunks.js';
import { MalformedStreamError } from './errors.js';
import { replyFinishReason } from './finish-reason.js';
import { describeError, httpModelError, parseRetryAfter, providerMessage, redactUrlCredentials } from './http-status.js';
import { checkKnownKeys, optionKeys } from '../known-keys.js';
import { InvalidConfigError } from '../errors.js';
import { redactError } from './redact.js';

/*
 * Why `languageModel.doStream()` and not `streamText()`:
 * - doStream is the provider contract (LanguageModelV2 in AI SDK 5, V3 in AI SDK 6, V4 in AI SDK
 *   7), so every provider package works, and we get raw parts: text deltas, complete tool calls
 *   with their JSON text, the finish part with usage. The parts we read have the same shape in
 *   every version except the finish part (ai-sdk-spec.ts reads it per version).
 * - streamText would retry on its own (maxRetries: 2 by default) under our retry wrapper, run a
 *   multi-step tool loop we do not want (the brain owns the loop), and report failures through
 *   stream parts and an onError callback instead of the APICallError we need for status,
 *   isRetryable and the retry-after header.
 * - The cost is building the provider-level prompt ourselves (ai-sdk-prompt.ts), a small mapping.
 */

export interface AiSdkModelOptions {
  /**
   * Longest silence tolerated between stream parts (and before the stream starts), default
   * 60 000 ms; `Infinity` turns it off, 0 or a negative value is refused. The SDK has no read
   * timeout of its own; a stalled provider would hang forever.
   */
  readTimeoutMs?: number | undefined;
  /**
   * Longest a whole call may take, stream included, default 600 000 ms (10 minutes); `Infinity`
   * turns it off. Past it the call fails with ModelDeadlineError (not retryable), even while data
   * keeps arriving: endless keep-alive comments or endless text would otherwise hold it open.
   */
  deadlineMs?: number | undefined;
  /**
   * Whether an agent with an output schema asks this model through the call's `responseFormat`
   * (the provider's JSON-schema mode) rather than a `final_answer` tool. Default: yes, unless the
   * model says it has no structured outputs (`supportsStructuredOutputs: false`, as
   * `@ai-sdk/openai-compatible` models do unless created with `supportsStructuredOutputs: true`):
   * such a provider drops the schema and would be asked for JSON of no particular shape.
   */
  structuredOutputs?: boolean | undefined;
  /**
   * The credentials the provider sends (its API key, a signed token), to be replaced by `***`
   * wherever an error quotes them. This adapter is never told the key its provider sends, so
   * without them it finds a key only by its form (`sk-…`, `Authorization: …`, `?key=…`): a key of
   * no known shape that a provider's 401 body quotes would reach logs and traces. Values shorter
   * than 8 characters are ignored (a placeholder such as `ollama` is no secret), and so is `undefined`
   * (`[process.env.OPENAI_API_KEY]` where the variable is not set).
   */
  secrets?: readonly (string | undefined)[] | undefined;
}

const OPTION_KEYS = optionKeys<AiSdkModelOptions>()({ readTimeoutMs: true, deadlineMs: true, structuredOutputs: true, secrets: true });

const DEFAULT_READ_TIMEOUT_MS = 60_000;

/** `secrets` checked where it enters: a list of strings (a missing environment variable, undefined, is left out). */
function secretsOption(given: unknown): string[] {
  if (given === undefined) return [];
  if (!Array.isArray(given)) throw new InvalidConfigError('aiSdkModel: secrets must be a list of strings');
  return (given as unknown[]).filter((secret): secret is string => {
    if (secret === undefined) return false;
    if (typeof secret !== 'string') throw new InvalidConfigError('aiSdkModel: secrets must be a list of strings');
    return true;
  });
}

/**
 * A Model over any AI SDK provider model (`@ai-sdk/openai`, `@ai-sdk/anthropic`,
 * `createOpenAICompatible`…) of AI SDK 5, 6 or 7: `LanguageModelV2`, `V3` or `V4`, told apart by
 * `specificationVersion`. Anything else throws `UnsupportedModelError` here, not on the first call.
 * What a failed call throws, the provider's error kept as its cause, has credentials redacted
 * (`redactError`): URLs' user info and `?key=`-like parameters, `Authorization` values, `sk-…`-shaped keys.
 *
 * @example
 * ```ts
 * import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
 * import { createAgentMachine } from 'loopchart';
 * import { aiSdkModel } from 'loopchart/ai-sdk';
 *
 * const provider = createOpenAICompatible({ name: 'local', baseURL: 'http://localhost:11434/v1' });
 * const agent = createAgentMachine({ model: aiSdkModel(provider('llama3.2')) });
 * ```
 */
export function aiSdkModel(languageModel: AiSdkLanguageModel, options: AiSdkModelOptions = {}): Model {
  // null threw a raw TypeError below; a string, a list or a function were read as no options at all.
  if (typeof options !== 'object' || options === null || Array.isArray(options)) throw new InvalidConfigError('aiSdkModel: options must be an object { readTimeoutMs?, deadlineMs?, structuredOutputs?, secrets? }');
  checkKnownKeys(options, OPTION_KEYS, 'aiSdkModel');
  // 'yes', 'false' or 1 were read by their truthiness.
  if (options.structuredOutputs !== undefined && typeof options.structuredOutputs !== 'boolean') throw new InvalidConfigError('aiSdkModel: structuredOutputs must be a boolean');
  const version = specificationVersionOf(languageModel);
  // Checked: an object with doStream, of a version whose call options take `AiSdkStreamOptions`.
  const driven = languageModel as AiSdkDriven;
  const readTimeoutMs = timeoutOption('readTimeoutMs', options.readTimeoutMs, DEFAULT_READ_TIMEOUT_MS);
  const deadlineMs = timeoutOption('deadlineMs', options.deadlineMs, DEFAULT_MODEL_DEADLINE_MS);
  const structuredOutputs = options.structuredOutputs ?? (languageModel as { supportsStructuredOutputs?: unknown }).supportsStructuredOutputs !== false;
  const secrets = secretsOption(options.secrets);
  return {
    name: `${languageModel.provider}:${languageModel.modelId}`,
    ...(structuredOutputs && { supports: { responseFormat: RESPONSE_FORMAT_VERSION } }),
    async generate(request: ModelRequest): Promise<ModelReply> {
      const guard = new CallGuard(request.signal, readTimeoutMs, deadlineMs);
      try {
        guard.throwIfStopped();
        const hasTools = request.tools.length > 0;
        let result: unknown;
        try {
          result = await guard.race(
            driven.doStream({
              prompt: toLanguageModelPrompt(request.messages),
              ...(hasTools ? { tools: toLanguageModelTools(request.tools), toolChoice: { type: 'auto' } } : {}),
              ...(request.responseFormat && structuredOutputs && { responseFormat: aiSdkResponseFormat(request.responseFormat) }),
              abortSignal: guard.signal,
              // HTTP providers send it; others ignore headers.
              headers: { 'Idempotency-Key': request.idempotencyKey },
            }),
          );
        } catch (error) {
          throw guard.stopReason() ?? toModelError(error, languageModel, false);
        }
        guard.touch();
        return await consume(streamOf(result), guard, request, languageModel, version);
      } catch (error) {
        // The one way out for a failure. The provider's error (kept as cause) carries the request URL, the
        // response body and headers; the key is found among `secrets` when given, else by its shape.
        throw redactError(error, secrets);
      } finally {
        guard.dispose();
      }
    },
  };
}

/**
 * The `stream` of what `doStream` resolved to. A provider (or a hand-written model) that resolves
 * to something else is broken the same way on every attempt: MalformedStreamError, not a TypeError.
 */
function streamOf(result: unknown): ReadableStream<unknown> {
  const stream = (result as { stream?: unknown } | null | undefined)?.stream;
  if (typeof (stream as { getReader?: unknown } | null | undefined)?.getReader !== 'function') {
    const got = result === null || typeof result !== 'object' ? String(result) : `an object with keys [${Object.keys(result).join(', ')}]`;
    throw new MalformedStreamError(`doStream resolved without a readable stream (got ${clip(got)})`);
  }
  return stream as ReadableStream<unknown>;
}

/** The call option for a request's answer format (the AI SDK's `{ type: 'json', schema, name, description }`). */
function aiSdkResponseFormat(format: ResponseFormat): NonNullable<AiSdkStreamOptions['responseFormat']> {
  return { type: 'json', schema: format.schema, name: format.name, ...(format.description !== undefined && { description: format.description }) };
}

/** The stream parts the reply is made of; every other part type is skipped unread. */
type ReadPart =
  | { type: 'text-delta'; delta: unknown }
  | { type: 'tool-call'; toolCallId: unknown; toolName: unknown; input: unknown; providerExecuted?: unknown }
  | { type: 'finish' }
  | { type: 'error'; error: unknown };

async function consume(
  stream: ReadableStream<unknown>,
  guard: CallGuard,
  request: ModelRequest,
  languageModel: AiSdkLanguageModel,
  version: AiSdkSpecificationVersion,
): Promise<ModelReply> {
  const reader = stream.getReader();
  // A provider (or a mock) may ignore the abort signal: cancelling the reader ends a pending read.
  guard.onAbort(() => void reader.cancel().catch(() => {}));
  let text = '';
  const toolCalls: ToolCall[] = [];
  let finish: FinishPart | undefined;
  /**
   * A provider that cannot make sense of what the server sent says so in an error part and goes
   * on to a finish part (V3 providers report a stream cut before its finish reason that way):
   * held until the finish part tells a cut stream from a malformed one.
   */
  let invalidData: Error | undefined;
  let ended = false;
  try {
    for (;;) {
      let result: Awaited<ReturnType<typeof reader.read>>;
      try {
        result = await reader.read();
      } catch (error) {
        throw guard.stopReason() ?? toModelError(error, languageModel, true);
      }
      if (result.done) {
        ended = true;
        break;
      }
      guard.touch();
      const part = result.value as ReadPart;
      if (part === null || typeof part !== 'object') throw new MalformedStreamError(`a stream part is not an object: ${clip(String(part))}`);
      switch (part.type) {
        case 'text-delta':
          if (typeof part.delta !== 'string') throw new MalformedStreamError(`text-delta without a string delta: ${clip(JSON.stringify(part))}`);
          if (part.delta.length === 0) break;
          text += part.delta;
          request.onTextDelta?.(part.delta);
          break;
        case 'tool-call':
          // Provider-executed tools (web search and the like) already ran; they are not ours to run.
          if (part.providerExecuted) break;
          if (typeof part.toolCallId !== 'string' || typeof part.toolName !== 'string' || typeof part.input !== 'string') {
            throw new MalformedStreamError(`tool-call part without string id, name and input: ${clip(JSON.stringify(part))}`);
          }
          toolCalls.push({ id: part.toolCallId, name: part.toolName, args: parseArguments(part.input) });
          break;
        case 'finish': {
          const read = readFinishPart(version, part);
          if ('problem' in read) throw new MalformedStreamError(clip(read.problem));
          finish = read;
          break;
        }
        case 'error':
          if (isAiSdkError<Error>(part.error, 'AI_InvalidResponseDataError') && invalidData === undefined) {
            invalidData = part.error;
            break;
          }
          throw toModelError(part.error, languageModel, false);
        default:
          // stream-start, response-metadata, text-start/end, tool-input-*, reasoning, sources, raw:
          // nothing the reply carries.
          break;
      }
    }
    // A cancelled reader reports `done`: that is an abort or a timeout, not a finished reply.
    guard.throwIfStopped();
  } finally {
    if (!ended) reader.cancel().catch(() => {});
  }
  // The provider flushes a cut stream as a finish part with reason 'unknown' or 'error' (and any
  // half-received tool calls as complete ones): that reply is not the model's, so none of it may
  // reach the loop, whichever specification version said so.
  if (finish === undefined || isUnfinished(finish)) {
    const why = invalidData
      ? `the provider said: ${invalidData.message}`
      : finish === undefined
        ? 'no finish part'
        : `the provider reported finish reason "${finish.reason}"`;
    throw new ModelError(`the stream ended before the model finished (${why})`, { retryable: true, cause: invalidData });
  }
  if (invalidData) throw new MalformedStreamError(clip(invalidData.message), { cause: invalidData });
  return parseModelReply({
    message: toolCalls.length > 0 ? { role: 'assistant', content: text, toolCalls } : { role: 'assistant', content: text },
    finishReason: replyFinishReason(finish.reason, toolCalls.length > 0),
    // A provider's counts as sent: parseModelReply applies the one usage rule (normalizeUsage).
    ...(finish.usage && { usage: finish.usage }),
  });
}

/**
 * Any failure the SDK reports, as a ModelError the retry wrapper understands.
 * `transport` is true for errors thrown while reading the stream (a dropped connection),
 * which are worth another attempt even when their type is unknown.
 */
export function toModelError(error: unknown, languageModel: Pick<AiSdkLanguageModel, 'provider' | 'modelId'>, transport: boolean): ModelError {
  if (error instanceof ModelError) return error;
  if (isAiSdkError<APICallError>(error, 'AI_APICallError')) {
    // The request succeeded and reading the body failed: a cut connection, not an HTTP failure.
    // Reported like openAICompatibleModel reports it: no status, retryable.
    if (error.statusCode !== undefined && error.statusCode >= 200 && error.statusCode < 300) {
      return new ModelError(`the connection was lost mid-stream: ${describeError(error.cause ?? error)}`, {
        retryable: true,
        cause: error,
      });
    }
    const headers = lowerCaseKeys(error.responseHeaders);
    const retryAfterMs = parseRetryAfter((name) => headers.get(name));
    if (error.statusCode === undefined) {
      return new ModelError(`could not reach the provider: ${redactUrlCredentials(error.message)}`, {
        retryable: error.isRetryable,
        retryAfterMs,
        cause: error,
      });
    }
    return httpModelError({
      status: error.statusCode,
      message: (error.responseBody !== undefined ? providerMessage(error.responseBody, headers.get('content-type')) : undefined) ?? error.message,
      retryAfterMs,
      model: languageModel.modelId,
      url: error.url,
      retryable: error.isRetryable,
      cause: error,
    });
  }
  if (isAiSdkError<JSONParseError>(error, 'AI_JSONParseError')) return new MalformedStreamError(clip(error.text), { cause: error });
  if (isAiSdkError<TypeValidationError>(error, 'AI_TypeValidationError')) return new MalformedStreamError(clip(JSON.stringify(error.value) ?? String(error.value)), { cause: error });
  if (error instanceof Error) {
    if (transport) return new ModelError(`the connection was lost mid-stream: ${describeError(error)}`, { retryable: true, cause: error });
    // fetch's own message quotes a URL with credentials in full ("…includes credentials: <url>").
    return new ModelError(`${languageModel.provider} failed: ${redactUrlCredentials(error.message)}`, { retryable: false, cause: error });
  }
  // A provider's own error object inside the stream, e.g. `{ message, type: 'server_error' }`.
  return streamedError(error);
}

/**
 * The check `APICallError.isInstance` performs: AI SDK errors carry a global-registry symbol
 * `vercel.ai.error.<name>` set to true, so the test works across duplicate package copies.
 * Doing it here keeps `@ai-sdk/provider` a type-only import: loopchart needs no runtime
 * dependency on the SDK, and a user's provider package brings its own copy.
 */
function isAiSdkError<T>(error: unknown, name: string): error is T {
  return typeof error === 'object' && error !== null && (error as Record<symbol, unknown>)[Symbol.for(`vercel.ai.error.${name}`)] === true;
}

/** Header names are the server's choice: a Map, so `__proto__` or `constructor` are plain names. */
function lowerCaseKeys(headers: Record<string, string> | undefined): Map<string, string> {
  const out = new Map<string, string>();
  for (const [key, value] of Object.entries(headers ?? {})) out.set(key.toLowerCase(), value);
  return out;
}

function clip(text: string): string {
  return text.length > 200 ? `${text.slice(0, 200)}…` : text;
}

import { z } from 'zod';
import { AssistantMessageSchema, FinishReasonSchema, ToolCallSchema } from './schemas.js';
import type { AssistantMessage, FinishReason, Message, Usage } from './schemas.js';
import { LoopchartError } from './errors.js';
import { jsonValueFault } from './json-value.js';

/** A tool as the model sees it: name, description and a JSON Schema for its arguments. */
export interface ToolDefinition {
  name: string;
  description: string;
  inputSchema: Record<string, unknown>;
}

export type { FinishReason };

export type { Usage };

export interface ModelRequest {
  /** The whole conversation to send (history + pending), provider-valid. */
  messages: readonly Message[];
  tools: readonly ToolDefinition[];
  signal: AbortSignal;
  /** Stable across retries and across a restore that repeats this call. */
  idempotencyKey: string;
  /** Called with each streamed piece of assistant text, in order. */
  onTextDelta?: ((delta: string) => void) | undefined;
  /**
   * The shape the final answer must have, sent only to a model whose `supports.responseFormat`
   * is at least RESPONSE_FORMAT_VERSION: the adapter passes it to the provider's JSON-schema mode
   * (Chat Completions `response_format`, the AI SDK's `responseFormat`). The driver validates the
   * answer itself, so a provider that only approximates the schema is still held to it.
   */
  responseFormat?: ResponseFormat | undefined;
}

/**
 * Version of the `ResponseFormat` contract this build sends. A model declares the version it reads
 * in `supports.responseFormat`; versions only ever add optional fields, so a model that reads
 * version n reads every version up to n.
 *
 * @example
 * ```ts
 * const mine: Model = { name: 'mine', supports: { responseFormat: RESPONSE_FORMAT_VERSION }, generate: (request) => model.generate(request) };
 * ```
 */
export const RESPONSE_FORMAT_VERSION = 1;

/** A request's answer format (version 1): JSON matching `schema`, named for the provider. */
export interface ResponseFormat {
  type: 'json';
  /** 1-64 characters of a-z, A-Z, 0-9, _ or - (what OpenAI accepts as the schema's name). */
  name: string;
  description?: string | undefined;
  /** A JSON Schema whose root is an object (`type: 'object'`). */
  schema: Record<string, unknown>;
}

/** What a model can do beyond text and tool calls. */
export interface ModelSupports {
  /** The `ResponseFormat` version the model reads (see RESPONSE_FORMAT_VERSION); absent: none. */
  readonly responseFormat?: number | undefined;
}

export interface ModelReply {
  message: AssistantMessage;
  finishReason: FinishReason;
  usage?: Usage | undefined;
}

/**
 * Anything that can answer a model request: the scripted model, the AI SDK adapter, the HTTP adapter.
 * @example
 * ```ts
 * const echo: Model = {
 *   name: 'echo',
 *   async generate(request) {
 *     const last = request.messages.at(-1);
 *     return { message: { role: 'assistant', content: `you said: ${last?.content ?? ''}` }, finishReason: 'stop' };
 *   },
 * };
 * const { text } = await runAgent({ model: echo, prompt: 'hello' }); // 'you said: hello'
 * ```
 */
export interface Model {
  readonly name: string;
  /** Optional capabilities; a wrapper around a model must pass them on. */
  readonly supports?: ModelSupports | undefined;
  generate(request: ModelRequest): Promise<ModelReply>;
}

/** Whether `model` reads this build's response format (see RESPONSE_FORMAT_VERSION). */
export const readsResponseFormat = (model: Model): boolean =>
  typeof model.supports?.responseFormat === 'number' && model.supports.responseFormat >= RESPONSE_FORMAT_VERSION;

/**
 * A model call that failed. `retryable` says whether the driver's retry policy may try again;
 * `retryAfterMs` carries the provider's `retry-after` when it sent one.
 */
export class ModelError extends LoopchartError {
  readonly status: number | undefined;
  readonly retryable: boolean;
  readonly retryAfterMs: number | undefined;
  constructor(
    message: string,
    options: { status?: number | undefined; retryable: boolean; retryAfterMs?: number | undefined; cause?: unknown },
  ) {
    super('ModelError', message, { cause: options.cause });
    this.status = options.status;
    this.retryable = options.retryable;
    this.retryAfterMs = options.retryAfterMs;
  }
}

/**
 * The largest token count a provider may report for one call. No model has a window within three
 * orders of magnitude of it; anything above is a broken counter, not a usage figure. Keeping
 * counts this small also keeps every sum of them (a session's usage) an exact safe integer.
 *
 * @example
 * ```ts
 * normalizeUsage({ inputTokens: MAX_REPORTED_TOKENS + 1, outputTokens: 0 }); // undefined
 * ```
 */
export const MAX_REPORTED_TOKENS = 1_000_000_000;

/**
 * The rule for a provider's usage numbers, applied where they enter (both HTTP adapters, the
 * scripted model, and the driver for custom models):
 * - a fractional count is rounded to the nearest integer (some proxies average or scale counts);
 * - a count that is missing (or null) while the other one is present counts as 0;
 * - anything else that is not a finite number in [0, MAX_REPORTED_TOKENS] (negative, NaN,
 *   Infinity, 1e300, a string, an object) drops the whole usage: half a usage would mislead
 *   budgets and the compaction lines, and without usage the driver estimates with the tokenizer.
 *
 * @example
 * ```ts
 * normalizeUsage({ inputTokens: 10.5, outputTokens: 3 }); // { inputTokens: 11, outputTokens: 3 }
 * normalizeUsage({ inputTokens: -1, outputTokens: 3 });   // undefined
 * ```
 */
export function normalizeUsage(raw: unknown): Usage | undefined {
  if (raw === null || typeof raw !== 'object') return undefined;
  const { inputTokens, outputTokens } = raw as { inputTokens?: unknown; outputTokens?: unknown };
  if (inputTokens == null && outputTokens == null) return undefined;
  const input = tokenCount(inputTokens);
  const output = tokenCount(outputTokens);
  if (input === undefined || output === undefined) return undefined;
  return { inputTokens: input, outputTokens: output };
}

function tokenCount(value: unknown): number | undefined {
  if (value == null) return 0;
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) return undefined;
  const rounded = Math.round(value);
  return rounded <= MAX_REPORTED_TOKENS ? rounded : undefined;
}

const FINISH_REASONS: ReadonlySet<string> = new Set(FinishReasonSchema.options);

/**
 * Our finish reason for whatever a model reported: one of ours stays, anything else (an unknown
 * provider string, a number, nothing) is `'other'`. The finish reason only informs the caller
 * (the loop acts on the message), so an unknown one is no reason to fail a reply.
 *
 * @example
 * ```ts
 * normalizeModelFinishReason('bogus'); // 'other'
 * ```
 */
export function normalizeModelFinishReason(raw: unknown): FinishReason {
  return typeof raw === 'string' && FINISH_REASONS.has(raw) ? (raw as FinishReason) : 'other';
}

/**
 * Why tool-call arguments are not plain JSON within MAX_JSON_DEPTH, or null. The place is
 * shortened: for a value nested thousands deep it would be most of the message.
 *
 * @example
 * ```ts
 * argumentsProblem({ f: () => 1 }); // 'the arguments are not plain JSON: a function is not JSON (at args.f)'
 * ```
 */
export function argumentsProblem(args: unknown): string | null {
  const fault = jsonValueFault(args, 'args');
  if (fault === null) return null;
  const where = fault.path.length > 80 ? `${fault.path.slice(0, 80)}…` : fault.path;
  return `the arguments are not plain JSON: ${fault.problem} (at ${where})`;
}

/**
 * Arguments must be plain JSON within MAX_JSON_DEPTH, the rule every stored snapshot is checked
 * against: a reply accepted here can always be persisted and restored.
 */
const ReplyToolCallSchema = ToolCallSchema.extend({
  args: z.unknown().superRefine((args, ctx) => {
    const problem = argumentsProblem(args);
    if (problem !== null) ctx.addIssue({ code: 'custom', message: problem });
  }),
});

/**
 * A model reply as it enters loopchart, checked and normalised: the message must be a
 * provider-valid assistant message (string content, tool calls with an id, a name and JSON
 * arguments); the finish reason and usage are normalised, never refused (see
 * `normalizeModelFinishReason`, `normalizeUsage`). Both adapters and the scripted model pass
 * their replies through it, and the driver checks custom models' replies with it.
 *
 * @example
 * ```ts
 * const reply = ModelReplySchema.parse({
 *   message: { role: 'assistant', content: 'hi' },
 *   finishReason: 'bogus',
 *   usage: { inputTokens: 10.5, outputTokens: 2 },
 * });
 * // reply.finishReason === 'other', reply.usage → { inputTokens: 11, outputTokens: 2 }
 * ```
 */
export const ModelReplySchema = z
  .object({
    message: AssistantMessageSchema.extend({ toolCalls: z.array(ReplyToolCallSchema).optional() }),
    finishReason: z.unknown().optional(),
    usage: z.unknown().optional(),
  })
  .transform(({ message, finishReason, usage }): ModelReply => {
    const normalizedUsage = normalizeUsage(usage);
    const reply: ModelReply = { message, finishReason: normalizeModelFinishReason(finishReason) };
    if (normalizedUsage !== undefined) reply.usage = normalizedUsage;
    return reply;
  });

/**
 * A model returned something that is not a reply (see `ModelReplySchema`). Not retryable.
 *
 * @example
 * ```ts
 * try {
 *   parseModelReply({ message: { role: 'assistant', content: null } });
 * } catch (error) {
 *   if (error instanceof InvalidModelReplyError) console.error(error.message); // says which field
 * }
 * ```
 */
export class InvalidModelReplyError extends ModelError {
  constructor(problem: string, options: { cause?: unknown } = {}) {
    super(`the model returned an invalid reply: ${problem}`, { retryable: false, cause: options.cause });
  }
}

/**
 * Checks and normalises a model reply (see `ModelReplySchema`), or throws InvalidModelReplyError
 * saying what was wrong.
 *
 * @example
 * ```ts
 * const reply = parseModelReply(await model.generate(request)); // a custom model's reply, checked
 * ```
 */
export function parseModelReply(value: unknown): ModelReply {
  const parsed = ModelReplySchema.safeParse(value);
  if (!parsed.success) throw new InvalidModelReplyError(z.prettifyError(parsed.error), { cause: parsed.error });
  return parsed.data;
}

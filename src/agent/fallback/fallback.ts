import { z } from 'zod';
import type { Model } from '../../model.js';
import { UsageSchema } from '../../schemas.js';
import { PricesSchema, type Prices } from '../budget/budget.js';
import { InvalidConfigError } from '../../errors.js';
import { parseOptions } from '../../known-keys.js';

/**
 * Model fallback, as pure rules: `model` may be a list, and a call that fails in one of the
 * listed ways (after that model's own retries) moves the run to the next model for the rest of
 * the run. Which model is active, and what each one used, is driver state (`context.models`),
 * so a run restored in another process goes on with the model it was using.
 */

/**
 * The failures that move a run to the next model: a rate limit that outlasted the retries, a
 * server error (5xx, or the provider unreachable), a timeout (no data for the read timeout, the
 * call's deadline, HTTP 408), a request too long for the model's context window.
 */
export const FALLBACK_TRIGGERS = ['rate-limit', 'server-error', 'timeout', 'context-length'] as const;
export type FallbackTrigger = (typeof FALLBACK_TRIGGERS)[number];

/**
 * Decides whether a failed call (after that model's own retries) moves to the next model: `true`
 * falls back, anything else does not. A predicate that throws, or whose answer cannot be read,
 * does not fall back (the run fails with the model's error, as without a list).
 *
 * @example
 * ```ts
 * import type { FallbackPredicate } from 'loopchart';
 *
 * // Also move on when a custom model throws its own "overloaded" error (no status, no network code).
 * const fallbackOn: FallbackPredicate = (error) => error instanceof Error && /overloaded/i.test(error.message);
 * ```
 */
export type FallbackPredicate = (error: unknown) => boolean;

/**
 * What a `model.fallback` event names as its cause: the trigger, or `fallbackOn` when a predicate
 * decided on an error no trigger names.
 *
 * @example
 * ```ts
 * import type { FallbackCause } from 'loopchart';
 *
 * const label = (cause: FallbackCause) => (cause === 'fallbackOn' ? 'your fallbackOn function' : cause);
 * ```
 */
export type FallbackCause = FallbackTrigger | 'fallbackOn';

/** One entry of a model list: a model, or a model with its own prices (for cost per model). */
export type ModelChoice = Model | { model: Model; prices?: Prices | undefined };

/** The agent's models, checked: entries in fallback order and the triggers that move along. */
export interface ModelList {
  readonly entries: readonly { readonly model: Model; readonly prices: Prices | undefined }[];
  readonly on: ReadonlySet<FallbackTrigger>;
  /** The user's `fallbackOn` function, when one was given instead of a list of triggers. */
  readonly decide?: FallbackPredicate | undefined;
  /** Whether a list was given: only then does a run fall back (the driver keeps `context.models` for it, and for an agent that books usage by model). */
  readonly listed: boolean;
}

const isModel = (value: unknown): value is Model =>
  typeof value === 'object' && value !== null && typeof (value as Model).name === 'string' && typeof (value as Model).generate === 'function';

const describe = (value: unknown): string =>
  value === null ? 'null' : Array.isArray(value) ? 'an array' : typeof value === 'object' ? `an object with keys ${Object.keys(value).slice(0, 5).join(', ') || '(none)'}` : `a ${typeof value}`;

/**
 * The `model` and `fallbackOn` options checked once, when the machine is created: a model, or a
 * non-empty list of models (each possibly `{ model, prices }`); `fallbackOn` a non-empty list of
 * `FALLBACK_TRIGGERS` (default: all of them), only beside a list. Anything else is an
 * `InvalidConfigError` naming the entry.
 *
 * @example
 * ```ts
 * const primary = scriptedModel([{ text: 'from the primary' }]);
 * const backup = scriptedModel([{ text: 'from the backup' }]);
 * const list = modelList([primary, { model: backup, prices: { inputPerMillionUsd: 0.1, outputPerMillionUsd: 0.4 } }], ['rate-limit'], undefined);
 * // list.entries[1].prices.inputPerMillionUsd === 0.1
 * ```
 */
export function modelList(option: unknown, fallbackOn: unknown, prices: Prices | undefined): ModelList {
  if (!Array.isArray(option)) {
    // Left out is the first mistake of a first agent: say what to give, not "got a undefined".
    if (option === undefined) {
      throw new InvalidConfigError('model is missing: give a model (openAICompatibleModel(...), aiSdkModel(...), scriptedModel(...) from loopchart/testing) or a list of them');
    }
    if (!isModel(option)) throw new InvalidConfigError(`model must be a model (with a name and generate()) or a list of them, got ${describe(option)}`);
    if (fallbackOn !== undefined) throw new InvalidConfigError('fallbackOn needs a list of models to fall back to (model: [primary, backup])');
    return { entries: [{ model: option, prices }], on: new Set(), listed: false };
  }
  if (option.length === 0) throw new InvalidConfigError('model: the list of models is empty');
  const entries = option.map((entry: unknown, i) => {
    if (isModel(entry)) return { model: entry, prices };
    const choice = entry as { model?: unknown; prices?: unknown } | null;
    if (typeof choice !== 'object' || choice === null || !isModel(choice.model)) {
      throw new InvalidConfigError(`model[${i}] is not a model (with a name and generate()) nor { model, prices? }: got ${describe(entry)}`);
    }
    if (choice.prices === undefined) return { model: choice.model, prices };
    return { model: choice.model, prices: parseOptions(PricesSchema, choice.prices, `model[${i}].prices`) };
  });
  if (typeof fallbackOn === 'function') return { entries, on: new Set(), decide: fallbackOn as FallbackPredicate, listed: true };
  return { entries, on: fallbackTriggers(fallbackOn), listed: true };
}

function fallbackTriggers(option: unknown): ReadonlySet<FallbackTrigger> {
  if (option === undefined) return new Set(FALLBACK_TRIGGERS);
  const known: readonly unknown[] = FALLBACK_TRIGGERS;
  if (!Array.isArray(option) || option.length === 0 || option.some((trigger) => !known.includes(trigger))) {
    throw new InvalidConfigError(`fallbackOn must be a function (error) => boolean or a non-empty list of ${FALLBACK_TRIGGERS.map((t) => `'${t}'`).join(', ')}; got ${JSON.stringify(option)?.slice(0, 120)}`);
  }
  return new Set(option as FallbackTrigger[]);
}

/** Providers' words for a request longer than the model's window (OpenAI, Anthropic, Gemini, vLLM, …). */
const CONTEXT_LENGTH = /context[ _-]?length|maximum context|context window|prompt is too long|input is too long|exceeds the maximum number of tokens|too many tokens/i;
const NETWORK_CODES = new Set(['ECONNRESET', 'ECONNREFUSED', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EAI_AGAIN']);
/** A retry wrapper's "failed after n attempts" wraps the last error as its cause, undici nests the socket's. */
const MAX_CAUSE_DEPTH = 6;

/**
 * Which trigger a failed model call is, or null (an abort, a bad reply, 401, a plain 400 …).
 * Reads the error and its causes: `status` and `name` of loopchart's model errors, the network
 * codes of a connection that failed, the provider's words for a context window exceeded.
 *
 * @example
 * ```ts
 * fallbackTrigger(Object.assign(new Error('rate limited (429)'), { status: 429 })); // 'rate-limit'
 * ```
 */
export function fallbackTrigger(error: unknown): FallbackTrigger | null {
  let current: unknown = error;
  for (let depth = 0; depth < MAX_CAUSE_DEPTH && typeof current === 'object' && current !== null; depth++) {
    const { name, status, code, message } = current as { name?: unknown; status?: unknown; code?: unknown; message?: unknown };
    if (name === 'AbortError') return null;
    if (name === 'ReadTimeoutError' || name === 'ModelDeadlineError' || status === 408) return 'timeout';
    if (status === 429) return 'rate-limit';
    if (status === 413 || code === 'context_length_exceeded' || ((status === 400 || status === undefined) && typeof message === 'string' && CONTEXT_LENGTH.test(message))) {
      return 'context-length';
    }
    if (typeof status === 'number' && status >= 500) return 'server-error';
    if (typeof code === 'string' && (NETWORK_CODES.has(code) || code.startsWith('UND_ERR_'))) return 'server-error';
    if (current instanceof TypeError && message === 'fetch failed' && (current as Error).cause === undefined) return 'server-error';
    current = (current as { cause?: unknown }).cause;
  }
  return null;
}

/** What one model used. */
const ModelUsageSchema = z.object({ model: z.string(), usage: UsageSchema });

/**
 * A row of the books: what one model used and what that cost, at the prices of the model that
 * made each call (a child run's at its own, see budget/model-pricing.ts); null: unknown. Absent in
 * rows stored before rows carried their cost: priced by the model's name (see `rowCost`).
 */
const BookedRowSchema = ModelUsageSchema.extend({ costUsd: z.number().nonnegative().nullable().optional() });

/** The model a run uses and what each model used, in the run and the session. */
export const ModelsStateSchema = z.object({
  active: z.object({ index: z.number().int().nonnegative(), name: z.string() }),
  run: z.array(BookedRowSchema),
  session: z.array(BookedRowSchema),
});
export type ModelsState = z.infer<typeof ModelsStateSchema>;
export type ModelUsage = z.infer<typeof ModelUsageSchema>;
export type BookedRow = ModelsState['run'][number];

/** A new run starts on the first model again (the primary may be back), with nothing used yet. */
export function startModels(list: ModelList, state: ModelsState | undefined): ModelsState {
  return { active: { index: 0, name: list.entries[0]!.model.name }, run: [], session: state?.session ?? [] };
}

/** A predicate's answers, per error: the chart's guard and its action ask about the same error, and get one answer. */
const decided = new WeakMap<object, boolean>();

/** The predicate's answer on `error`, read inside the try: only `true` falls back; a throw does not. */
function predicateSays(decide: FallbackPredicate, error: unknown): boolean {
  const memo = typeof error === 'object' && error !== null ? decided.get(error) : undefined;
  if (memo !== undefined) return memo;
  let answer: boolean;
  try {
    answer = decide(error) === true;
  } catch {
    answer = false;
  }
  if (typeof error === 'object' && error !== null) decided.set(error, answer);
  return answer;
}

/**
 * The model the run moves to after `error`, or null: no model is left, or the error is not one
 * to fall back on. By default that is a listed trigger (a status, a network code, a timeout: a
 * plain `Error` from a custom model is none); with a `fallbackOn` function, its answer.
 */
export function fallbackAfter(list: ModelList, state: ModelsState | undefined, error: unknown): { index: number; name: string; trigger: FallbackCause } | null {
  if (!list.listed) return null;
  const index = (state?.active.index ?? 0) + 1;
  if (index >= list.entries.length) return null;
  const trigger = fallbackTrigger(error);
  if (list.decide) return predicateSays(list.decide, error) ? { index, name: list.entries[index]!.model.name, trigger: trigger ?? 'fallbackOn' } : null;
  if (trigger === null || !list.on.has(trigger)) return null;
  return { index, name: list.entries[index]!.model.name, trigger };
}

/** Why a stored active model does not fit this agent's list (restored elsewhere with another list), or null. */
export function activeModelProblem(list: ModelList, state: ModelsState | undefined): string | null {
  if (!state) return null;
  const { index, name } = state.active;
  const entry = list.entries[index];
  if (!entry) return `the run uses model ${index} ('${name}') of its list, this agent lists ${list.entries.length}`;
  return entry.model.name === name ? null : `the run uses model ${index} '${name}', this agent lists '${entry.model.name}' there`;
}

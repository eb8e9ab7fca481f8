import { z } from 'zod';
import { parseOptions } from '../known-keys.js';
import { ModelError, type Model, type ModelReply, type ModelRequest } from '../model.js';
import { isAbortError } from './errors.js';
import { sleep as abortableSleep } from './sleep.js';
import { MAX_TIMER_MS } from '../timer-bound.js';

export const RetrySettingsSchema = z.object({
  /** Retries after the first attempt; 0 turns retrying off. */
  maxRetries: z.number().int().nonnegative().default(4),
  baseDelayMs: z.number().nonnegative().default(500),
  maxDelayMs: z.number().nonnegative().default(30_000),
});
export type RetrySettings = z.output<typeof RetrySettingsSchema>;
export type BackoffSettings = Pick<RetrySettings, 'baseDelayMs' | 'maxDelayMs'>;

export interface RetryAttempt {
  /** 1 for the first retry. */
  retry: number;
  delayMs: number;
  error: unknown;
}

export interface RetryOptions extends z.input<typeof RetrySettingsSchema> {
  /** A number in [0, 1); injectable so tests can pin the jitter. */
  random?: (() => number) | undefined;
  /** Injectable so tests can record delays instead of waiting them. Must reject when `signal` aborts. */
  sleep?: ((ms: number, signal: AbortSignal) => Promise<void>) | undefined;
  /** Before each wait, for a UI line like "rate limited, retrying in 2 s". */
  onRetry?: ((attempt: RetryAttempt) => void) | undefined;
}

const fn = (name: string) => z.custom<(...args: never[]) => unknown>((value) => typeof value === 'function', { error: `${name} must be a function` }).optional();
/** What `withRetry` and an agent's `retry` option take: the settings, and the hooks beside them. */
const RetryOptionsSchema = z.object({ ...RetrySettingsSchema.shape, random: fn('random'), sleep: fn('sleep'), onRetry: fn('onRetry') } satisfies Record<keyof RetryOptions, z.ZodType>);

/**
 * The settings of retry options, checked where they enter (an agent's config, `withRetry`):
 * a misspelt key, a negative count, a function that is none is an `InvalidConfigError` naming
 * `where`, never a zod error thrown later from inside a run.
 */
export function retrySettings(options: unknown, where = 'retry'): RetrySettings {
  const { maxRetries, baseDelayMs, maxDelayMs } = parseOptions(RetryOptionsSchema, options, where);
  return { maxRetries, baseDelayMs, maxDelayMs };
}

/** Connection-level failures: the request may never have reached the provider, so trying again is safe. */
const NETWORK_CODES = new Set(['ECONNRESET', 'ECONNREFUSED', 'ETIMEDOUT', 'EPIPE']);
/** Deep enough for fetch's `TypeError('fetch failed')` → undici error → socket error. */
const MAX_CAUSE_DEPTH = 5;

/**
 * Whether trying the same request again may succeed. A ModelError's own `retryable` decides (the
 * adapters set it from the HTTP status); otherwise network errors are retryable, including when
 * they are wrapped as the `cause` of another error. A cancellation never is.
 */
export function isRetryable(error: unknown): boolean {
  if (error instanceof ModelError) return error.retryable;
  if (isAbortError(error)) return false;
  if (error instanceof TypeError && error.message === 'fetch failed') return true;
  let current: unknown = error;
  for (let depth = 0; depth < MAX_CAUSE_DEPTH && typeof current === 'object' && current !== null; depth++) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string' && (NETWORK_CODES.has(code) || code.startsWith('UND_ERR_'))) return true;
    current = (current as { cause?: unknown }).cause;
  }
  return false;
}

/**
 * Exponential backoff with full jitter: a uniform wait in [0, min(max, base * 2^attempt)). The
 * jitter spreads clients that failed together (a rate limit, an outage) so they do not retry in
 * lockstep. `attempt` is 0 for the first retry.
 */
export function backoffDelay(attempt: number, settings: BackoffSettings, random: () => number): number {
  const ceiling = Math.min(settings.maxDelayMs, settings.baseDelayMs * 2 ** attempt);
  return Math.floor(random() * ceiling);
}


/** The provider's `retry-after` is a floor (asking sooner earns another 429), but never beyond the cap, nor a timer's bound. */
function retryDelay(attempt: number, error: unknown, settings: BackoffSettings, random: () => number): number {
  const retryAfterMs = error instanceof ModelError ? (error.retryAfterMs ?? 0) : 0;
  return Math.min(MAX_TIMER_MS, settings.maxDelayMs, Math.max(retryAfterMs, backoffDelay(attempt, settings, random)));
}

/**
 * A model that retries retryable failures of `model`. Non-retryable errors and cancellations pass
 * through untouched at once; a wait between attempts ends early when the request's signal aborts.
 * The request (and so its idempotency key) is the same on every attempt.
 */
export function withRetry(model: Model, options: RetryOptions = {}): Model {
  const settings = retrySettings(options, 'withRetry');
  const random = options.random ?? Math.random;
  const sleep = options.sleep ?? abortableSleep;
  return {
    name: model.name,
    ...(model.supports && { supports: model.supports }),
    async generate(request: ModelRequest): Promise<ModelReply> {
      for (let attempt = 0; ; attempt++) {
        try {
          return await model.generate(request);
        } catch (error) {
          if (request.signal.aborted || !isRetryable(error)) throw error;
          if (attempt >= settings.maxRetries) throw exhausted(model.name, attempt + 1, error);
          const delayMs = retryDelay(attempt, error, settings, random);
          options.onRetry?.({ retry: attempt + 1, delayMs, error });
          await sleep(delayMs, request.signal);
        }
      }
    },
  };
}

function exhausted(modelName: string, attempts: number, last: unknown): ModelError {
  const reason = last instanceof Error ? last.message : String(last);
  return new ModelError(`model "${modelName}" failed after ${attempts} attempts; last error: ${reason}`, {
    status: last instanceof ModelError ? last.status : undefined,
    retryable: false,
    cause: last,
  });
}

import { ModelError } from '../model.js';

/**
 * Subclasses of ModelError so a caller can tell failures apart by `name` (and `instanceof`)
 * while the retry policy keeps reading only `status` / `retryable` / `retryAfterMs`.
 * `LoopchartError` sets `name` from the concrete class, so these names are stable.
 */

/** The stream carried something that is not a valid chunk. Retrying would most likely repeat it. */
export class MalformedStreamError extends ModelError {
  constructor(detail: string, options: { cause?: unknown } = {}) {
    super(`malformed stream chunk: ${detail}`, { retryable: false, cause: options.cause });
  }
}

/** No byte (or stream part) arrived for `readTimeoutMs`. The connection is presumed dead. */
export class ReadTimeoutError extends ModelError {
  readonly timeoutMs: number;
  constructor(timeoutMs: number) {
    super(`read timeout: no data from the model for ${timeoutMs} ms`, { retryable: true });
    this.timeoutMs = timeoutMs;
  }
}

/**
 * The whole call took longer than its deadline (`deadlineMs`, default 10 minutes), however busy the
 * stream was: endless keep-alive comments or endless text keep a read timeout happy forever.
 * Not retryable: the attempt already used a whole deadline, and a retry wrapper repeating it would
 * multiply the wait by its attempt count. Raise `deadlineMs` for models that legitimately run longer.
 *
 * @example
 * ```ts
 * const model = openAICompatibleModel({ baseURL, model: 'gpt-4.1', deadlineMs: 20 * 60_000 });
 * // a call still streaming after 20 minutes rejects with ModelDeadlineError (error.deadlineMs === 1_200_000)
 * ```
 */
export class ModelDeadlineError extends ModelError {
  readonly deadlineMs: number;
  constructor(deadlineMs: number) {
    super(`the model call passed its deadline of ${deadlineMs} ms`, { retryable: false });
    this.deadlineMs = deadlineMs;
  }
}

/**
 * The error a cancelled call rejects with. Callers (and `fetch` conventions) recognise an abort by
 * `name === 'AbortError'`, so a custom abort reason is kept as `cause` rather than thrown as is.
 */
export function abortError(signal: AbortSignal): Error {
  const reason: unknown = signal.reason;
  if (reason instanceof Error && reason.name === 'AbortError') return reason;
  const error = new Error('the model call was aborted', { cause: reason });
  error.name = 'AbortError';
  return error;
}

export function isAbortError(error: unknown): boolean {
  return (error instanceof Error || error instanceof DOMException) && error.name === 'AbortError';
}

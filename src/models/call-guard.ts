import { InvalidConfigError } from '../errors.js';
import { abortError, ModelDeadlineError, ReadTimeoutError } from './errors.js';
import { MAX_TIMER_MS } from '../timer-bound.js';


/** Default overall deadline of one model call, stream included (see ModelDeadlineError). */
export const DEFAULT_MODEL_DEADLINE_MS = 10 * 60_000;

/**
 * Checks a timeout option: a positive number of ms, or `Infinity` to turn the timeout off.
 * Throws an InvalidConfigError at construction so a typo does not silently mean "no timeout".
 */
export function timeoutOption(name: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || Number.isNaN(value) || value <= 0) {
    throw new InvalidConfigError(`${name} must be a positive number of milliseconds (or Infinity for none), got ${String(value)}`);
  }
  return value;
}

/**
 * One model call's cancellation: the caller's signal plus an idle timer, folded into one
 * AbortSignal handed to the transport.
 *
 * The timer measures silence, not duration: `touch()` on every chunk restarts it (Node's
 * `Timeout#refresh` re-arms without allocating), so a long healthy stream lives while a stalled
 * one is cut after `readTimeoutMs` of nothing. It also covers the wait for response headers.
 * A second timer, never restarted, ends the whole call after `deadlineMs` however busy it is.
 */
export class CallGuard {
  private readonly controller = new AbortController();
  private readonly outer: AbortSignal;
  private readonly readTimeoutMs: number;
  private readonly deadlineMs: number;
  private timer: NodeJS.Timeout | undefined;
  private deadlineTimer: NodeJS.Timeout | undefined;
  private timedOut = false;
  private pastDeadline = false;
  private readonly listeners: Array<() => void> = [];
  private readonly onOuterAbort = (): void => this.abort(this.outer.reason);

  constructor(outer: AbortSignal, readTimeoutMs: number, deadlineMs: number = DEFAULT_MODEL_DEADLINE_MS) {
    this.outer = outer;
    this.readTimeoutMs = readTimeoutMs;
    this.deadlineMs = deadlineMs;
    if (outer.aborted) {
      this.controller.abort(outer.reason);
      return;
    }
    outer.addEventListener('abort', this.onOuterAbort, { once: true });
    if (Number.isFinite(readTimeoutMs) && readTimeoutMs > 0 && readTimeoutMs <= MAX_TIMER_MS) {
      this.timer = setTimeout(() => {
        this.timedOut = true;
        this.abort(new ReadTimeoutError(this.readTimeoutMs));
      }, readTimeoutMs);
    }
    if (Number.isFinite(deadlineMs) && deadlineMs > 0 && deadlineMs <= MAX_TIMER_MS) {
      this.deadlineTimer = setTimeout(() => {
        this.pastDeadline = true;
        this.abort(new ModelDeadlineError(this.deadlineMs));
      }, deadlineMs);
    }
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /** Data arrived: restart the idle timer. */
  touch(): void {
    this.timer?.refresh();
  }

  /** Runs `fn` when the call is cancelled or times out (e.g. to cancel a reader that ignores signals). */
  onAbort(fn: () => void): void {
    if (this.controller.signal.aborted) fn();
    else this.listeners.push(fn);
  }

  /**
   * Settles with `promise`, or rejects with the stop reason as soon as the call is cancelled or
   * times out: for transports that do not honour the signal themselves.
   */
  race<T>(promise: PromiseLike<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.onAbort(() => reject(this.stopReason() ?? new Error('call stopped')));
      promise.then(resolve, reject);
    });
  }

  /** Throws the error that explains why the call stopped, if it was cancelled or timed out. */
  throwIfStopped(): void {
    const reason = this.stopReason();
    if (reason !== undefined) throw reason;
  }

  /**
   * Why the call stopped, with the caller's abort winning over a timeout that raced it:
   * an AbortError for a cancel, a ModelDeadlineError for a call that ran too long, a
   * ReadTimeoutError for silence, undefined when none happened
   * (then the transport failed on its own and the caller maps that error).
   */
  stopReason(): Error | undefined {
    if (this.outer.aborted) return abortError(this.outer);
    if (this.pastDeadline) return new ModelDeadlineError(this.deadlineMs);
    if (this.timedOut) return new ReadTimeoutError(this.readTimeoutMs);
    return undefined;
  }

  /** Releases the timer and the listener on the caller's signal; aborts the transport if still open. */
  dispose(): void {
    this.clearTimers();
    this.outer.removeEventListener('abort', this.onOuterAbort);
    // Closing the transport after a complete reply is harmless; after an early exit it frees the socket.
    if (!this.controller.signal.aborted) this.controller.abort();
  }

  private clearTimers(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    if (this.deadlineTimer !== undefined) clearTimeout(this.deadlineTimer);
  }

  private abort(reason: unknown): void {
    this.clearTimers();
    if (this.controller.signal.aborted) return;
    this.controller.abort(reason);
    for (const fn of this.listeners.splice(0)) fn();
  }
}

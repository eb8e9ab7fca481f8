import { abortError, ReadTimeoutError } from './errors.js';

/**
 * One model call's cancellation: the caller's signal plus an idle timer, folded into one
 * AbortSignal handed to the transport.
 *
 * The timer measures silence, not duration: `touch()` on every chunk restarts it (Node's
 * `Timeout#refresh` re-arms without allocating), so a long healthy stream lives while a stalled
 * one is cut after `readTimeoutMs` of nothing. It also covers the wait for response headers.
 */
export class CallGuard {
  private readonly controller = new AbortController();
  private readonly outer: AbortSignal;
  private readonly readTimeoutMs: number;
  private timer: NodeJS.Timeout | undefined;
  private timedOut = false;
  private readonly listeners: Array<() => void> = [];
  private readonly onOuterAbort = (): void => this.abort(this.outer.reason);

  constructor(outer: AbortSignal, readTimeoutMs: number) {
    this.outer = outer;
    this.readTimeoutMs = readTimeoutMs;
    if (outer.aborted) {
      this.controller.abort(outer.reason);
      return;
    }
    outer.addEventListener('abort', this.onOuterAbort, { once: true });
    if (Number.isFinite(readTimeoutMs) && readTimeoutMs > 0) {
      this.timer = setTimeout(() => {
        this.timedOut = true;
        this.abort(new ReadTimeoutError(this.readTimeoutMs));
      }, readTimeoutMs);
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
   * an AbortError for a cancel, a ReadTimeoutError for silence, undefined when neither happened
   * (then the transport failed on its own and the caller maps that error).
   */
  stopReason(): Error | undefined {
    if (this.outer.aborted) return abortError(this.outer);
    if (this.timedOut) return new ReadTimeoutError(this.readTimeoutMs);
    return undefined;
  }

  /** Releases the timer and the listener on the caller's signal; aborts the transport if still open. */
  dispose(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.outer.removeEventListener('abort', this.onOuterAbort);
    // Closing the transport after a complete reply is harmless; after an early exit it frees the socket.
    if (!this.controller.signal.aborted) this.controller.abort();
  }

  private abort(reason: unknown): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    if (this.controller.signal.aborted) return;
    this.controller.abort(reason);
    for (const fn of this.listeners.splice(0)) fn();
  }
}

import { MAX_TIMER_MS } from '../../timer-bound.js';

/**
 * Runs one user check (a guardrail, a tool policy, runAgent's approve) with its own signal,
 * aborted when the run's signal aborts or the timeout passes. A check that returns at once is not
 * timed; one that returns a promise races its timeout and the run: a check that never settles
 * rejects with `onTimeout()` when the time is up, or with the run's abort reason when the run
 * ends first (its promise is left behind: nothing waits on it any more, no timer either).
 */
export async function timedCheck<T>(
  run: AbortSignal,
  timeoutMs: number,
  check: (signal: AbortSignal) => T | Promise<T>,
  onTimeout: () => Error,
): Promise<unknown> {
  const controller = new AbortController();
  let stop: ((reason: unknown) => void) | undefined;
  const onAbort = () => {
    controller.abort(run.reason);
    stop?.(run.reason);
  };
  run.addEventListener('abort', onAbort, { once: true });
  if (run.aborted) controller.abort(run.reason);
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    const value: unknown = check(controller.signal);
    if (!value || typeof (value as { then?: unknown }).then !== 'function') return value;
    const cut = new Promise<never>((_, reject) => {
      stop = reject;
      if (run.aborted) reject(run.reason);
      if (!Number.isFinite(timeoutMs) || timeoutMs > MAX_TIMER_MS) return;
      timer = setTimeout(() => {
        const error = onTimeout();
        controller.abort(error);
        reject(error);
      }, timeoutMs);
    });
    return await Promise.race([value, cut]);
  } finally {
    clearTimeout(timer);
    run.removeEventListener('abort', onAbort);
  }
}

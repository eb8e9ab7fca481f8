/**
 * Runs one user check (a guardrail, a tool policy) with its own signal, aborted when the run's
 * signal aborts or the timeout passes. A check that returns at once is not timed; one that
 * returns a promise races its timeout, and a check that never settles rejects with `onTimeout()`
 * when the time is up (its promise is left behind: nothing waits on it any more).
 */
export async function timedCheck<T>(
  run: AbortSignal,
  timeoutMs: number,
  check: (signal: AbortSignal) => T | Promise<T>,
  onTimeout: () => Error,
): Promise<unknown> {
  const controller = new AbortController();
  const onAbort = () => controller.abort(run.reason);
  run.addEventListener('abort', onAbort, { once: true });
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    const value: unknown = check(controller.signal);
    if (!value || typeof (value as { then?: unknown }).then !== 'function') return value;
    const timeout = new Promise<never>((_, reject) => {
      if (!Number.isFinite(timeoutMs)) return;
      timer = setTimeout(() => {
        const error = onTimeout();
        controller.abort(error);
        reject(error);
      }, timeoutMs);
    });
    return await Promise.race([value, timeout]);
  } finally {
    clearTimeout(timer);
    run.removeEventListener('abort', onAbort);
  }
}

import type { CallEnd } from './call.js';

/** A call's hold on a session: released with how the call ended (null: it failed), which every waiting repeat is told. */
export interface Hold {
  release(end: CallEnd | null): void;
}

/**
 * The sessions this process's calls drive, each with how its call will end. One call drives a
 * session at a time (two drivers would fight over its writes): a repeat of a running call waits
 * for that call's end and answers it, instead of running again or being refused. Other processes
 * on the same store do not see these holds.
 */
export class HeldSessions {
  readonly #held = new Map<string, { scope: string; end: Promise<CallEnd | null> }>();

  /**
   * Takes `sessionId` for a call of the caller with `scope`, or answers the end of the call that
   * holds it, or `foreign` when that call is another caller's (a session two callers named at
   * once: the one that did not make it must not learn it runs). Synchronous, so that of two
   * waiters woken by one end, only the first takes the session.
   */
  take(sessionId: string, scope: string): Hold | Promise<CallEnd | null> | 'foreign' {
    const held = this.#held.get(sessionId);
    if (held) return held.scope === scope ? held.end : 'foreign';
    let settle!: (end: CallEnd | null) => void;
    this.#held.set(sessionId, { scope, end: new Promise((resolve) => (settle = resolve)) });
    return {
      release: (end) => {
        // Gone before the end is told: a waiter that takes over finds the session free.
        this.#held.delete(sessionId);
        settle(end);
      },
    };
  }
}

/** `promise`'s value, or `gave-up` after `ms` or once `signal` aborts (the waiting call's client cancelled or left). */
export async function within<T>(promise: Promise<T>, ms: number, signal: AbortSignal): Promise<T | 'gave-up'> {
  if (signal.aborted || ms <= 0) return 'gave-up';
  let timer: NodeJS.Timeout | undefined;
  let onAbort!: () => void;
  const gaveUp = new Promise<'gave-up'>((resolve) => {
    timer = setTimeout(() => resolve('gave-up'), ms);
    onAbort = () => resolve('gave-up');
    signal.addEventListener('abort', onAbort, { once: true });
  });
  try {
    return await Promise.race([promise, gaveUp]);
  } finally {
    clearTimeout(timer);
    signal.removeEventListener('abort', onAbort);
  }
}

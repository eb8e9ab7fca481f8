/**
 * SIGINT (Ctrl-C) or SIGTERM (how Docker, Kubernetes and systemd stop a process) for the CLI's
 * servers (`view`, `scheduler`): listened for from the start of the command, so a signal while it
 * opens the store or loads a module stops the command cleanly instead of killing the process.
 */

/** The next stop signal, listened for until it comes or `off()`. */
export interface StopSignals {
  readonly next: Promise<NodeJS.Signals>;
  off(): void;
}

/**
 * Listens for the next SIGINT or SIGTERM; `off()` stops listening (call it on every way out).
 *
 * @example
 * ```ts
 * const stop = watchStopSignals();
 * try {
 *   await stop.next;
 * } finally {
 *   stop.off();
 * }
 * ```
 */
export function watchStopSignals(): StopSignals {
  let on: (signal: NodeJS.Signals) => void = () => {};
  const off = () => {
    process.off('SIGINT', on);
    process.off('SIGTERM', on);
  };
  const next = new Promise<NodeJS.Signals>((resolve) => {
    on = (signal) => {
      off();
      resolve(signal);
    };
  });
  process.on('SIGINT', on);
  process.on('SIGTERM', on);
  return { next, off };
}

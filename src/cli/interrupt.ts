/**
 * Ctrl-C (SIGINT) or SIGTERM while a run goes, for the CLI and the demo: the first signal cancels
 * the run (the driver sends `cancel`: in-flight calls are aborted and answered as interrupted, the
 * session keeps its coherent history), the second exits at once, whatever is still running (a tool
 * that ignores its abort signal keeps the process alive otherwise). SIGTERM is how Docker,
 * Kubernetes and systemd stop a process: it takes the same path, with its own exit status.
 */

/** The exit code of a process stopped by Ctrl-C (128 + SIGINT). */
export const INTERRUPTED_EXIT_CODE = 130;

/** The exit code of a process stopped by SIGTERM (128 + SIGTERM). */
export const TERMINATED_EXIT_CODE = 143;

/** The signals that stop a run, each with its exit code and the line saying what happens. */
const STOPS = {
  SIGINT: { exitCode: INTERRUPTED_EXIT_CODE, line: 'interrupted: cancelling the run, the session is kept (Ctrl-C again quits at once)' },
  SIGTERM: { exitCode: TERMINATED_EXIT_CODE, line: 'terminated (SIGTERM): cancelling the run, the session is kept (a second signal quits at once)' },
} as const;

type StopSignal = keyof typeof STOPS;

export interface InterruptWatch {
  /** True once Ctrl-C was pressed or SIGTERM came. */
  readonly pressed: boolean;
  /** The exit code for the signal that came first: 130 (Ctrl-C) or 143 (SIGTERM); 130 before any. */
  readonly exitCode: number;
  /** What a Ctrl-C does, for a source of its own (readline takes Ctrl-C from a terminal it reads). */
  press(): void;
  /** Stops listening, unless a signal came: then a second one still exits at once. */
  detach(): void;
}

/**
 * Listens for SIGINT and SIGTERM until `detach()`; `say` prints the one line telling the user what happens.
 *
 * @example
 * ```ts
 * const watch = watchInterrupt(() => session.send({ type: 'cancel' }), (line) => process.stderr.write(`${line}\n`));
 * const output = await session.whenIdle();
 * watch.detach();
 * ```
 */
export function watchInterrupt(cancel: () => void, say: (line: string) => void): InterruptWatch {
  let first: StopSignal | undefined;
  const onSignal = (signal: StopSignal) => {
    if (first) process.exit(STOPS[signal].exitCode);
    first = signal;
    say(STOPS[signal].line);
    cancel();
  };
  const onSigint = () => onSignal('SIGINT');
  const onSigterm = () => onSignal('SIGTERM');
  process.on('SIGINT', onSigint);
  process.on('SIGTERM', onSigterm);
  return {
    get pressed() {
      return first !== undefined;
    },
    get exitCode() {
      return STOPS[first ?? 'SIGINT'].exitCode;
    },
    press: onSigint,
    detach: () => {
      if (first) return;
      process.off('SIGINT', onSigint);
      process.off('SIGTERM', onSigterm);
    },
  };
}

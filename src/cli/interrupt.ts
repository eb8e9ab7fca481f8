/**
 * Ctrl-C while a run goes, for the CLI and the demo: the first press cancels the run (the driver
 * sends `cancel`: in-flight calls are aborted and answered as interrupted, the session keeps its
 * coherent history), the second exits at once with 130, whatever is still running (a tool that
 * ignores its abort signal keeps the process alive otherwise).
 */

/** The exit code of a process stopped by Ctrl-C (128 + SIGINT). */
export const INTERRUPTED_EXIT_CODE = 130;

export interface InterruptWatch {
  /** True once Ctrl-C was pressed. */
  readonly pressed: boolean;
  /** What a Ctrl-C does, for a source of its own (readline takes Ctrl-C from a terminal it reads). */
  press(): void;
  /** Stops listening, unless Ctrl-C was pressed: then a second press still exits at once. */
  detach(): void;
}

/**
 * Listens for SIGINT until `detach()`; `say` prints the one line telling the user what happens.
 *
 * @example
 * ```ts
 * const watch = watchInterrupt(() => session.send({ type: 'cancel' }), (line) => process.stderr.write(`${line}\n`));
 * const output = await session.whenIdle();
 * watch.detach();
 * ```
 */
export function watchInterrupt(cancel: () => void, say: (line: string) => void): InterruptWatch {
  let pressed = false;
  const onSigint = () => {
    if (pressed) process.exit(INTERRUPTED_EXIT_CODE);
    pressed = true;
    say('interrupted: cancelling the run, the session is kept (Ctrl-C again quits at once)');
    cancel();
  };
  process.on('SIGINT', onSigint);
  return {
    get pressed() {
      return pressed;
    },
    press: onSigint,
    detach: () => {
      if (!pressed) process.off('SIGINT', onSigint);
    },
  };
}

/** An error the CLI reports as one line on stderr, exiting with `exitCode`. */
export class CliError extends Error {
  readonly exitCode: number;
  constructor(message: string, options: { cause?: unknown; exitCode?: number } = {}) {
    super(message, { cause: options.cause });
    this.name = 'CliError';
    this.exitCode = options.exitCode ?? 1;
  }
}

/** Bad arguments: exit code 2, with the usage. */
export class UsageError extends CliError {
  constructor(message: string) {
    super(message, { exitCode: 2 });
    this.name = 'UsageError';
  }
}

/**
 * A command the CLI does not have: one line naming the closest command when one is close (or the
 * commands there are), exit code 2, and no usage text (the whole help buried the line that mattered).
 */
export class UnknownCommandError extends UsageError {
  constructor(message: string) {
    super(message);
    this.name = 'UnknownCommandError';
  }
}

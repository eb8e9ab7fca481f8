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

import { parseArgs, type ParseArgsConfig } from 'node:util';
import { SCHEMA_NAME } from '../stores/postgres-schema.js';
import { UsageError } from './errors.js';
import type { CommandOptions, Io } from './sessions.js';
import { parseLocation } from './store.js';
import { closestCommand } from './suggest.js';

/** The options every command group on a store takes: where the store is, and the help. */
const STORE_ARGS = {
  store: { type: 'string' },
  schema: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

type ArgOptions = NonNullable<ParseArgsConfig['options']>;

/**
 * A command group's arguments, strict, with positionals, its own options beside `--store`,
 * `--schema` and `--help`; what `parseArgs` refuses is a `UsageError` (exit 2).
 */
export function parseCommandArgs<const O extends ArgOptions>(argv: string[], options: O): ReturnType<typeof parseArgs<{ args: string[]; allowPositionals: true; strict: true; options: typeof STORE_ARGS & O }>> {
  let parsed;
  try {
    parsed = parseArgs({ args: argv, allowPositionals: true, strict: true, options: { ...STORE_ARGS, ...options } as typeof STORE_ARGS & O });
  } catch (error) {
    throw argumentError(error, { ...STORE_ARGS, ...options });
  }
  refuseEmptyValues(parsed.values);
  // Checked here, not by the store: its TypeError read "unexpected error", exit 1.
  const { schema } = parsed.values as { schema?: string | undefined };
  if (schema !== undefined && !SCHEMA_NAME.test(schema)) {
    throw new UsageError(`--schema ${JSON.stringify(schema)} is no schema name: lower-case letters, digits and _, not starting with a digit, at most 63`);
  }
  return parsed;
}

/**
 * An option given an empty value (`--store ""`, `--store=`) is bad usage: read as left out, a
 * script's unset variable (`--store "$STORE"`) sent the command to the default store, and
 * `--agent "$AGENT"` ran a demo session with the demo's agent.
 */
function refuseEmptyValues(values: Record<string, unknown>): void {
  for (const [name, value] of Object.entries(values)) {
    if (value === '' || (Array.isArray(value) && value.includes(''))) throw new UsageError(`--${name} is empty: give it a value, or leave it out`);
  }
}

/**
 * What `parseArgs` refused, as a `UsageError`. An unknown option is named with the closest option
 * the command has, when one is close (`--dryrun`: did you mean `--dry-run`?): Node's own text
 * goes on about putting a positional argument after `--`, which misleads someone who mistyped an
 * option or guessed one from the API (`--model`).
 */
export function argumentError(error: unknown, options: ArgOptions): UsageError {
  const message = (error as Error).message;
  const unknown = (error as { code?: unknown }).code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' ? /^Unknown option '(-[^']*)'/.exec(message) : null;
  if (!unknown) return new UsageError(message);
  const flag = unknown[1]!;
  const closest = flag.startsWith('--') ? closestCommand(flag.slice(2), Object.keys(options)) : undefined;
  return new UsageError(`unknown option '${flag}'${closest ? `; did you mean '--${closest}'?` : ''}`);
}

/** The store a command names: `--store`, else `$LOOPCHART_STORE` (else none: `parseLocation` gives the default file). */
export const storeArgument = (values: { store?: string | undefined }): string | undefined => values.store ?? process.env.LOOPCHART_STORE;

/** The store a command works on (see `storeArgument`); `--schema` for PostgreSQL. */
export function storeCommandOptions(values: { store?: string | undefined; schema?: string | undefined }, io: Io): CommandOptions {
  return {
    location: parseLocation(storeArgument(values)),
    ...(values.schema !== undefined && { schema: values.schema }),
    full: false,
    io,
  };
}

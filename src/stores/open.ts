import { InvalidConfigError, MissingPackageError } from '../errors.js';
import { isMissingPackage } from '../missing-package.js';
import type { SessionStore } from './session-store.js';

/**
 * One string picks a store, for the CLI, examples and child processes:
 *   undefined or ''            the embedded default, SQLite at `.loopchart/loopchart.db`
 *   'memory:'                  a fresh in-memory store
 *   'postgres://…' / 'postgresql://…'   PostgreSQL (tables in `options.schema`, default `loopchart`)
 *   'sqlite:PATH' or any other PATH      SQLite at PATH
 * Backends are imported on demand: through this function a PostgreSQL user never loads the
 * native SQLite addon, nor a SQLite user `pg`.
 *
 * @example
 * ```ts
 * const store = await openSessionStore();                          // SQLite at .loopchart/loopchart.db
 * const shared = await openSessionStore(process.env.DATABASE_URL); // postgres://… when set
 * const scratch = await openSessionStore('memory:');
 * ```
 */
export async function openSessionStore(location?: string, options: { schema?: string | undefined } = {}): Promise<SessionStore> {
  // Checked here: a number threw a raw TypeError ('startsWith is not a function'), a schema of 5 was dropped.
  if (location !== undefined && typeof location !== 'string') throw new InvalidConfigError(`openSessionStore: the location must be a string, got ${typeof location}`);
  if (typeof options !== 'object' || options === null) throw new InvalidConfigError('openSessionStore: options must be an object { schema? }');
  if (options.schema !== undefined && typeof options.schema !== 'string') throw new InvalidConfigError(`openSessionStore: schema must be a string, got ${typeof options.schema}`);
  if (location === 'memory:') {
    const { MemorySessionStore } = await import('./memory.js');
    return new MemorySessionStore();
  }
  if (location !== undefined && /^postgres(ql)?:\/\//.test(location)) {
    const { PostgresSessionStore } = await import('./postgres.js').catch((error: unknown) => {
      throw isMissingPackage(error, 'pg') ? new MissingPackageError('pg', 'a postgres:// store', { cause: error }) : error;
    });
    return new PostgresSessionStore({ connectionString: location, ...(options.schema ? { schema: options.schema } : {}) });
  }
  const { SqliteSessionStore } = await import('./sqlite.js');
  const path = location?.startsWith('sqlite:') ? location.slice('sqlite:'.length) : location;
  return new SqliteSessionStore(path ? { path } : {});
}

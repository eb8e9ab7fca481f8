import { createRequire } from 'node:module';
import { LoopchartError } from '../errors.js';

/**
 * The two SQLite bindings the store runs on, behind the few calls it makes. `node:sqlite` is
 * built into Node from 22.5 (no native compile at install); better-sqlite3 is the optional
 * dependency that serves Node 20. Both are loaded on first use, never at import.
 */
export type SqliteDriverName = 'node:sqlite' | 'better-sqlite3';

export interface SqliteStatement {
  run(...params: unknown[]): { changes: number | bigint };
  get(...params: unknown[]): unknown;
  all(...params: unknown[]): unknown[];
}

export interface SqliteConnection {
  readonly driver: SqliteDriverName;
  exec(sql: string): void;
  prepare(sql: string): SqliteStatement;
  /** BEGIN IMMEDIATE (takes the write lock first) or DEFERRED; rolls back when `work` throws. */
  transaction<T>(mode: 'immediate' | 'deferred', work: () => T): T;
  close(): void;
}

/** What a driver error means to the store, whichever binding raised it. */
export type SqliteFailure = 'busy' | 'primary-key' | 'other';

/** No usable SQLite binding: Node is older than 22.5 and better-sqlite3 is not installed (or not built). */
export class SqliteDriverUnavailableError extends LoopchartError {
  readonly driver: SqliteDriverName | 'auto';
  constructor(driver: SqliteDriverName | 'auto', problem: string, options?: { cause?: unknown }) {
    super('SqliteDriverUnavailable', `no SQLite driver (${driver}): ${problem}`, options);
    this.driver = driver;
  }
}

// Extended result codes are the primary code in the low byte.
const SQLITE_BUSY = 5;
const SQLITE_CONSTRAINT_PRIMARYKEY = 1555;

/** Classifies an error from either binding without loading either. */
export function sqliteFailure(error: unknown): SqliteFailure {
  const e = error as { code?: unknown; errcode?: unknown } | null;
  if (!e || typeof e !== 'object') return 'other';
  // node:sqlite: code ERR_SQLITE_ERROR with the numeric extended code in `errcode`.
  if (typeof e.errcode === 'number') {
    if ((e.errcode & 0xff) === SQLITE_BUSY) return 'busy';
    if (e.errcode === SQLITE_CONSTRAINT_PRIMARYKEY) return 'primary-key';
    return 'other';
  }
  // better-sqlite3: SqliteError with the symbolic extended code.
  if (typeof e.code === 'string') {
    if (e.code.startsWith('SQLITE_BUSY')) return 'busy';
    if (e.code === 'SQLITE_CONSTRAINT_PRIMARYKEY') return 'primary-key';
  }
  return 'other';
}

interface NodeSqliteModule {
  DatabaseSync: new (path: string, options?: Record<string, unknown>) => {
    exec(sql: string): void;
    prepare(sql: string): SqliteStatement;
    close(): void;
  };
}

type BetterSqliteConstructor = new (path: string, options?: { timeout?: number }) => {
  exec(sql: string): void;
  prepare(sql: string): SqliteStatement;
  close(): void;
  readonly open: boolean;
};

/** `node:sqlite` when this Node has it (22.5+; 22.5-22.12 only with --experimental-sqlite). */
function loadNodeSqlite(): NodeSqliteModule | undefined {
  try {
    return process.getBuiltinModule?.('node:sqlite') as NodeSqliteModule | undefined;
  } catch {
    return undefined;
  }
}

function loadBetterSqlite(): BetterSqliteConstructor {
  try {
    // createRequire, not import: the store's constructor is synchronous, and a bundler must not
    // pull the addon into a build that never opens a SQLite store.
    return createRequire(import.meta.url)('better-sqlite3') as BetterSqliteConstructor;
  } catch (error) {
    throw new SqliteDriverUnavailableError(
      'better-sqlite3',
      `better-sqlite3 did not load (${(error as Error).message.split('\n')[0]}). ` +
        `Run Node 22.5 or later to use the built-in node:sqlite, or install it: npm install better-sqlite3`,
      { cause: error },
    );
  }
}

/** The driver a store uses when none is named: node:sqlite where Node has it, else better-sqlite3. */
export function defaultSqliteDriver(): SqliteDriverName {
  return loadNodeSqlite() ? 'node:sqlite' : 'better-sqlite3';
}

/** Opens `path` with the named driver (default: `defaultSqliteDriver()`). */
export function openSqlite(path: string, options: { driver?: SqliteDriverName; busyTimeoutMs: number }): SqliteConnection {
  const driver = options.driver ?? defaultSqliteDriver();
  if (driver === 'node:sqlite') {
    const module = loadNodeSqlite();
    if (!module) {
      throw new SqliteDriverUnavailableError(
        driver,
        `this Node (${process.version}) has no node:sqlite; it needs Node 22.5 or later (22.13 without a flag). Use driver 'better-sqlite3' instead`,
      );
    }
    const db = new module.DatabaseSync(path);
    try {
      // Set by pragma, not the constructor's `timeout` option, which older 22.x lack.
      db.exec(`PRAGMA busy_timeout = ${Math.trunc(options.busyTimeoutMs)}`);
    } catch (error) {
      db.close();
      throw error;
    }
    return connection(driver, db);
  }
  const Database = loadBetterSqlite();
  return connection(driver, new Database(path, { timeout: options.busyTimeoutMs }));
}

function connection(driver: SqliteDriverName, db: { exec(sql: string): void; prepare(sql: string): SqliteStatement; close(): void }): SqliteConnection {
  let open = true;
  return {
    driver,
    exec: (sql) => db.exec(sql),
    prepare: (sql) => db.prepare(sql),
    transaction(mode, work) {
      db.exec(mode === 'immediate' ? 'BEGIN IMMEDIATE' : 'BEGIN DEFERRED');
      let result;
      try {
        result = work();
      } catch (error) {
        rollback(db);
        throw error;
      }
      try {
        db.exec('COMMIT');
      } catch (error) {
        // A COMMIT that fails (SQLITE_BUSY on a deferred reader, a full disk) can leave the
        // transaction open: end it so the connection stays usable.
        rollback(db);
        throw error;
      }
      return result;
    },
    close() {
      if (!open) return;
      open = false;
      db.close();
    },
  };
}

function rollback(db: { exec(sql: string): void }): void {
  try {
    db.exec('ROLLBACK');
  } catch {
    // No transaction left to roll back (SQLite already rolled it back on the error).
  }
}

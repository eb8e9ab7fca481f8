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

/**
 * What a driver error means to the store, whichever binding raised it; 'other' is any other
 * SQLite error, and null is an error that did not come from SQLite at all.
 */
export type SqliteFailure = 'busy' | 'primary-key' | 'corrupt' | 'full' | 'cantopen' | 'readonly' | 'other';

/** No usable SQLite binding: Node is older than 22.13 and better-sqlite3 is not installed (or not built). */
export class SqliteDriverUnavailableError extends LoopchartError {
  readonly driver: SqliteDriverName | 'auto';
  constructor(driver: SqliteDriverName | 'auto', problem: string, options?: { cause?: unknown }) {
    super('SqliteDriverUnavailable', `no SQLite driver (${driver}): ${problem}`, options);
    this.driver = driver;
  }
}

// Extended result codes are the primary code in the low byte.
const SQLITE_CONSTRAINT_PRIMARYKEY = 1555;
const PRIMARY_CODES: ReadonlyMap<number, SqliteFailure> = new Map([
  [5, 'busy'], // SQLITE_BUSY
  [8, 'readonly'], // SQLITE_READONLY
  [11, 'corrupt'], // SQLITE_CORRUPT
  [26, 'corrupt'], // SQLITE_NOTADB
  [13, 'full'], // SQLITE_FULL
  [14, 'cantopen'], // SQLITE_CANTOPEN
]);
const SYMBOLIC_CODES: ReadonlyMap<string, SqliteFailure> = new Map([
  ['SQLITE_BUSY', 'busy'],
  ['SQLITE_READONLY', 'readonly'],
  ['SQLITE_CORRUPT', 'corrupt'],
  ['SQLITE_NOTADB', 'corrupt'],
  ['SQLITE_FULL', 'full'],
  ['SQLITE_CANTOPEN', 'cantopen'],
]);

/** Classifies an error from either binding without loading either; null when SQLite did not raise it. */
export function sqliteFailure(error: unknown): SqliteFailure | null {
  const e = error as { code?: unknown; errcode?: unknown } | null;
  if (!e || typeof e !== 'object') return null;
  // node:sqlite: code ERR_SQLITE_ERROR with the numeric extended code in `errcode`.
  if (typeof e.errcode === 'number') {
    if (e.errcode === SQLITE_CONSTRAINT_PRIMARYKEY) return 'primary-key';
    return PRIMARY_CODES.get(e.errcode & 0xff) ?? 'other';
  }
  if (e.code === 'ERR_SQLITE_ERROR') return 'other';
  // better-sqlite3: SqliteError with the symbolic extended code (SQLITE_BUSY_SNAPSHOT, …).
  if (typeof e.code === 'string' && e.code.startsWith('SQLITE_')) {
    if (e.code === 'SQLITE_CONSTRAINT_PRIMARYKEY') return 'primary-key';
    const primary = /^SQLITE_[A-Z]+/.exec(e.code)![0];
    return SYMBOLIC_CODES.get(primary) ?? 'other';
  }
  return null;
}

interface NodeSqliteModule {
  DatabaseSync: new (path: string, options?: Record<string, unknown>) => {
    exec(sql: string): void;
    prepare(sql: string): SqliteStatement;
    close(): void;
  };
}

type BetterSqliteConstructor = new (path: string, options?: { timeout?: number | undefined; readonly?: boolean | undefined }) => {
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
        `Run Node 22.13 or later to use the built-in node:sqlite, or install it: npm install better-sqlite3`,
      { cause: error },
    );
  }
}

/** The driver a store uses when none is named: node:sqlite where Node has it, else better-sqlite3. */
export function defaultSqliteDriver(): SqliteDriverName {
  return loadNodeSqlite() ? 'node:sqlite' : 'better-sqlite3';
}

/**
 * Opens `path` with the named driver (default: `defaultSqliteDriver()`); `readOnly` opens an
 * existing file for reading only (SQLite refuses every write on that connection).
 */
export function openSqlite(path: string, options: { driver?: SqliteDriverName | undefined; busyTimeoutMs: number; readOnly?: boolean | undefined }): SqliteConnection {
  const driver = options.driver ?? defaultSqliteDriver();
  if (driver === 'node:sqlite') {
    const module = loadNodeSqlite();
    if (!module) {
      throw new SqliteDriverUnavailableError(
        driver,
        `this Node (${process.version}) has no node:sqlite; it needs Node 22.13 or later. Use driver 'better-sqlite3' instead`,
      );
    }
    const db = new module.DatabaseSync(path, { readOnly: options.readOnly === true });
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
  return connection(driver, new Database(path, { timeout: options.busyTimeoutMs, readonly: options.readOnly === true }));
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

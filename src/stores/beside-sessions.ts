import type { PoolClient } from 'pg';
import { StoreSchemaVersionError } from './errors.js';
import { openSqlite, type SqliteConnection, type SqliteDriverName } from './sqlite-driver.js';
import { readOnlyError, readOnlyFile } from './sqlite-read-only.js';

/**
 * Tables a feature keeps beside a store's sessions (schedules, memory), in the same SQLite file or
 * PostgreSQL schema: made once, under a layout version of their own in the store's `meta` table,
 * and refused (`StoreSchemaVersionError`) when another build made them in another layout.
 */
export interface BesideTables {
  /** What the tables hold, for error messages: `schedules`, `memory`. */
  feature: string;
  /** The `meta` key of their layout version. */
  metaKey: string;
  version: number;
}

/** A feature's connection to a SQLite store's file, and whether this process may only read the file. */
export interface BesideConnection {
  readonly db: SqliteConnection;
  /** The file may only be read (see `readOnlyFile`): the connection reads and nothing more. */
  readonly readOnly: boolean;
  /** Throws the store's `StoreError` saying the file is read-only when it is; called before every write. */
  refuseIfReadOnly(): void;
}

/**
 * A connection of its own to a SQLite store's file (the store's is its own business), in WAL mode
 * with the store's busy timeout, the tables made (`create('main')`, DDL) or their version checked
 * in one IMMEDIATE transaction: across processes on the file, one makes them.
 *
 * A file this process may only read (a backup, mode 0444, a read-only mount) is opened read-only
 * and left as it is: no WAL switch, no tables made (writes). Tables it does not hold yet (no
 * schedule or memory was ever kept in it) are stood in for by empty ones in the connection's own
 * TEMP schema (`create('temp')`), so a read finds nothing rather than failing; every write is
 * refused (`refuseIfReadOnly`) before it could reach those stand-ins.
 */
export function openSqliteBeside(path: string, tables: BesideTables & { create: (schema: 'main' | 'temp') => string; driver?: SqliteDriverName | undefined }): BesideConnection {
  const readOnly = readOnlyFile(path);
  const where = `SQLite store ${path} (${tables.feature})`;
  const db = openSqlite(path, { busyTimeoutMs: 5_000, readOnly, ...(tables.driver && { driver: tables.driver }) });
  const versionOf = (): string | undefined => {
    const found = db.prepare('SELECT value FROM meta WHERE key = ?').get(tables.metaKey) as { value: string } | undefined;
    if (found && found.value !== String(tables.version)) throw new StoreSchemaVersionError(where, found.value, tables.version);
    return found?.value;
  };
  try {
    if (readOnly) {
      const hasMeta = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'").get() !== undefined;
      if (!hasMeta || versionOf() === undefined) db.exec(tables.create('temp'));
    } else {
      db.exec('PRAGMA journal_mode = WAL');
      db.transaction('immediate', () => {
        db.exec('CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)');
        if (versionOf() !== undefined) return;
        db.exec(tables.create('main'));
        db.prepare('INSERT INTO meta (key, value) VALUES (?, ?)').run(tables.metaKey, String(tables.version));
      });
    }
  } catch (error) {
    db.close();
    throw error;
  }
  return {
    db,
    readOnly,
    refuseIfReadOnly() {
      if (readOnly) throw readOnlyError(where);
    },
  };
}

/** What a feature needs of a PostgreSQL store: `PostgresSessionStore.besideSessions` (typed here, so `pg` is not loaded for other stores). */
export interface PostgresTables {
  readonly schema: string;
  besideSessions<T>(work: (client: PoolClient, quotedSchema: string) => Promise<T>): Promise<T>;
}

/** A store that keeps tables beside its sessions in PostgreSQL (a `PostgresSessionStore`). */
export function isPostgresTables(store: object): store is PostgresTables {
  return typeof (store as Partial<PostgresTables>).besideSessions === 'function' && typeof (store as Partial<PostgresTables>).schema === 'string';
}

/** One transaction on the store's pool, the feature's tables made or checked first. */
export type BesideTransaction = <T>(work: (client: PoolClient, quotedSchema: string) => Promise<T>) => Promise<T>;

/**
 * Transactions on a PostgreSQL store for a feature's tables: the first call makes them
 * (`create(quotedSchema)`, DDL) or checks their version, under the store's own migration lock, so
 * concurrent first uses wait; a first use that failed (a server that was down) is tried again by
 * the next call instead of failing every later one.
 */
export function postgresBeside(store: PostgresTables, tables: BesideTables & { create: (quotedSchema: string) => string }): BesideTransaction {
  let ready: Promise<void> | undefined;
  const migrate = async (client: PoolClient, s: string): Promise<void> => {
    await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`loopchart schema ${store.schema}`]);
    const found = await client.query<{ value: string }>(`SELECT value FROM ${s}.meta WHERE key = $1`, [tables.metaKey]);
    const version = found.rows[0]?.value;
    if (version !== undefined && version !== String(tables.version)) throw new StoreSchemaVersionError(`PostgreSQL schema ${store.schema} (${tables.feature})`, version, tables.version);
    if (version !== undefined) return;
    await client.query(tables.create(s));
    await client.query(`INSERT INTO ${s}.meta (key, value) VALUES ($1, $2)`, [tables.metaKey, String(tables.version)]);
  };
  return async (work) => {
    ready ??= store.besideSessions(migrate).catch((error: unknown) => {
      ready = undefined;
      throw error;
    });
    await ready;
    return store.besideSessions(work);
  };
}

import type { SqliteConnection } from './sqlite-driver.js';
import { StoreError, StoreSchemaVersionError } from './errors.js';

/**
 * The SQLite layout and its migrations. `meta.schema_version` says which layout a file has;
 * opening a file runs the missing migrations in one write transaction and refuses a file
 * from a newer loopchart instead of guessing at it.
 */

/** MIGRATIONS[i] takes a file from version i to i + 1; the last index + 1 is the current version. */
const MIGRATIONS: readonly string[] = [
  `
  -- The small state row: one per session, rewritten by every step.
  CREATE TABLE sessions (
    session_id    TEXT PRIMARY KEY,
    version       INTEGER NOT NULL,
    message_count INTEGER NOT NULL,
    state         TEXT NOT NULL,
    created_at    INTEGER NOT NULL,  -- ms since epoch
    updated_at    INTEGER NOT NULL
  );
  -- No index on updated_at: every step would move its entry (more pages per step) to speed up
  -- list(), which is rare and scans only these small rows.

  -- The append-only log. A rowid table (not WITHOUT ROWID) because tool outputs can be large
  -- and SQLite keeps big rows best out of the primary-key b-tree; the primary key index still
  -- gives load its ordered range scan and truncation its position range.
  CREATE TABLE messages (
    session_id TEXT NOT NULL,
    position   INTEGER NOT NULL,
    message    TEXT NOT NULL,
    PRIMARY KEY (session_id, position)
  );

  -- Tool results recorded the moment each tool finishes, outside the step transaction.
  CREATE TABLE tool_journal (
    session_id   TEXT NOT NULL,
    turn_key     TEXT NOT NULL,
    tool_call_id TEXT NOT NULL,
    result       TEXT NOT NULL,
    recorded_at  INTEGER NOT NULL,
    PRIMARY KEY (session_id, turn_key, tool_call_id)
  );
  `,
  `
  -- The session's trace (observability: timings, retries, approvals, resumes), append-only and
  -- written in the transaction of the step it belongs to (or on its own for what happens between
  -- steps). seq is global and only grows: the reader's cursor.
  CREATE TABLE trace (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL,
    entry      TEXT NOT NULL
  );
  CREATE INDEX trace_by_session ON trace (session_id, seq);
  `,
];

export const SQLITE_SCHEMA_VERSION = MIGRATIONS.length;

/** Creates or migrates the schema of an open database. Safe against a second process doing the same. */
export function migrateSqlite(db: SqliteConnection, where: string): void {
  // IMMEDIATE takes the write lock before reading the version, so two processes opening a new
  // file at once cannot both run the same migration.
  db.transaction('immediate', () => {
    db.exec('CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)');
    const row = db.prepare("SELECT value FROM meta WHERE key = 'schema_version'").get() as { value: string } | undefined;
    const found = row === undefined ? 0 : Number(row.value);
    if (!Number.isInteger(found) || found < 0 || found > SQLITE_SCHEMA_VERSION) {
      throw new StoreSchemaVersionError(where, String(row?.value), SQLITE_SCHEMA_VERSION);
    }
    for (let version = found; version < SQLITE_SCHEMA_VERSION; version++) db.exec(MIGRATIONS[version]!);
    if (found !== SQLITE_SCHEMA_VERSION) {
      db.prepare("INSERT INTO meta (key, value) VALUES ('schema_version', ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value").run(
        String(SQLITE_SCHEMA_VERSION),
      );
    }
  });
}

/**
 * The schema check of a file opened read-only: it reads the version and writes nothing. A file of
 * an older layout is refused rather than read half-migrated: migrating is a write, so a writer
 * must open it once first.
 */
export function checkSqliteSchemaReadOnly(db: SqliteConnection, where: string): void {
  const hasMeta = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'").get() !== undefined;
  const row = hasMeta ? (db.prepare("SELECT value FROM meta WHERE key = 'schema_version'").get() as { value: string } | undefined) : undefined;
  const found = row === undefined ? 0 : Number(row.value);
  if (!Number.isInteger(found) || found < 0 || found > SQLITE_SCHEMA_VERSION) {
    throw new StoreSchemaVersionError(where, String(row?.value), SQLITE_SCHEMA_VERSION);
  }
  if (found < SQLITE_SCHEMA_VERSION) {
    throw new StoreError(
      where,
      `the file is read-only and holds store schema version ${found}, older than this loopchart's ${SQLITE_SCHEMA_VERSION}: ` +
        'it needs upgrading, which is a write; open it once with write access (any loopchart command that opens the store does it), then read it',
    );
  }
}

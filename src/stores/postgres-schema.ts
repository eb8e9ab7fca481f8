import type { PoolClient } from 'pg';
import { StoreSchemaVersionError } from './errors.js';

/**
 * The PostgreSQL layout and its migrations, created on first use. All tables live in one
 * schema of their own (default `loopchart`), so they never collide with the application's
 * tables and a test can get a private copy by naming a fresh schema.
 */

/** The schema names the store takes: an unquoted lower-case identifier PostgreSQL keeps as is. */
export const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

/** Quoted identifier for a schema name we validated ourselves (no user SQL reaches the server). */
export function quoteSchema(schema: string): string {
  if (!SCHEMA_NAME.test(schema)) {
    throw new TypeError(`schema name ${JSON.stringify(schema)} must match [a-z_][a-z0-9_]* (at most 63 characters)`);
  }
  return `"${schema}"`;
}

/** MIGRATIONS[i] takes a schema from version i to i + 1. `$s` is the quoted schema name. */
const MIGRATIONS: readonly string[] = [
  `
  CREATE TABLE $s.sessions (
    session_id    text PRIMARY KEY,
    version       integer NOT NULL,
    message_count integer NOT NULL,
    state         text NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now()
  );
  -- text, not jsonb: we store exactly the bytes we wrote, skip the server-side parse on every
  -- append, and read back through the same validating decoder as SQLite. Cast to jsonb to query.
  CREATE TABLE $s.messages (
    session_id text NOT NULL,
    position   integer NOT NULL,
    message    text NOT NULL,
    PRIMARY KEY (session_id, position)
  );
  CREATE TABLE $s.tool_journal (
    session_id   text NOT NULL,
    turn_key     text NOT NULL,
    tool_call_id text NOT NULL,
    result       text NOT NULL,
    seq          bigserial NOT NULL,  -- recording order
    recorded_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session_id, turn_key, tool_call_id)
  );
  `,
  `
  -- The session's trace (observability), append-only, written with the step it belongs to.
  CREATE TABLE $s.trace (
    seq        bigserial PRIMARY KEY,
    session_id text NOT NULL,
    entry      text NOT NULL
  );
  CREATE INDEX trace_by_session ON $s.trace (session_id, seq);
  `,
];

export const POSTGRES_SCHEMA_VERSION = MIGRATIONS.length;

/** Creates or migrates the schema; runs inside the caller's transaction. */
export async function migratePostgres(client: PoolClient, schema: string): Promise<void> {
  const s = quoteSchema(schema);
  // Serializes concurrent first uses (several processes starting at once): CREATE ... IF NOT
  // EXISTS alone still races on the catalog and fails with a unique violation.
  await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`loopchart schema ${schema}`]);
  await client.query(`CREATE SCHEMA IF NOT EXISTS ${s}`);
  await client.query(`CREATE TABLE IF NOT EXISTS ${s}.meta (key text PRIMARY KEY, value text NOT NULL)`);
  const result = await client.query<{ value: string }>(`SELECT value FROM ${s}.meta WHERE key = 'schema_version'`);
  const raw = result.rows[0]?.value;
  const found = raw === undefined ? 0 : Number(raw);
  if (!Number.isInteger(found) || found < 0 || found > POSTGRES_SCHEMA_VERSION) {
    throw new StoreSchemaVersionError(`PostgreSQL schema ${schema}`, String(raw), POSTGRES_SCHEMA_VERSION);
  }
  for (let version = found; version < POSTGRES_SCHEMA_VERSION; version++) {
    await client.query(MIGRATIONS[version]!.replaceAll('$s', s));
  }
  if (found !== POSTGRES_SCHEMA_VERSION) {
    await client.query(
      `INSERT INTO ${s}.meta (key, value) VALUES ('schema_version', $1) ON CONFLICT (key) DO UPDATE SET value = excluded.value`,
      [String(POSTGRES_SCHEMA_VERSION)],
    );
  }
}

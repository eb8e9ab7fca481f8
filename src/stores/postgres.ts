import { createHash } from 'node:crypto';
import pg from 'pg';
import type { Pool, PoolClient, QueryResult, QueryResultRow } from 'pg';
import type { ToolMessage } from '../schemas.js';
import { decodeJournalEntry, decodeSession } from './decode.js';
import type { LogRow } from './decode.js';
import { LoopchartError } from '../errors.js';
import { checkKnownKeys, optionKeys } from '../known-keys.js';
import { CorruptSessionError, SessionBusyError, StoreCorruptError, StoreError, StoreFullError, StoreUnavailableError } from './errors.js';
import { maskedAddress } from './masked-address.js';
import { migratePostgres, quoteSchema } from './postgres-schema.js';
import type { SessionStore, SessionSummary, StepWrite, StoredSession, TraceRecord } from './session-store.js';
import { checkSessionId, decodeTraceRow, encodeJournalEntry, encodeStep, encodeTraceEntries, planStep, traceLimit } from './step.js';
import type { EncodedStep } from './step.js';

export interface PostgresStoreOptions {
  /** e.g. `postgres://user@host:5432/db`. Ignored when `pool` is given. */
  connectionString?: string | undefined;
  /** Share the application's pool instead; `close()` then leaves it open. */
  pool?: Pool | undefined;
  /** Schema holding the tables, created on first use. Default `loopchart`. */
  schema?: string | undefined;
  /** Pool size when we create the pool. Default 10. */
  max?: number | undefined;
  /**
   * How long opening a connection may take, when we create the pool (default 10 s); then the
   * call fails with `StoreUnavailableError`. A given `pool` keeps its own settings.
   */
  connectTimeoutMs?: number | undefined;
  /**
   * How long the server may take to answer one query, when we create the pool (default 30 s);
   * then the call fails with `StoreUnavailableError` and the connection is dropped, so a server
   * that stops answering never leaves a session waiting for ever. A given `pool` keeps its own.
   */
  queryTimeoutMs?: number | undefined;
}

/** How long opening a connection may take (`PostgresStoreOptions.connectTimeoutMs`). */
const DEFAULT_PG_CONNECT_TIMEOUT_MS = 10_000;
/** How long one query may wait for the server (`PostgresStoreOptions.queryTimeoutMs`). */
const DEFAULT_PG_QUERY_TIMEOUT_MS = 30_000;

interface HeadRow {
  version: number;
  message_count: number;
  state: string;
}

/** Node's socket errors that mean the server cannot be reached. */
const UNREACHABLE = new Set(['ECONNREFUSED', 'ECONNRESET', 'ENOTFOUND', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN', 'EPIPE']);
/** SQLSTATEs beyond class 08 that mean the server is going or gone, or takes no connection. */
const GONE = new Set(['57P01', '57P02', '57P03', '53300']);

/**
 * What pg threw, as the loopchart store error it means (the pg error kept as `cause`): an
 * unreachable or lost server, a full disk, damaged data, or any other failure. loopchart's own
 * errors pass through unchanged.
 */
function postgresStoreError(where: string, error: unknown): unknown {
  if (LoopchartError.isInstance(error)) return error;
  const code = (error as { code?: unknown } | null)?.code;
  const message = error instanceof Error ? error.message : String(error);
  const detail = typeof code === 'string' ? `${code}: ${message}` : message;
  if (typeof code === 'string' && (UNREACHABLE.has(code) || GONE.has(code) || code.startsWith('08'))) {
    return new StoreUnavailableError(where, detail, { cause: error });
  }
  // pg reports a dropped connection or a connect timeout without a code.
  if (code === undefined && /connection|timeout/i.test(message)) return new StoreUnavailableError(where, detail, { cause: error });
  if (code === '53100') return new StoreFullError(where, detail, { cause: error });
  if (code === 'XX001' || code === 'XX002') return new StoreCorruptError(where, detail, { cause: error });
  return new StoreError(where, detail, { cause: error });
}

/** A timeout option as pg takes it: a positive whole number of ms. */
function positiveMs(name: string, value: number): number {
  if (!Number.isInteger(value) || value <= 0) throw new TypeError(`PostgresSessionStore: ${name} must be a positive whole number of ms, got ${String(value)}`);
  return value;
}

/** A unique violation on the log's primary key: only rows past message_count can collide. */
function strayRowError(sessionId: string, error: unknown): unknown {
  if ((error as { code?: string | undefined }).code !== '23505') return error;
  return new CorruptSessionError(sessionId, { kind: 'log' }, 'a stray row already sits where this step appends', { cause: error });
}

const POSTGRES_OPTION_KEYS = optionKeys<PostgresStoreOptions>()({ connectionString: true, pool: true, schema: true, max: true, connectTimeoutMs: true, queryTimeoutMs: true });

/**
 * The store for many processes on one database. Each step is one transaction whose version
 * check is the UPDATE itself (`WHERE version = $expected`): under READ COMMITTED a concurrent
 * committed step makes the row re-checked against the new version, so of two writers that
 * loaded the same version exactly one updates the row and the other matches none.
 *
 * @example
 * ```ts
 * import { DurableSession } from 'loopchart';
 * import { PostgresSessionStore } from 'loopchart/postgres';
 *
 * const store = new PostgresSessionStore({ connectionString: process.env.DATABASE_URL, schema: 'loopchart' });
 * const session = await DurableSession.open({ machine, store, sessionId: 'ticket-42' });
 * await session.close();
 * await store.close();
 * ```
 */
export class PostgresSessionStore implements SessionStore {
  readonly schema: string;
  private readonly pool: Pool;
  private readonly ownsPool: boolean;
  private readonly s: string;
  /** Prefix for prepared-statement names: unique per schema, short enough for NAMEDATALEN. */
  private readonly tag: string;
  private readyPromise: Promise<void> | undefined;
  private closed = false;
  /** Names the store in errors without the connection string (it may hold a password). */
  private readonly where: string;

  constructor(options: PostgresStoreOptions) {
    checkKnownKeys(options, POSTGRES_OPTION_KEYS, 'PostgresSessionStore');
    this.schema = options.schema ?? 'loopchart';
    this.s = quoteSchema(this.schema);
    this.where = options.pool ? `the given pool (schema ${this.schema})` : (options.connectionString ? maskedAddress(options.connectionString) : 'PostgreSQL (connection string not shown)');
    this.tag = `lc_${createHash('sha1').update(this.schema).digest('hex').slice(0, 10)}_`;
    if (options.pool) {
      this.pool = options.pool;
      this.ownsPool = false;
    } else {
      if (!options.connectionString) throw new TypeError('PostgresSessionStore needs a connectionString or a pool');
      this.pool = new pg.Pool({
        connectionString: options.connectionString,
        max: options.max ?? 10,
        connectionTimeoutMillis: positiveMs('connectTimeoutMs', options.connectTimeoutMs ?? DEFAULT_PG_CONNECT_TIMEOUT_MS),
        query_timeout: positiveMs('queryTimeoutMs', options.queryTimeoutMs ?? DEFAULT_PG_QUERY_TIMEOUT_MS),
      });
      // An idle client whose server went away emits 'error'; unhandled, that kills the
      // process. The next query gets a fresh connection (or a proper error), so ignore it.
      this.pool.on('error', () => {});
      this.ownsPool = true;
    }
  }

  async load(sessionId: string): Promise<StoredSession | undefined> {
    return this.guard(async () => {
      checkSessionId(sessionId);
      await this.ready();
      // REPEATABLE READ: the head row and the log come from one snapshot even if a step commits
      // between the two SELECTs.
      return this.transaction('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY', async (client) => {
        const head = await this.query<HeadRow>(client, 'head', `SELECT version, message_count, state FROM ${this.s}.sessions WHERE session_id = $1`, [
          sessionId,
        ]);
        const row = head.rows[0];
        if (!row) return undefined;
        const log = await this.query<LogRow>(
          client,
          'log',
          `SELECT position, message FROM ${this.s}.messages WHERE session_id = $1 ORDER BY position`,
          [sessionId],
        );
        return decodeSession(sessionId, { version: row.version, messageCount: row.message_count, stateJson: row.state }, log.rows);
      });
    });
  }

  async apply(sessionId: string, write: StepWrite): Promise<number> {
    return this.guard(async () => {
      const step = encodeStep(sessionId, write);
      // Rules of a create that need no database (e.g. truncateTo on an empty log) fail before any round trip.
      if (step.expectedVersion === 0) planStep(sessionId, undefined, step);
      await this.ready();
      if (step.expectedVersion !== 0 && step.truncateTo !== undefined) {
        return this.transaction('BEGIN', (client) => this.applyWithTruncation(client, sessionId, step));
      }
      return this.applyInOneStatement(sessionId, step);
    });
  }

  async list(): Promise<SessionSummary[]> {
    return this.guard(async () => {
      await this.ready();
      const result = await this.pool.query<{
        session_id: string;
        version: number;
        message_count: number;
        created_at: Date;
        updated_at: Date;
      }>(
        `SELECT session_id, version, message_count, created_at, updated_at FROM ${this.s}.sessions ORDER BY updated_at DESC, session_id`,
      );
      return result.rows.map((row) => ({
        sessionId: row.session_id,
        version: row.version,
        messageCount: row.message_count,
        createdAt: row.created_at,
        updatedAt: row.updated_at,
      }));
    });
  }

  async journalToolResult(sessionId: string, turnKey: string, result: ToolMessage): Promise<void> {
    return this.guard(async () => {
      const entry = encodeJournalEntry(sessionId, turnKey, result);
      await this.ready();
      await this.query(
        this.pool,
        'journal_insert',
        `INSERT INTO ${this.s}.tool_journal (session_id, turn_key, tool_call_id, result) VALUES ($1, $2, $3, $4)
         ON CONFLICT (session_id, turn_key, tool_call_id) DO NOTHING`,
        [sessionId, turnKey, entry.toolCallId, entry.json],
      );
    });
  }

  async journaledToolResults(sessionId: string, turnKey: string): Promise<ToolMessage[]> {
    return this.guard(async () => {
      checkSessionId(sessionId);
      await this.ready();
      const result = await this.query<{ tool_call_id: string; result: string }>(
        this.pool,
        'journal_read',
        `SELECT tool_call_id, result FROM ${this.s}.tool_journal WHERE session_id = $1 AND turn_key = $2 ORDER BY seq`,
        [sessionId, turnKey],
      );
      return result.rows.map((row) => decodeJournalEntry(sessionId, turnKey, row.tool_call_id, row.result));
    });
  }

  async appendTrace(sessionId: string, entries: readonly unknown[]): Promise<void> {
    return this.guard(async () => {
      const rows = encodeTraceEntries(sessionId, entries);
      if (rows.length === 0) return;
      await this.ready();
      await this.insertTrace(this.pool, sessionId, rows);
    });
  }

  /** One statement: the entries keep their order (unnest is ordered) and land together. */
  private async insertTrace(on: Pool | PoolClient, sessionId: string, rows: readonly string[]): Promise<void> {
    await this.query(
      on,
      'trace_insert',
      `INSERT INTO ${this.s}.trace (session_id, entry) SELECT $1, e FROM unnest($2::text[]) WITH ORDINALITY AS t(e, n) ORDER BY n`,
      [sessionId, rows],
    );
  }

  async readTrace(sessionId: string, afterSeq = 0, limit?: number): Promise<TraceRecord[]> {
    return this.guard(async () => {
      checkSessionId(sessionId);
      const most = traceLimit(limit);
      await this.ready();
      // LIMIT NULL is no limit in PostgreSQL.
      const result = await this.query<{ seq: string; entry: string }>(
        this.pool,
        'trace_read',
        `SELECT seq, entry FROM ${this.s}.trace WHERE session_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`,
        [sessionId, afterSeq, most],
      );
      return result.rows.map((row) => decodeTraceRow(sessionId, Number(row.seq), row.entry));
    });
  }

  /**
   * One transaction on this store's pool, once its tables exist, for tables kept beside the
   * sessions in its schema (`quotedSchema`): the schedules (src/schedules/postgres-backend.ts).
   * What pg throws leaves as the store error it means, as from every other call.
   * @internal
   */
  async besideSessions<T>(work: (client: PoolClient, quotedSchema: string) => Promise<T>): Promise<T> {
    return this.guard(async () => {
      await this.ready();
      return this.transaction('BEGIN', (client) => work(client, this.s));
    });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.ownsPool) await this.pool.end();
  }

  /**
   * The common step (create, or append without truncation) as ONE statement: one round trip
   * and its own transaction. The head row's UPDATE (or the create's INSERT) is the version
   * check; the log INSERT, the journal DELETE and the trace INSERT join on its result, so they
   * write nothing when the check fails, and a failure of any undoes the whole statement.
   */
  private async applyInOneStatement(sessionId: string, step: EncodedStep): Promise<number> {
    const n = step.rows.length;
    const create = step.expectedVersion === 0;
    // ON CONFLICT DO NOTHING: a concurrent create waits for ours and then inserts nothing,
    // instead of failing with a unique violation we would have to tell apart from others.
    const head = create
      ? `INSERT INTO ${this.s}.sessions (session_id, version, message_count, state) VALUES ($1, 1, $2::integer, $3)
         ON CONFLICT (session_id) DO NOTHING
         RETURNING version, 0 AS start`
      : `UPDATE ${this.s}.sessions
            SET version = version + 1, message_count = message_count + $2::integer, state = $3, updated_at = now()
          WHERE session_id = $1 AND version = $8
          RETURNING version, message_count - $2::integer AS start`;
    const text = `WITH head AS (${head}),
      log AS (
        INSERT INTO ${this.s}.messages (session_id, position, message)
        SELECT $1, head.start + (t.o::integer - 1), t.m FROM head, unnest($4::text[]) WITH ORDINALITY AS t(m, o)
      ),
      journal AS (
        DELETE FROM ${this.s}.tool_journal AS j USING head
         WHERE j.session_id = $1 AND ($5::boolean OR j.turn_key = ANY($6::text[]))
      ),
      trace AS (
        INSERT INTO ${this.s}.trace (session_id, entry)
        SELECT $1, t.e FROM head, unnest($7::text[]) WITH ORDINALITY AS t(e, n) ORDER BY t.n
      )
      SELECT version FROM head`;
    const clearAll = step.clearJournal === 'all';
    const turnKeys = Array.isArray(step.clearJournal) ? step.clearJournal : [];
    const values = [sessionId, n, step.stateJson, step.rows, clearAll, turnKeys, step.traceRows];
    let result: QueryResult<{ version: number }>;
    try {
      result = await this.query<{ version: number }>(this.pool, create ? 'create' : 'step', text, create ? values : [...values, step.expectedVersion]);
    } catch (error) {
      throw strayRowError(sessionId, error);
    }
    const row = result.rows[0];
    if (!row) throw await this.rejection(this.pool, sessionId, step);
    return row.version;
  }

  /** A rewind: the DELETE must land before the INSERT reuses its positions, so two statements in a transaction. */
  private async applyWithTruncation(client: PoolClient, sessionId: string, step: EncodedStep): Promise<number> {
    const n = step.rows.length;
    // The version check, the truncation bound and the head update in one statement; the row
    // lock it takes holds until COMMIT.
    const updated = await this.query<{ version: number }>(
      client,
      'step_truncate',
      `UPDATE ${this.s}.sessions
          SET version = version + 1, message_count = $3::integer + $4::integer, state = $5, updated_at = now()
        WHERE session_id = $1 AND version = $2 AND $3::integer <= message_count
        RETURNING version`,
      [sessionId, step.expectedVersion, step.truncateTo, n, step.stateJson],
    );
    const row = updated.rows[0];
    if (!row) throw await this.rejection(client, sessionId, step);
    // A range on the primary key: cost is the rows removed, not the log length.
    await this.query(client, 'truncate', `DELETE FROM ${this.s}.messages WHERE session_id = $1 AND position >= $2`, [
      sessionId,
      step.truncateTo,
    ]);
    if (n > 0) {
      try {
        await this.query(
          client,
          'append',
          `INSERT INTO ${this.s}.messages (session_id, position, message)
           SELECT $1, $2::integer + (t.o::integer - 1), t.m FROM unnest($3::text[]) WITH ORDINALITY AS t(m, o)`,
          [sessionId, step.truncateTo, step.rows],
        );
      } catch (error) {
        throw strayRowError(sessionId, error);
      }
    }
    if (step.clearJournal !== undefined) {
      await this.query(
        client,
        'journal_clear',
        `DELETE FROM ${this.s}.tool_journal WHERE session_id = $1 AND ($2::boolean OR turn_key = ANY($3::text[]))`,
        [sessionId, step.clearJournal === 'all', Array.isArray(step.clearJournal) ? step.clearJournal : []],
      );
    }
    if (step.traceRows.length > 0) await this.insertTrace(client, sessionId, step.traceRows);
    return row.version;
  }

  /** Why a step's write matched no row: read the head and let planStep name the error. */
  private async rejection(client: Pool | PoolClient, sessionId: string, step: EncodedStep): Promise<Error> {
    const head = await this.query<HeadRow>(client, 'head', `SELECT version, message_count, state FROM ${this.s}.sessions WHERE session_id = $1`, [
      sessionId,
    ]);
    const row = head.rows[0];
    try {
      planStep(sessionId, row && { version: row.version, messageCount: row.message_count }, step);
    } catch (error) {
      return error as Error;
    }
    // Unreachable while versions only grow; kept so a surprise is still a typed conflict.
    return new SessionBusyError(sessionId, step.expectedVersion, row?.version ?? 0);
  }

  /** Every public call runs here: what pg throws leaves as a loopchart store error. */
  private async guard<T>(work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } catch (error) {
      throw postgresStoreError(this.where, error);
    }
  }

  private ready(): Promise<void> {
    if (this.closed) return Promise.reject(new StoreError(this.where, 'the store is closed', { code: 'StoreClosed' }));
    this.readyPromise ??= this.transaction('BEGIN', (client) => migratePostgres(client, this.schema)).catch((error: unknown) => {
      // Not cached: a server that was down at first use should not poison the store forever.
      this.readyPromise = undefined;
      throw error;
    });
    return this.readyPromise;
  }

  /** Named, so each connection prepares the statement once and reuses its plan. */
  private query<R extends QueryResultRow = QueryResultRow>(
    on: Pool | PoolClient,
    name: string,
    text: string,
    values: unknown[],
  ): Promise<QueryResult<R>> {
    return on.query<R>({ name: this.tag + name, text, values });
  }

  private async transaction<T>(begin: string, work: (client: PoolClient) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    let broken = false;
    try {
      await client.query(begin);
      const result = await work(client);
      await client.query('COMMIT');
      return result;
    } catch (error) {
      try {
        await client.query('ROLLBACK');
      } catch {
        broken = true; // the connection is unusable: let the pool drop it
      }
      throw error;
    } finally {
      client.release(broken);
    }
  }
}

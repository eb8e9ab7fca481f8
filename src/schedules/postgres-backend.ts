import type { PoolClient } from 'pg';
import { postgresBeside, type BesideTransaction, type PostgresTables } from '../stores/beside-sessions.js';
import { planClaim, type StoredText } from './claim.js';
import { decodeScheduleRow, decodeScheduleRows, endedTick, releasedLease, type Claim, type RowsRead, type ScheduleBackend, type ScheduleRow, type TickEnd } from './row.js';

/**
 * Schedules of a `PostgresSessionStore`, in a `schedules` table of its schema, on its pool (every
 * call one transaction through the store's `besideSessions`, so its timeouts and typed errors
 * hold here too). The row is JSON text, read back through `ScheduleRowSchema`; the columns the
 * scheduler selects on (agent, paused, next_at, the lease) are kept beside it by every write.
 * Claims take turns under a transaction-scoped advisory lock of the schema: each sees the leases
 * the one before it committed, so across processes a due schedule goes to one scheduler and two
 * schedules on one session are not leased at once (row locks alone would let two claims each
 * lease a different row of one session). The due rows are locked `FOR UPDATE SKIP LOCKED`: one a
 * renewal or an end is writing is passed over, not waited for.
 */

/** The version of this table's layout, in the store's `meta` table under its own key. */
const SCHEMA_VERSION = 1;
const META_KEY = 'schedules_schema_version';

/** The schedules tables in the store's schema (`s`: the schema, quoted). */
const SCHEDULE_TABLES = (s: string): string => `
  CREATE TABLE ${s}.schedules (
    id          text PRIMARY KEY,
    agent       text NOT NULL,
    paused      boolean NOT NULL,
    next_at     bigint,
    lease_owner text,
    lease_until bigint,
    created_at  bigint NOT NULL,
    row         text NOT NULL
  );
  -- The idle loop's question (what is due next) and the claim's scan read this index.
  CREATE INDEX schedules_due ON ${s}.schedules (next_at) WHERE NOT paused;
`;

export class PostgresScheduleBackend implements ScheduleBackend {
  /** One transaction, the table made (or its version checked) first, once per backend. */
  readonly #tx: BesideTransaction;
  readonly #where: string;
  /** The advisory lock claims on this schema take turns under. */
  readonly #claimLock: string;

  constructor(store: PostgresTables) {
    this.#tx = postgresBeside(store, { feature: 'schedules', metaKey: META_KEY, version: SCHEMA_VERSION, create: SCHEDULE_TABLES });
    this.#where = `PostgreSQL store (schema ${store.schema}, schedules)`;
    this.#claimLock = `loopchart schedules claim ${store.schema}`;
  }

  async #write(client: PoolClient, s: string, row: ScheduleRow): Promise<void> {
    await client.query(`UPDATE ${s}.schedules SET agent = $1, paused = $2, next_at = $3, lease_owner = $4, lease_until = $5, row = $6 WHERE id = $7`, [
      row.agent,
      row.paused,
      row.nextAt,
      row.leaseOwner,
      row.leaseUntil,
      JSON.stringify(row),
      row.id,
    ]);
  }

  /** Reads (row locked), changes and writes one row in one transaction, if `change` gives a new row. */
  #update(id: string, change: (row: ScheduleRow) => ScheduleRow | undefined): Promise<boolean> {
    return this.#tx(async (client, s) => {
      const found = await client.query<{ row: string }>(`SELECT row FROM ${s}.schedules WHERE id = $1 FOR UPDATE`, [id]);
      const text = found.rows[0]?.row;
      const next = text === undefined ? undefined : change(decodeScheduleRow(text, this.#where));
      if (!next) return false;
      await this.#write(client, s, next);
      return true;
    });
  }

  async insert(row: ScheduleRow): Promise<boolean> {
    return this.#tx(async (client, s) => {
      const result = await client.query(
        `INSERT INTO ${s}.schedules (id, agent, paused, next_at, lease_owner, lease_until, created_at, row) VALUES ($1, $2, $3, $4, NULL, NULL, $5, $6) ON CONFLICT (id) DO NOTHING`,
        [row.id, row.agent, row.paused, row.nextAt, row.createdAt, JSON.stringify(row)],
      );
      return result.rowCount === 1;
    });
  }

  async get(id: string): Promise<ScheduleRow | undefined> {
    return this.#tx(async (client, s) => {
      const found = await client.query<{ row: string }>(`SELECT row FROM ${s}.schedules WHERE id = $1`, [id]);
      const text = found.rows[0]?.row;
      return text === undefined ? undefined : decodeScheduleRow(text, this.#where);
    });
  }

  async list(): Promise<RowsRead> {
    return this.#tx(async (client, s) => {
      const found = await client.query<{ row: string }>(`SELECT row FROM ${s}.schedules ORDER BY created_at, id`);
      return decodeScheduleRows(found.rows.map(({ row }) => row), this.#where);
    });
  }

  async setPaused(id: string, paused: boolean, nextAt: number | null, now: number): Promise<boolean> {
    return this.#update(id, (row) => ({ ...row, paused, nextAt, updatedAt: now }));
  }

  async delete(id: string): Promise<boolean> {
    return this.#tx(async (client, s) => (await client.query(`DELETE FROM ${s}.schedules WHERE id = $1`, [id])).rowCount === 1);
  }

  async claim(owner: string, now: number, leaseMs: number, agents: readonly string[], limit: number): Promise<Claim> {
    if (agents.length === 0) return { claimed: [], unreadable: [], waiting: 0 };
    return this.#tx(async (client, s) => {
      await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [this.#claimLock]);
      // No LIMIT: rows passed over (unreadable, or their session held) must not hide the ones after them.
      const due = await client.query<StoredText>(
        `SELECT id, row AS text FROM ${s}.schedules
          WHERE NOT paused AND next_at <= $1 AND (lease_until IS NULL OR lease_until <= $1) AND agent = ANY($2::text[])
          ORDER BY next_at, id
          FOR UPDATE SKIP LOCKED`,
        [now, agents],
      );
      const leased = await client.query<StoredText>(`SELECT id, row AS text FROM ${s}.schedules WHERE lease_until IS NOT NULL`);
      const claim = planClaim({ owner, now, leaseMs }, due.rows, leased.rows, limit, this.#where);
      for (const row of claim.claimed) await this.#write(client, s, row);
      return claim;
    });
  }

  async renew(id: string, owner: string, until: number): Promise<boolean> {
    return this.#update(id, (row) => (row.leaseOwner === owner ? { ...row, leaseUntil: until } : undefined));
  }

  async startTick(id: string, owner: string, due: number, baseRun: number): Promise<boolean> {
    return this.#update(id, (row) => (row.leaseOwner === owner ? { ...row, tickDue: due, tickBaseRun: baseRun } : undefined));
  }

  async endTick(id: string, owner: string, end: TickEnd, now: number): Promise<boolean> {
    return this.#update(id, (row) => (row.leaseOwner === owner ? endedTick(row, end, now) : undefined));
  }

  async release(id: string, owner: string, now: number, at: number): Promise<boolean> {
    return this.#update(id, (row) => (row.leaseOwner === owner ? releasedLease(row, now, at) : undefined));
  }

  async foreignAgents(agents: readonly string[]): Promise<{ id: string; agent: string }[]> {
    return this.#tx(async (client, s) => {
      const found = await client.query<{ id: string; agent: string }>(`SELECT id, agent FROM ${s}.schedules WHERE NOT (agent = ANY($1::text[])) ORDER BY created_at, id`, [agents]);
      return found.rows;
    });
  }

  async nextWake(agents: readonly string[], now: number): Promise<number | null> {
    if (agents.length === 0) return null;
    return this.#tx(async (client, s) => {
      // bigint comes back as text from pg: a time in ms fits a double exactly.
      const found = await client.query<{ at: string | null }>(
        `SELECT MIN(GREATEST(next_at, COALESCE(lease_until, 0))) AS at FROM ${s}.schedules
          WHERE NOT paused AND next_at IS NOT NULL AND (next_at > $2 OR lease_until > $2) AND agent = ANY($1::text[])`,
        [agents, now],
      );
      const at = found.rows[0]?.at;
      return at === null || at === undefined ? null : Number(at);
    });
  }

  /** The pool is the store's: its `close()` ends it. */
  async close(): Promise<void> {}
}

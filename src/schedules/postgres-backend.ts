import type { PoolClient } from 'pg';
import { postgresBeside, type BesideTransaction, type PostgresTables } from '../stores/beside-sessions.js';
import { decodeScheduleRow, endedTick, releasedLease, type ScheduleBackend, type ScheduleRow, type TickEnd } from './row.js';

/**
 * Schedules of a `PostgresSessionStore`, in a `schedules` table of its schema, on its pool (every
 * call one transaction through the store's `besideSessions`, so its timeouts and typed errors
 * hold here too). The row is JSON text, read back through `ScheduleRowSchema`; the columns the
 * scheduler selects on (agent, paused, next_at, the lease) are kept beside it by every write.
 * A claim locks the due rows it takes with `FOR UPDATE SKIP LOCKED`: a row another scheduler's
 * claim holds is passed over, and one it has just leased is seen with its lease, so across
 * processes a due schedule goes to one scheduler.
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

  constructor(store: PostgresTables) {
    this.#tx = postgresBeside(store, { feature: 'schedules', metaKey: META_KEY, version: SCHEMA_VERSION, create: SCHEDULE_TABLES });
    this.#where = `PostgreSQL store (schema ${store.schema}, schedules)`;
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

  async list(): Promise<ScheduleRow[]> {
    return this.#tx(async (client, s) => {
      const found = await client.query<{ row: string }>(`SELECT row FROM ${s}.schedules ORDER BY created_at, id`);
      return found.rows.map(({ row }) => decodeScheduleRow(row, this.#where));
    });
  }

  async setPaused(id: string, paused: boolean, nextAt: number | null, now: number): Promise<boolean> {
    return this.#update(id, (row) => ({ ...row, paused, nextAt, updatedAt: now }));
  }

  async delete(id: string): Promise<boolean> {
    return this.#tx(async (client, s) => (await client.query(`DELETE FROM ${s}.schedules WHERE id = $1`, [id])).rowCount === 1);
  }

  async claim(owner: string, now: number, leaseMs: number, agents: readonly string[], limit: number): Promise<ScheduleRow[]> {
    if (agents.length === 0) return [];
    return this.#tx(async (client, s) => {
      const due = await client.query<{ row: string }>(
        `SELECT row FROM ${s}.schedules
          WHERE NOT paused AND next_at <= $1 AND (lease_until IS NULL OR lease_until <= $1) AND agent = ANY($2::text[])
          ORDER BY next_at LIMIT $3
          FOR UPDATE SKIP LOCKED`,
        [now, agents, limit],
      );
      const taken = due.rows.map(({ row }) => ({ ...decodeScheduleRow(row, this.#where), leaseOwner: owner, leaseUntil: now + leaseMs, updatedAt: now }));
      for (const row of taken) await this.#write(client, s, row);
      return taken;
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

  async release(id: string, owner: string, now: number): Promise<boolean> {
    return this.#update(id, (row) => (row.leaseOwner === owner ? releasedLease(row, now) : undefined));
  }

  async foreignAgents(agents: readonly string[]): Promise<{ id: string; agent: string }[]> {
    return this.#tx(async (client, s) => {
      const found = await client.query<{ id: string; agent: string }>(`SELECT id, agent FROM ${s}.schedules WHERE NOT (agent = ANY($1::text[])) ORDER BY created_at, id`, [agents]);
      return found.rows;
    });
  }

  async nextWake(agents: readonly string[]): Promise<number | null> {
    if (agents.length === 0) return null;
    return this.#tx(async (client, s) => {
      // bigint comes back as text from pg: a time in ms fits a double exactly.
      const found = await client.query<{ at: string | null }>(
        `SELECT MIN(GREATEST(next_at, COALESCE(lease_until, 0))) AS at FROM ${s}.schedules WHERE NOT paused AND next_at IS NOT NULL AND agent = ANY($1::text[])`,
        [agents],
      );
      const at = found.rows[0]?.at;
      return at === null || at === undefined ? null : Number(at);
    });
  }

  /** The pool is the store's: its `close()` ends it. */
  async close(): Promise<void> {}
}

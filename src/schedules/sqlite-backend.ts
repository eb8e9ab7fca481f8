import { openSqliteBeside, type BesideConnection } from '../stores/beside-sessions.js';
import type { SqliteConnection } from '../stores/sqlite-driver.js';
import { planClaim, type StoredText } from './claim.js';
import { decodeScheduleRow, decodeScheduleRows, endedTick, releasedLease, type Claim, type RowsRead, type ScheduleBackend, type ScheduleRow, type TickEnd } from './row.js';

/**
 * Schedules of a `SqliteSessionStore`, in a `schedules` table of the same file, on a connection of
 * their own (the store's is its own business). The row is JSON; the columns the scheduler selects
 * on (agent, paused, next_at, the lease) are kept beside it by every write. A claim is one
 * IMMEDIATE transaction: across processes on the file, a due schedule goes to one scheduler.
 */

/** The version of this table's layout, in the store's `meta` table under its own key. */
const SCHEMA_VERSION = 1;
const META_KEY = 'schedules_schema_version';

/** The schedules' table in the store's file (`main`), or its empty stand-in for a read-only file (`temp`). */
const scheduleTables = (schema: 'main' | 'temp') => `
  CREATE TABLE ${schema}.schedules (
    id          TEXT PRIMARY KEY,
    agent       TEXT NOT NULL,
    paused      INTEGER NOT NULL,
    next_at     INTEGER,
    lease_owner TEXT,
    lease_until INTEGER,
    created_at  INTEGER NOT NULL,
    row         TEXT NOT NULL
  );
  -- The idle loop's question (what is due next) and the claim's scan read this index only.
  CREATE INDEX ${schema}.schedules_due ON schedules (next_at) WHERE paused = 0;
`;

export class SqliteScheduleBackend implements ScheduleBackend {
  readonly #db: SqliteConnection;
  readonly #where: string;
  /** Refuses a write to a file this process may only read, before it reaches SQLite. */
  readonly #refuseIfReadOnly: BesideConnection['refuseIfReadOnly'];

  constructor(path: string) {
    this.#where = `SQLite store ${path} (schedules)`;
    const opened = openSqliteBeside(path, { feature: 'schedules', metaKey: META_KEY, version: SCHEMA_VERSION, create: scheduleTables });
    this.#db = opened.db;
    this.#refuseIfReadOnly = opened.refuseIfReadOnly;
  }

  #write(row: ScheduleRow): void {
    this.#db
      .prepare('UPDATE schedules SET agent = ?, paused = ?, next_at = ?, lease_owner = ?, lease_until = ?, row = ? WHERE id = ?')
      .run(row.agent, row.paused ? 1 : 0, row.nextAt, row.leaseOwner, row.leaseUntil, JSON.stringify(row), row.id);
  }

  #read(id: string): ScheduleRow | undefined {
    const found = this.#db.prepare('SELECT row FROM schedules WHERE id = ?').get(id) as { row: string } | undefined;
    return found && decodeScheduleRow(found.row, this.#where);
  }

  async insert(row: ScheduleRow): Promise<boolean> {
    this.#refuseIfReadOnly();
    const result = this.#db
      .prepare('INSERT INTO schedules (id, agent, paused, next_at, lease_owner, lease_until, created_at, row) VALUES (?, ?, ?, ?, NULL, NULL, ?, ?) ON CONFLICT (id) DO NOTHING')
      .run(row.id, row.agent, row.paused ? 1 : 0, row.nextAt, row.createdAt, JSON.stringify(row));
    return Number(result.changes) === 1;
  }

  async get(id: string): Promise<ScheduleRow | undefined> {
    return this.#read(id);
  }

  async list(): Promise<RowsRead> {
    const rows = this.#db.prepare('SELECT row FROM schedules ORDER BY created_at, id').all() as { row: string }[];
    return decodeScheduleRows(rows.map(({ row }) => row), this.#where);
  }

  /** Reads, changes and writes one row in one write transaction, if `change` gives a new row. */
  #update(id: string, change: (row: ScheduleRow) => ScheduleRow | undefined): boolean {
    this.#refuseIfReadOnly();
    return this.#db.transaction('immediate', () => {
      const row = this.#read(id);
      const next = row && change(row);
      if (!next) return false;
      this.#write(next);
      return true;
    });
  }

  async setPaused(id: string, paused: boolean, nextAt: number | null, now: number): Promise<boolean> {
    return this.#update(id, (row) => ({ ...row, paused, nextAt, updatedAt: now }));
  }

  async delete(id: string): Promise<boolean> {
    this.#refuseIfReadOnly();
    return Number(this.#db.prepare('DELETE FROM schedules WHERE id = ?').run(id).changes) === 1;
  }

  async claim(owner: string, now: number, leaseMs: number, agents: readonly string[], limit: number): Promise<Claim> {
    this.#refuseIfReadOnly();
    if (agents.length === 0) return { claimed: [], unreadable: [], waiting: 0 };
    return this.#db.transaction('immediate', () => {
      // No LIMIT: rows passed over (unreadable, or their session held) must not hide the ones after them.
      const due = this.#db
        .prepare(
          `SELECT id, row AS text FROM schedules WHERE paused = 0 AND next_at <= ? AND (lease_until IS NULL OR lease_until <= ?)
           AND agent IN (${agents.map(() => '?').join(', ')}) ORDER BY next_at, id`,
        )
        .all(now, now, ...agents) as StoredText[];
      const leased = this.#db.prepare('SELECT id, row AS text FROM schedules WHERE lease_until IS NOT NULL').all() as StoredText[];
      const claim = planClaim({ owner, now, leaseMs }, due, leased, limit, this.#where);
      for (const row of claim.claimed) this.#write(row);
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
    return this.#update(id, (row) =>
      row.leaseOwner === owner
        ? endedTick(row, end, now)
        : undefined,
    );
  }

  async release(id: string, owner: string, now: number, at: number): Promise<boolean> {
    return this.#update(id, (row) => (row.leaseOwner === owner ? releasedLease(row, now, at) : undefined));
  }

  async foreignAgents(agents: readonly string[]): Promise<{ id: string; agent: string }[]> {
    return this.#db.prepare(`SELECT id, agent FROM schedules WHERE agent NOT IN (${agents.map(() => '?').join(', ')}) ORDER BY created_at, id`).all(...agents) as { id: string; agent: string }[];
  }

  async nextWake(agents: readonly string[], now: number): Promise<number | null> {
    if (agents.length === 0) return null;
    const found = this.#db
      .prepare(
        `SELECT MIN(MAX(next_at, COALESCE(lease_until, 0))) AS at FROM schedules WHERE paused = 0 AND next_at IS NOT NULL
         AND (next_at > ? OR lease_until > ?) AND agent IN (${agents.map(() => '?').join(', ')})`,
      )
      .get(now, now, ...agents) as { at: number | null } | undefined;
    return found?.at ?? null;
  }

  async close(): Promise<void> {
    this.#db.close();
  }
}

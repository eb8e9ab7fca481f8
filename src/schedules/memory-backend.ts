import type { MemoryBacking } from '../stores/memory.js';
import { planClaim } from './claim.js';
import { decodeScheduleRow, decodeScheduleRows, endedTick, gistOf, releasedLease, type Claim, type RowGist, type RowsRead, type ScheduleBackend, type ScheduleRow, type TickEnd } from './row.js';

/**
 * Schedules of a `MemorySessionStore`, kept with its backing (two stores over one backing see the
 * same schedules, as two connections to one file would). Rows are held as JSON text: a caller
 * never holds what is stored.
 */
const tables = new WeakMap<MemoryBacking, Map<string, string>>();
const WHERE = 'memory store (schedules)';

/** Due at `now` for one of `agents`, not paused, its lease free: what the SQL backends select by their columns. */
const claimable = (gist: RowGist, now: number, agents: readonly string[]): boolean =>
  gist.paused === false && gist.nextAt != null && gist.nextAt <= now && gist.agent !== undefined && agents.includes(gist.agent) && (gist.leaseUntil ?? 0) <= now;

export class MemoryScheduleBackend implements ScheduleBackend {
  readonly #rows: Map<string, string>;

  constructor(backing: MemoryBacking) {
    let rows = tables.get(backing);
    if (!rows) tables.set(backing, (rows = new Map()));
    this.#rows = rows;
  }

  #read(id: string): ScheduleRow | undefined {
    const json = this.#rows.get(id);
    return json === undefined ? undefined : decodeScheduleRow(json, WHERE);
  }

  #write(row: ScheduleRow): void {
    this.#rows.set(row.id, JSON.stringify(row));
  }

  async insert(row: ScheduleRow): Promise<boolean> {
    if (this.#rows.has(row.id)) return false;
    this.#write(row);
    return true;
  }

  async get(id: string): Promise<ScheduleRow | undefined> {
    return this.#read(id);
  }

  async list(): Promise<RowsRead> {
    const read = decodeScheduleRows(this.#rows.values(), WHERE);
    read.rows.sort((a, b) => a.createdAt - b.createdAt || a.id.localeCompare(b.id));
    return read;
  }

  async setPaused(id: string, paused: boolean, nextAt: number | null, now: number): Promise<boolean> {
    const row = this.#read(id);
    if (!row) return false;
    this.#write({ ...row, paused, nextAt, updatedAt: now });
    return true;
  }

  async delete(id: string): Promise<boolean> {
    return this.#rows.delete(id);
  }

  async claim(owner: string, now: number, leaseMs: number, agents: readonly string[], limit: number): Promise<Claim> {
    const stored = [...this.#rows].map(([id, text]) => ({ id, text, gist: gistOf(text) }));
    // A row that is not JSON at all cannot say when it is due: it is a candidate, reported as unreadable.
    const due = stored.filter(({ gist }) => gist === undefined || claimable(gist, now, agents)).sort((a, b) => (a.gist?.nextAt ?? 0) - (b.gist?.nextAt ?? 0) || a.id.localeCompare(b.id));
    const claim = planClaim({ owner, now, leaseMs }, due, stored.filter(({ gist }) => gist?.leaseUntil != null), limit, WHERE);
    for (const row of claim.claimed) this.#write(row);
    return claim;
  }

  #held(id: string, owner: string): ScheduleRow | undefined {
    const row = this.#read(id);
    return row?.leaseOwner === owner ? row : undefined;
  }

  async renew(id: string, owner: string, until: number): Promise<boolean> {
    const row = this.#held(id, owner);
    if (!row) return false;
    this.#write({ ...row, leaseUntil: until });
    return true;
  }

  async startTick(id: string, owner: string, due: number, baseRun: number): Promise<boolean> {
    const row = this.#held(id, owner);
    if (!row) return false;
    this.#write({ ...row, tickDue: due, tickBaseRun: baseRun });
    return true;
  }

  async endTick(id: string, owner: string, end: TickEnd, now: number): Promise<boolean> {
    const row = this.#held(id, owner);
    if (!row) return false;
    this.#write(endedTick(row, end, now));
    return true;
  }

  async release(id: string, owner: string, now: number, at: number): Promise<boolean> {
    const row = this.#held(id, owner);
    if (!row) return false;
    this.#write(releasedLease(row, now, at));
    return true;
  }

  async foreignAgents(agents: readonly string[]): Promise<{ id: string; agent: string }[]> {
    const found: { id: string; agent: string }[] = [];
    for (const [id, text] of this.#rows) {
      const agent = gistOf(text)?.agent;
      if (agent !== undefined && !agents.includes(agent)) found.push({ id, agent });
    }
    return found;
  }

  async nextWake(agents: readonly string[], now: number): Promise<number | null> {
    let earliest: number | null = null;
    for (const text of this.#rows.values()) {
      const gist = gistOf(text);
      if (gist?.paused !== false || gist.nextAt == null || gist.agent === undefined || !agents.includes(gist.agent)) continue;
      const at = Math.max(gist.nextAt, gist.leaseUntil ?? 0);
      if (at > now && (earliest === null || at < earliest)) earliest = at;
    }
    return earliest;
  }

  async close(): Promise<void> {}
}

import type { MemoryBacking } from '../stores/memory.js';
import { decodeScheduleRow, endedTick, releasedLease, type ScheduleBackend, type ScheduleRow, type TickEnd } from './row.js';

/**
 * Schedules of a `MemorySessionStore`, kept with its backing (two stores over one backing see the
 * same schedules, as two connections to one file would). Rows are held as JSON text: a caller
 * never holds what is stored.
 */
const tables = new WeakMap<MemoryBacking, Map<string, string>>();

export class MemoryScheduleBackend implements ScheduleBackend {
  readonly #rows: Map<string, string>;

  constructor(backing: MemoryBacking) {
    let rows = tables.get(backing);
    if (!rows) tables.set(backing, (rows = new Map()));
    this.#rows = rows;
  }

  #read(id: string): ScheduleRow | undefined {
    const json = this.#rows.get(id);
    return json === undefined ? undefined : decodeScheduleRow(json, 'memory store (schedules)');
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

  async list(): Promise<ScheduleRow[]> {
    return [...this.#rows.keys()].map((id) => this.#read(id)!).sort((a, b) => a.createdAt - b.createdAt || a.id.localeCompare(b.id));
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

  async claim(owner: string, now: number, leaseMs: number, agents: readonly string[], limit: number): Promise<ScheduleRow[]> {
    const claimed: ScheduleRow[] = [];
    for (const id of this.#rows.keys()) {
      if (claimed.length >= limit) break;
      const row = this.#read(id)!;
      if (row.paused || row.nextAt === null || row.nextAt > now || !agents.includes(row.agent)) continue;
      if (row.leaseUntil !== null && row.leaseUntil > now) continue;
      const taken = { ...row, leaseOwner: owner, leaseUntil: now + leaseMs, updatedAt: now };
      this.#write(taken);
      claimed.push(taken);
    }
    return claimed;
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

  async release(id: string, owner: string, now: number): Promise<boolean> {
    const row = this.#held(id, owner);
    if (!row) return false;
    this.#write(releasedLease(row, now));
    return true;
  }

  async foreignAgents(agents: readonly string[]): Promise<{ id: string; agent: string }[]> {
    return (await this.list()).filter((row) => !agents.includes(row.agent)).map(({ id, agent }) => ({ id, agent }));
  }

  async nextWake(agents: readonly string[]): Promise<number | null> {
    let earliest: number | null = null;
    for (const id of this.#rows.keys()) {
      const row = this.#read(id)!;
      if (row.paused || row.nextAt === null || !agents.includes(row.agent)) continue;
      const at = Math.max(row.nextAt, row.leaseUntil ?? 0);
      if (earliest === null || at < earliest) earliest = at;
    }
    return earliest;
  }

  async close(): Promise<void> {}
}

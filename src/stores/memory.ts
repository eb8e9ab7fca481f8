import type { ToolMessage } from '../schemas.js';
import { decodeJournalEntry, decodeSession } from './decode.js';
import { CorruptSessionError } from './errors.js';
import { InvalidConfigError } from '../errors.js';
import type { SessionStore, SessionSummary, StepWrite, StoredSession, TraceRecord } from './session-store.js';
import { checkSessionId, decodeTraceRow, encodeJournalEntry, encodeStep, encodeTraceEntries, planStep, traceLimit } from './step.js';

/**
 * The in-memory store: for tests, examples and hosts that persist elsewhere.
 *
 * It keeps the same rows the database stores keep — JSON text per message and per state —
 * rather than live objects. That is the "copy on load" the contract needs (callers can never
 * mutate what is stored, nor be mutated by a later write), and it makes the memory store fail
 * exactly where the databases would (a value JSON cannot carry is rejected at write time).
 */

export interface MemorySessionRow {
  version: number;
  messageCount: number;
  stateJson: string;
  /** position -> message JSON. Insertion order is position order: the log only grows at its end. */
  log: Map<number, string>;
  createdAt: number;
  updatedAt: number;
}

export interface MemoryJournalEntry {
  turnKey: string;
  toolCallId: string;
  json: string;
}

/**
 * The "database" behind one or more MemorySessionStores. Two stores over one backing behave
 * like two connections to one file, which is what the conformance suite's race tests need.
 * Tests also reach in here to plant corrupt rows.
 */
export class MemoryBacking {
  readonly sessions = new Map<string, MemorySessionRow>();
  /** sessionId -> (turnKey \0 toolCallId) -> entry; Map order is recording order. */
  readonly journal = new Map<string, Map<string, MemoryJournalEntry>>();
  /** sessionId -> trace rows (JSON text), in `seq` order; `seq` counts across sessions, like a rowid. */
  readonly trace = new Map<string, Array<{ seq: number; json: string }>>();
  traceSeq = 0;
}

/**
 * A SessionStore in this process's memory: for tests, and for sessions that need not outlive the
 * process.
 * @example
 * ```ts
 * const backing = new MemoryBacking();               // outlives a store instance, like a file would
 * const session = await DurableSession.open({ machine, store: new MemorySessionStore(backing), sessionId: 't1' });
 * ```
 */
export class MemorySessionStore implements SessionStore {
  readonly backing: MemoryBacking;

  constructor(backing: MemoryBacking = new MemoryBacking()) {
    // It takes a backing, not options: a plain object here is a mistake (say a SQLite store's { path }).
    if (!(backing instanceof MemoryBacking)) {
      const keys = typeof backing === 'object' && backing !== null ? Object.keys(backing) : [];
      throw new InvalidConfigError(`MemorySessionStore takes a MemoryBacking or nothing${keys.length > 0 ? `, not options (unknown option ${JSON.stringify(keys[0])})` : `, got ${typeof backing}`}`);
    }
    this.backing = backing;
  }

  async load(sessionId: string): Promise<StoredSession | undefined> {
    checkSessionId(sessionId);
    const row = this.backing.sessions.get(sessionId);
    if (!row) return undefined;
    const rows = Array.from(row.log, ([position, message]) => ({ position, message }));
    return decodeSession(sessionId, { version: row.version, messageCount: row.messageCount, stateJson: row.stateJson }, rows);
  }

  // No await inside: the step runs to completion before any other call starts, so it is
  // atomic without locks. Validation and the version check come before the first mutation, so
  // a throw leaves nothing half-written.
  async apply(sessionId: string, write: StepWrite): Promise<number> {
    const step = encodeStep(sessionId, write);
    const existing = this.backing.sessions.get(sessionId);
    const plan = planStep(sessionId, existing, step);
    // Like the databases' primary key: an append never overwrites a row. Only a planted row
    // past the end can be there, and a truncation sweeps those away first.
    if (existing && plan.deleteFrom === undefined) {
      const collision = step.rows.findIndex((_, i) => existing.log.has(plan.start + i));
      if (collision >= 0) {
        throw new CorruptSessionError(sessionId, { kind: 'log' }, `a stray row already sits at position ${plan.start + collision}`);
      }
    }
    const now = Date.now();
    const row: MemorySessionRow = existing ?? {
      version: 0,
      messageCount: 0,
      stateJson: 'null',
      log: new Map(),
      createdAt: now,
      updatedAt: now,
    };
    if (plan.deleteFrom !== undefined) {
      for (let position = plan.deleteFrom; position < row.messageCount || row.log.has(position); position++) row.log.delete(position);
    }
    step.rows.forEach((json, i) => row.log.set(plan.start + i, json));
    row.version = plan.version;
    row.messageCount = plan.messageCount;
    row.stateJson = step.stateJson;
    row.updatedAt = now;
    if (plan.create) this.backing.sessions.set(sessionId, row);
    this.clearJournal(sessionId, step.clearJournal);
    this.pushTrace(sessionId, step.traceRows);
    return plan.version;
  }

  async list(): Promise<SessionSummary[]> {
    const summaries = Array.from(this.backing.sessions, ([sessionId, row]) => ({
      sessionId,
      version: row.version,
      messageCount: row.messageCount,
      createdAt: new Date(row.createdAt),
      updatedAt: new Date(row.updatedAt),
    }));
    return summaries.sort(
      (a, b) => b.updatedAt.getTime() - a.updatedAt.getTime() || (a.sessionId < b.sessionId ? -1 : a.sessionId > b.sessionId ? 1 : 0),
    );
  }

  async journalToolResult(sessionId: string, turnKey: string, result: ToolMessage): Promise<void> {
    const entry = encodeJournalEntry(sessionId, turnKey, result);
    let entries = this.backing.journal.get(sessionId);
    if (!entries) {
      entries = new Map();
      this.backing.journal.set(sessionId, entries);
    }
    const key = `${turnKey}\0${entry.toolCallId}`;
    if (!entries.has(key)) entries.set(key, { turnKey, toolCallId: entry.toolCallId, json: entry.json });
  }

  async journaledToolResults(sessionId: string, turnKey: string): Promise<ToolMessage[]> {
    checkSessionId(sessionId);
    const entries = this.backing.journal.get(sessionId);
    if (!entries) return [];
    return Array.from(entries.values())
      .filter((entry) => entry.turnKey === turnKey)
      .map((entry) => decodeJournalEntry(sessionId, entry.turnKey, entry.toolCallId, entry.json));
  }

  async appendTrace(sessionId: string, entries: readonly unknown[]): Promise<void> {
    this.pushTrace(sessionId, encodeTraceEntries(sessionId, entries));
  }

  async readTrace(sessionId: string, afterSeq = 0, limit?: number): Promise<TraceRecord[]> {
    checkSessionId(sessionId);
    const most = traceLimit(limit) ?? Infinity;
    const out: TraceRecord[] = [];
    for (const row of this.backing.trace.get(sessionId) ?? []) {
      if (out.length >= most) break;
      if (row.seq > afterSeq) out.push(decodeTraceRow(sessionId, row.seq, row.json));
    }
    return out;
  }

  async close(): Promise<void> {}

  private pushTrace(sessionId: string, rows: readonly string[]): void {
    if (rows.length === 0) return;
    let trace = this.backing.trace.get(sessionId);
    if (!trace) this.backing.trace.set(sessionId, (trace = []));
    for (const json of rows) trace.push({ seq: ++this.backing.traceSeq, json });
  }

  private clearJournal(sessionId: string, which: 'all' | string[] | undefined): void {
    if (which === undefined) return;
    const entries = this.backing.journal.get(sessionId);
    if (!entries) return;
    if (which === 'all') {
      this.backing.journal.delete(sessionId);
      return;
    }
    const turnKeys = new Set(which);
    for (const [key, entry] of entries) if (turnKeys.has(entry.turnKey)) entries.delete(key);
  }
}

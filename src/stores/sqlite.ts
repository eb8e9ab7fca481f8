import { mkdirSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import type { ToolMessage } from '../schemas.js';
import { decodeJournalEntry, decodeSession } from './decode.js';
import type { LogRow } from './decode.js';
import { InvalidConfigError, LoopchartError } from '../errors.js';
import { MAX_TIMER_MS } from '../timer-bound.js';
import { checkKnownKeys, optionKeys } from '../known-keys.js';
import { CorruptSessionError, StoreBusyError, StoreCorruptError, StoreError, StoreFullError, StoreUnavailableError } from './errors.js';
import type { SessionStore, SessionSummary, StepWrite, StoredSession, TraceRecord } from './session-store.js';
import { checkSqliteSchemaReadOnly, migrateSqlite } from './sqlite-schema.js';
import { readOnlyError, readOnlyFile } from './sqlite-read-only.js';
import { openSqlite, sqliteFailure, type SqliteConnection, type SqliteDriverName } from './sqlite-driver.js';
import { checkSessionId, decodeTraceRow, encodeJournalEntry, encodeStep, encodeTraceEntries, planStep, traceLimit } from './step.js';
import type { EncodedStep } from './step.js';

/** The embedded default: one file under the working directory. */
export const DEFAULT_SQLITE_PATH = '.loopchart/loopchart.db';

export interface SqliteStoreOptions {
  /** Database file; default `.loopchart/loopchart.db` (its folder is created). ':memory:' works too. */
  path?: string | undefined;
  /**
   * FULL (default) fsyncs the WAL at every commit: a committed step survives power loss and
   * OS crashes. NORMAL syncs only at checkpoints: a committed step still survives the process
   * being killed (SIGKILL included — the WAL write is in the OS page cache before commit
   * returns), but the last steps can roll back on power loss. We default to FULL because a
   * step is taken once per model call or tool batch (milliseconds to seconds), so one fsync
   * per step is noise there, while a rolled-back step is a repeated tool side effect.
   */
  synchronous?: 'FULL' | 'NORMAL' | undefined;
  /** How long a writer waits for another connection's write lock before StoreBusyError, in ms: an integer from 0 to 2^31 - 1. Default 5000. */
  busyTimeoutMs?: number | undefined;
  /**
   * The SQLite binding. Default: the built-in `node:sqlite` on Node 22.5+ (22.13+ without a
   * flag), else better-sqlite3 (an optional dependency). Both store the same file format.
   */
  driver?: SqliteDriverName | undefined;
}

interface HeadRow {
  version: number;
  message_count: number;
  state: string;
}

interface SummaryRow {
  session_id: string;
  version: number;
  message_count: number;
  created_at: number;
  updated_at: number;
}

/**
 * A driver error as the loopchart store error it means, the driver's error kept as `cause`;
 * loopchart's own errors and errors that did not come from SQLite pass through unchanged.
 */
function storeError(where: string, error: unknown): unknown {
  const failure = sqliteFailure(error);
  if (failure === null || LoopchartError.isInstance(error)) return error;
  const detail = (error as Error).message;
  switch (failure) {
    case 'busy':
      return new StoreBusyError(where, { cause: error });
    case 'corrupt':
      return new StoreCorruptError(where, detail, { cause: error });
    case 'full':
      return new StoreFullError(where, detail, { cause: error });
    case 'cantopen':
      return new StoreUnavailableError(where, detail, { cause: error });
    case 'readonly':
      return readOnlyError(where, { cause: error });
    default:
      return new StoreError(where, detail, { cause: error });
  }
}

/**
 * A read-only file SQLite cannot open: one in write-ahead-log mode whose folder takes no `-shm`
 * file (a read-only mount) cannot be read without it (SQLite's own rule), which its driver
 * reports only as 'unable to open database file'.
 */
function readOnlyOpenError(where: string, error: unknown): unknown {
  if (sqliteFailure(error) !== 'cantopen') return storeError(where, error);
  const detail =
    `${(error as Error).message}: the file is read-only and in write-ahead-log mode, and SQLite needs its -shm file beside it to read it, ` +
    'which this folder does not take; copy the file to a folder you may write, or back it up with VACUUM INTO (no write-ahead log)';
  return new StoreUnavailableError(where, detail, { cause: error });
}

/**
 * A row's time column as a Date. This store writes milliseconds, but a file edited by hand (or
 * by another tool) may hold anything there: such a value is the epoch, not an Invalid Date that
 * would throw in whoever formats the list (the viewer's home page, `sessions list`), so one bad
 * row does not hide the others. The row itself is read, and refused, only when it is loaded.
 */
function storedTime(value: unknown): Date {
  return typeof value === 'number' && Number.isFinite(value) && Math.abs(value) <= 8.64e15 ? new Date(value) : new Date(0);
}

function prepareStatements(db: SqliteConnection) {
  return {
    head: db.prepare('SELECT version, message_count, state FROM sessions WHERE session_id = ?'),
    log: db.prepare('SELECT position, message FROM messages WHERE session_id = ? ORDER BY position'),
    insertSession: db.prepare(
      'INSERT INTO sessions (session_id, version, message_count, state, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)',
    ),
    updateSession: db.prepare(
      'UPDATE sessions SET version = ?, message_count = ?, state = ?, updated_at = ? WHERE session_id = ? AND version = ?',
    ),
    truncate: db.prepare('DELETE FROM messages WHERE session_id = ? AND position >= ?'),
    insertMessage: db.prepare('INSERT INTO messages (session_id, position, message) VALUES (?, ?, ?)'),
    list: db.prepare(
      'SELECT session_id, version, message_count, created_at, updated_at FROM sessions ORDER BY updated_at DESC, session_id',
    ),
    journalInsert: db.prepare(
      `INSERT INTO tool_journal (session_id, turn_key, tool_call_id, result, recorded_at) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (session_id, turn_key, tool_call_id) DO NOTHING`,
    ),
    journalRead: db.prepare(
      'SELECT tool_call_id, result FROM tool_journal WHERE session_id = ? AND turn_key = ? ORDER BY rowid',
    ),
    journalClearTurn: db.prepare('DELETE FROM tool_journal WHERE session_id = ? AND turn_key = ?'),
    journalClearAll: db.prepare('DELETE FROM tool_journal WHERE session_id = ?'),
    traceInsert: db.prepare('INSERT INTO trace (session_id, entry) VALUES (?, ?)'),
    // LIMIT -1 is no limit in SQLite.
    traceRead: db.prepare('SELECT seq, entry FROM trace WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?'),
  };
}

/** The folder name of the default store (`.loopchart/loopchart.db`). */
const DEFAULT_FOLDER = basename(dirname(DEFAULT_SQLITE_PATH));

/**
 * A `.loopchart` folder the store has just created gets a `.gitignore` of `*`, so the database
 * never lands in a commit and nobody has to add it to the project's own .gitignore (as pytest
 * does for its cache). Only a folder of that name, only when this store created it: a folder the
 * user made, or named otherwise, is theirs.
 */
function ignoreInGit(created: string | undefined, folder: string): void {
  if (created === undefined || basename(folder) !== DEFAULT_FOLDER) return;
  try {
    writeFileSync(join(folder, '.gitignore'), '# Created by loopchart: the session store stays out of git.\n*\n', { flag: 'wx' });
  } catch {
    // A .gitignore that cannot be written (another process's came first, a read-only folder) is
    // no reason to refuse the store.
  }
}

const SQLITE_OPTION_KEYS = optionKeys<SqliteStoreOptions>()({ path: true, synchronous: true, busyTimeoutMs: true, driver: true });
const SQLITE_DRIVERS: readonly unknown[] = ['node:sqlite', 'better-sqlite3'] satisfies SqliteDriverName[];

/**
 * The options, checked before anything is opened. Before, a string (`new SqliteSessionStore('my.db')`)
 * opened the default file instead (a string is now the path, as better-sqlite3 and node:sqlite
 * take it), a `synchronous` other than NORMAL was FULL and an unknown driver better-sqlite3
 * without a word, and a bad path or busyTimeoutMs was a raw TypeError or RangeError from
 * `path.resolve` or the driver.
 */
function checkOptions(options: SqliteStoreOptions): void {
  const problem = (what: string) => new InvalidConfigError(`SqliteSessionStore: ${what}`);
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw problem("options must be a file path or an object { path?, synchronous?, busyTimeoutMs?, driver? }");
  }
  checkKnownKeys(options, SQLITE_OPTION_KEYS, 'SqliteSessionStore');
  const { path, synchronous, busyTimeoutMs, driver }: Record<string, unknown> = { ...options };
  if (path !== undefined && (typeof path !== 'string' || path === '')) throw problem(`path must be a non-empty file path (or ':memory:'), got ${path === '' ? 'an empty string' : typeof path}`);
  // SQLite cuts the name at a NUL: another file than the one named would be opened.
  if (typeof path === 'string' && path.includes('\0')) throw problem('path must not hold a NUL character');
  if (synchronous !== undefined && synchronous !== 'FULL' && synchronous !== 'NORMAL') throw problem("synchronous must be 'FULL' or 'NORMAL'");
  // The drivers' own bound: better-sqlite3 refuses more, and SQLite keeps the busy timeout in an int.
  if (busyTimeoutMs !== undefined && (typeof busyTimeoutMs !== 'number' || !Number.isInteger(busyTimeoutMs) || busyTimeoutMs < 0 || busyTimeoutMs > MAX_TIMER_MS)) {
    throw problem(`busyTimeoutMs must be an integer from 0 to ${MAX_TIMER_MS} (ms), got ${typeof busyTimeoutMs === 'number' ? String(busyTimeoutMs) : typeof busyTimeoutMs}`);
  }
  if (driver !== undefined && !SQLITE_DRIVERS.includes(driver)) throw problem("driver must be 'node:sqlite' or 'better-sqlite3'");
}

/**
 * The embedded session store: one SQLite file (WAL), safe for several processes on one machine.
 * A file this process may only read (a backup, mode 0444, a read-only mount) opens for reading,
 * unchanged: its writes are refused with a `StoreError` saying the file is read-only.
 * @example
 * ```ts
 * import { DurableSession } from 'loopchart';
 * import { SqliteSessionStore } from 'loopchart/sqlite';
 *
 * const store = new SqliteSessionStore({ path: '.loopchart/loopchart.db' }); // driver: node:sqlite or better-sqlite3
 * const same = new SqliteSessionStore('.loopchart/loopchart.db'); // a path alone: the other options at their defaults
 * const session = await DurableSession.open({ machine, store, sessionId: 'ticket-42' });
 * ```
 */
export class SqliteSessionStore implements SessionStore {
  readonly path: string;
  /** The binding this store runs on. */
  readonly driver: SqliteDriverName;
  private readonly db: SqliteConnection;
  private readonly sql: ReturnType<typeof prepareStatements>;
  private readonly applyTxn: (sessionId: string, step: EncodedStep) => number;
  private readonly loadTxn: (sessionId: string) => StoredSession | undefined;
  /** Opened for reading only (see `readOnlyFile`): every write is refused before it reaches SQLite. */
  private readonly readOnly: boolean;

  constructor(given: SqliteStoreOptions | string = {}) {
    const options = typeof given === 'string' ? { path: given } : given;
    checkOptions(options);
    const path = options.path ?? DEFAULT_SQLITE_PATH;
    this.path = path === ':memory:' ? path : resolve(path);
    if (this.path !== ':memory:') ignoreInGit(mkdirSync(dirname(this.path), { recursive: true }), dirname(this.path));
    const where = `SQLite store ${this.path}`;
    this.readOnly = readOnlyFile(this.path);
    try {
      this.db = openSqlite(this.path, { busyTimeoutMs: options.busyTimeoutMs ?? 5000, readOnly: this.readOnly, ...(options.driver && { driver: options.driver }) });
    } catch (error) {
      throw this.readOnly ? readOnlyOpenError(where, error) : storeError(where, error);
    }
    this.driver = this.db.driver;
    try {
      if (this.readOnly) {
        // Nothing is switched or migrated: those are writes. The file is read as its writer left it.
        checkSqliteSchemaReadOnly(this.db, where);
      } else {
        // WAL: readers never block the writer and a commit appends to one file; it is also what
        // makes the NORMAL/FULL trade-off above hold.
        this.db.exec('PRAGMA journal_mode = WAL');
        this.db.exec(`PRAGMA synchronous = ${options.synchronous === 'NORMAL' ? 'NORMAL' : 'FULL'}`);
        migrateSqlite(this.db, where);
      }
      this.sql = prepareStatements(this.db);
    } catch (error) {
      this.db.close();
      throw this.readOnly ? readOnlyOpenError(where, error) : storeError(where, error);
    }
    this.applyTxn = (sessionId, step) => this.db.transaction('immediate', () => this.applyLocked(sessionId, step));
    // A deferred read transaction: the head row and the log come from one snapshot even if
    // another process commits a step between the two SELECTs.
    this.loadTxn = (sessionId) => this.db.transaction('deferred', () => this.loadSnapshot(sessionId));
  }

  async load(sessionId: string): Promise<StoredSession | undefined> {
    checkSessionId(sessionId);
    return this.guard(() => this.loadTxn(sessionId));
  }

  async apply(sessionId: string, write: StepWrite): Promise<number> {
    const step = encodeStep(sessionId, write);
    this.refuseIfReadOnly();
    // BEGIN IMMEDIATE takes the file's write lock before the version is read, so the check
    // and the write are one critical section across processes, not just connections.
    return this.guard(() => this.applyTxn(sessionId, step));
  }

  async list(): Promise<SessionSummary[]> {
    const rows = this.guard(() => this.sql.list.all() as SummaryRow[]);
    return rows.map((row) => ({
      sessionId: row.session_id,
      version: row.version,
      messageCount: row.message_count,
      createdAt: storedTime(row.created_at),
      updatedAt: storedTime(row.updated_at),
    }));
  }

  async journalToolResult(sessionId: string, turnKey: string, result: ToolMessage): Promise<void> {
    const entry = encodeJournalEntry(sessionId, turnKey, result);
    this.refuseIfReadOnly();
    this.guard(() => this.sql.journalInsert.run(sessionId, turnKey, entry.toolCallId, entry.json, Date.now()));
  }

  async journaledToolResults(sessionId: string, turnKey: string): Promise<ToolMessage[]> {
    checkSessionId(sessionId);
    const rows = this.guard(() => this.sql.journalRead.all(sessionId, turnKey) as Array<{ tool_call_id: string; result: string }>);
    return rows.map((row) => decodeJournalEntry(sessionId, turnKey, row.tool_call_id, row.result));
  }

  async appendTrace(sessionId: string, entries: readonly unknown[]): Promise<void> {
    const rows = encodeTraceEntries(sessionId, entries);
    if (rows.length === 0) return;
    this.refuseIfReadOnly();
    this.guard(() => this.db.transaction('immediate', () => rows.forEach((json) => this.sql.traceInsert.run(sessionId, json))));
  }

  async readTrace(sessionId: string, afterSeq = 0, limit?: number): Promise<TraceRecord[]> {
    checkSessionId(sessionId);
    const most = traceLimit(limit) ?? -1;
    const rows = this.guard(() => this.sql.traceRead.all(sessionId, afterSeq, most) as Array<{ seq: number; entry: string }>);
    return rows.map((row) => decodeTraceRow(sessionId, Number(row.seq), row.entry));
  }

  async close(): Promise<void> {
    this.db.close();
  }

  private loadSnapshot(sessionId: string): StoredSession | undefined {
    const head = this.sql.head.get(sessionId) as HeadRow | undefined;
    if (!head) return undefined;
    const rows = this.sql.log.all(sessionId) as LogRow[];
    return decodeSession(sessionId, { version: head.version, messageCount: head.message_count, stateJson: head.state }, rows);
  }

  private applyLocked(sessionId: string, step: EncodedStep): number {
    const head = this.sql.head.get(sessionId) as HeadRow | undefined;
    const plan = planStep(sessionId, head && { version: head.version, messageCount: head.message_count }, step);
    const now = Date.now();
    if (plan.deleteFrom !== undefined) this.sql.truncate.run(sessionId, plan.deleteFrom);
    step.rows.forEach((json, i) => {
      try {
        this.sql.insertMessage.run(sessionId, plan.start + i, json);
      } catch (error) {
        // Only rows past message_count can collide: left there by hand or by a foreign writer.
        if (sqliteFailure(error) === 'primary-key') {
          throw new CorruptSessionError(sessionId, { kind: 'log' }, `a stray row already sits at position ${plan.start + i}`, { cause: error });
        }
        throw error;
      }
    });
    if (plan.create) {
      this.sql.insertSession.run(sessionId, plan.version, plan.messageCount, step.stateJson, now, now);
    } else {
      this.sql.updateSession.run(plan.version, plan.messageCount, step.stateJson, now, sessionId, step.expectedVersion);
    }
    if (step.clearJournal === 'all') this.sql.journalClearAll.run(sessionId);
    else for (const turnKey of step.clearJournal ?? []) this.sql.journalClearTurn.run(sessionId, turnKey);
    for (const json of step.traceRows) this.sql.traceInsert.run(sessionId, json);
    return plan.version;
  }

  private refuseIfReadOnly(): void {
    if (this.readOnly) throw readOnlyError(`SQLite store ${this.path}`);
  }

  private guard<T>(work: () => T): T {
    try {
      return work();
    } catch (error) {
      throw storeError(`SQLite store ${this.path}`, error);
    }
  }
}

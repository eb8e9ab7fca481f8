import { z } from 'zod';
import { MessageSchema } from '../schemas.js';
import type { Message, ToolMessage } from '../schemas.js';

/**
 * The storage contract behind the driver (seed 003's session loader + effect handler).
 *
 * Layout, shared by every implementation: a small state row per session (version, message
 * count, the brain's state without its messages) plus an append-only message log keyed by
 * (session, position). A step writes only what it adds, so its cost does not grow with the
 * conversation; only `load` and the rare `replaceLog` touch the whole log.
 */

/**
 * Whether an option meant to be a session store is one (it reads sessions: `load`), for the
 * factories that take a store to refuse anything else where it enters.
 *
 * @example
 * ```ts
 * declare const options: { store: unknown };
 * if (!isSessionStore(options.store)) throw new InvalidConfigError('store must be a session store (openSessionStore)');
 * ```
 */
export const isSessionStore = (value: unknown): value is SessionStore =>
  typeof value === 'object' && value !== null && typeof (value as { load?: unknown }).load === 'function';

/** One committed session as read back: the caller validates `state` against its own schema. */
export interface StoredSession {
  sessionId: string;
  /** Number of steps committed so far (1 after the creating step). Pass it back as `expectedVersion`. */
  version: number;
  /** The small JSON state row exactly as written by the last step. */
  state: unknown;
  /** The log, positions 0..n-1, each message validated with `MessageSchema`. */
  messages: Message[];
}

const nonNegativeInt = z.number().int().nonnegative();

/**
 * The effects of one step, applied in one transaction. Order inside the transaction:
 * version check, then `truncateTo`, then `append` (or `replaceLog` instead of both), then the
 * state row, then `clearJournal`, then `trace`.
 */
export const StepWriteSchema = z.object({
  /** The version the writer loaded; 0 creates the session (and fails if it exists). */
  expectedVersion: nonNegativeInt,
  /** The new state row; any JSON value (JSON.stringify must accept it). */
  state: z.unknown(),
  /** Drop log positions >= this first (rewind, discarded pending). At most the current length. */
  truncateTo: nonNegativeInt.optional(),
  /** Appended at the end of the log (after truncation). */
  append: z.array(MessageSchema).optional(),
  /** Replaces the whole log (compaction): O(new log), so rare. Excludes truncateTo/append. */
  replaceLog: z.array(MessageSchema).optional(),
  /**
   * Tool journal entries this step makes obsolete: the turn keys whose results are now in the
   * log (or were discarded), or 'all'. Cleared in the same transaction, so a result is always
   * either in the journal or in the log, never lost between them.
   */
  clearJournal: z.union([z.literal('all'), z.array(z.string().min(1))]).optional(),
  /**
   * Trace entries that belong to this step (JSON objects, in order), appended to the session's
   * trace in the same transaction: a step and what the trace says about it are stored together
   * or not at all, in one write. A store that keeps a trace (`appendTrace`) must honour it.
   */
  trace: z.array(z.unknown()).optional(),
});
export type StepWrite = z.input<typeof StepWriteSchema>;

/** One line of `list()`: enough for `loopchart sessions list` without reading any log. */
export interface SessionSummary {
  sessionId: string;
  version: number;
  messageCount: number;
  createdAt: Date;
  updatedAt: Date;
}

/** One entry of a session's trace as read back: `seq` orders entries and is the cursor for `readTrace`. */
export interface TraceRecord {
  seq: number;
  /** The JSON value exactly as written; the reader validates it (see `TraceEntrySchema`). */
  entry: unknown;
}

/**
 * Where durable sessions live: an append-only message log and a small state row per session, each
 * step one transaction with an optimistic version check (`SessionBusyError` when another writer
 * won). Implementations: `MemorySessionStore`, `SqliteSessionStore` (`loopchart/sqlite`),
 * `PostgresSessionStore` (`loopchart/postgres`); all pass one conformance suite.
 * @example
 * ```ts
 * const store: SessionStore = new MemorySessionStore();
 * const version = await store.apply('s1', { expectedVersion: 0, state: { step: 1 }, append: [{ role: 'user', content: 'hi' }] });
 * const stored = await store.load('s1'); // { version: 1, state: { step: 1 }, messages: [...] }
 * ```
 */
export interface SessionStore {
  /** The session, or undefined if it was never created. Throws CorruptSessionError on bad rows. */
  load(sessionId: string): Promise<StoredSession | undefined>;

  /**
   * Applies one step atomically and returns the new version (expectedVersion + 1).
   * Throws SessionBusyError when the stored version is not `expectedVersion` (or the session
   * exists when creating), SessionNotFoundError when updating a missing session,
   * InvalidWriteError for a write that breaks the contract. On any throw nothing was written.
   */
  apply(sessionId: string, write: StepWrite): Promise<number>;

  /** All sessions, most recently updated first. Reads only the state rows. */
  list(): Promise<SessionSummary[]>;

  /**
   * Records a tool result the moment the tool finishes, outside any step transaction, so a
   * crash in the middle of a parallel batch re-runs only the calls that had not finished.
   * `turnKey` names the batch: use something that never repeats within a session (the
   * version of the step that entered AwaitingTools does), so a rewound and re-run turn cannot
   * pick up stale results. The first result recorded for (session, turnKey, toolCallId) wins;
   * a later one is ignored, so every reader sees the same answer.
   */
  journalToolResult(sessionId: string, turnKey: string, result: ToolMessage): Promise<void>;

  /** The results journaled for this batch, in the order they were recorded. */
  journaledToolResults(sessionId: string, turnKey: string): Promise<ToolMessage[]>;

  /**
   * Appends observability entries to the session's trace (what happened and when: model calls
   * with latency, retries, tool timings, approvals, resumes) on their own, for entries that
   * belong to no step (a step's entries go in its `StepWrite.trace`). The
   * trace is append-only and never read by a run; `loopchart view` and replay read it. Optional:
   * a store without it keeps sessions working, they just have no timeline.
   */
  appendTrace?(sessionId: string, entries: readonly unknown[]): Promise<void>;

  /**
   * The trace entries with `seq` greater than `afterSeq` (default: all), in order; with `limit` (a
   * whole number from 1 to 2^31 - 1), only the first `limit` of them, so a reader that needs the
   * start of a long trace does not read all of it.
   */
  readTrace?(sessionId: string, afterSeq?: number, limit?: number): Promise<TraceRecord[]>;

  /** Releases the connection(s). The store cannot be used afterwards. */
  close(): Promise<void>;
}

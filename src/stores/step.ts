import type { z } from 'zod';
import { ToolMessageSchema } from '../schemas.js';
import { InvalidSessionIdError, InvalidWriteError, MAX_SESSION_ID_LENGTH, SessionBusyError, SessionNotFoundError, StoreError } from './errors.js';
import { StepWriteSchema } from './session-store.js';
import type { StepWrite } from './session-store.js';

/**
 * The store-independent half of `apply`: validation and serialization happen here, before
 * any transaction opens, so a bad write costs no lock and every backend rejects exactly the
 * same writes with exactly the same errors.
 */

/** A validated step, serialized to the rows the backends write. */
export interface EncodedStep {
  expectedVersion: number;
  stateJson: string;
  /** Positions >= this are deleted first; undefined = keep the log. */
  truncateTo: number | undefined;
  /** JSON of the messages to write from the (possibly truncated) end of the log. */
  rows: string[];
  clearJournal: 'all' | string[] | undefined;
  /** JSON of the trace entries appended with the step, in order. */
  traceRows: string[];
}

export function issuesText(error: z.ZodError): string {
  return error.issues
    .map((issue) => `${issue.path.length > 0 ? issue.path.join('.') : '(root)'}: ${issue.message}`)
    .join('; ');
}

export function encodeStep(sessionId: string, write: StepWrite): EncodedStep {
  checkSessionId(sessionId);
  const parsed = StepWriteSchema.safeParse(write);
  if (!parsed.success) throw new InvalidWriteError(sessionId, `invalid step: ${issuesText(parsed.error)}`);
  const step = parsed.data;
  if (step.replaceLog && (step.truncateTo !== undefined || step.append)) {
    throw new InvalidWriteError(sessionId, 'replaceLog replaces the whole log; do not combine it with truncateTo or append');
  }
  let stateJson: string | undefined;
  try {
    stateJson = JSON.stringify(step.state);
  } catch (error) {
    throw new InvalidWriteError(sessionId, `state is not JSON-serializable: ${(error as Error).message}`);
  }
  if (stateJson === undefined) throw new InvalidWriteError(sessionId, 'state is not a JSON value');
  // replaceLog is truncate-to-0 + append: one code path in every backend.
  const messages = step.replaceLog ?? step.append ?? [];
  return {
    expectedVersion: step.expectedVersion,
    stateJson,
    truncateTo: step.replaceLog ? 0 : step.truncateTo,
    rows: messages.map((message) => JSON.stringify(message)),
    clearJournal: step.clearJournal,
    traceRows: step.trace ? encodeTraceEntries(sessionId, step.trace) : [],
  };
}

/** The stored head of a session: what the version check and the positions need. */
export interface SessionHead {
  version: number;
  messageCount: number;
}

/** What a backend does for a step, once the version check passed. */
export interface StepPlan {
  create: boolean;
  /**
   * Delete log positions >= this (set whenever the step truncates, even at the end of the log:
   * the range delete is one index probe, and it also sweeps away stray rows past the end).
   */
  deleteFrom: number | undefined;
  /** Position of rows[0]. */
  start: number;
  messageCount: number;
  version: number;
}

/** The version check and position arithmetic; throws the typed errors of `apply`. */
export function planStep(sessionId: string, head: SessionHead | undefined, step: EncodedStep): StepPlan {
  if (step.expectedVersion === 0) {
    if (head) throw new SessionBusyError(sessionId, 0, head.version);
    if (step.truncateTo !== undefined && step.truncateTo > 0) {
      throw new InvalidWriteError(sessionId, `truncateTo ${step.truncateTo} on a new session (its log is empty)`);
    }
    return { create: true, deleteFrom: undefined, start: 0, messageCount: step.rows.length, version: 1 };
  }
  if (!head) throw new SessionNotFoundError(sessionId);
  if (head.version !== step.expectedVersion) throw new SessionBusyError(sessionId, step.expectedVersion, head.version);
  const keep = step.truncateTo ?? head.messageCount;
  if (keep > head.messageCount) {
    throw new InvalidWriteError(sessionId, `truncateTo ${keep} is past the end of the log (${head.messageCount} messages)`);
  }
  return {
    create: false,
    deleteFrom: step.truncateTo,
    start: keep,
    messageCount: keep + step.rows.length,
    version: head.version + 1,
  };
}

// With the u flag a paired surrogate is one code point, so \p{Cs} matches lone surrogates only.
const LONE_SURROGATE = /\p{Cs}/u;
const CONTROL = /\p{Cc}/u;
/** The characters that reorder text around them (Unicode's bidi controls): an id holding one can be shown as another id. */
const BIDI_CONTROL = /[\u061C\u200E\u200F\u202A-\u202E\u2066-\u2069]/u;

/**
 * Why `sessionId` breaks the one id rule of every store, or null when it is fine: a non-empty
 * string of at most `MAX_SESSION_ID_LENGTH` code units, well-formed Unicode, no control
 * character and no bidirectional control (which would let an id show as another). Pure, for callers that check an id before they reach a store (a CLI argument).
 *
 * @example
 * ```ts
 * sessionIdProblem('support/42'); // null
 * sessionIdProblem('a\u0000b');  // 'it holds a control character at index 1'
 * ```
 */
export function sessionIdProblem(sessionId: unknown): string | null {
  if (typeof sessionId !== 'string') return 'a session id must be a string';
  if (sessionId.length === 0) return 'a session id must not be empty';
  if (sessionId.length > MAX_SESSION_ID_LENGTH) {
    return `it is ${sessionId.length} code units long; the limit is ${MAX_SESSION_ID_LENGTH}`;
  }
  const surrogate = LONE_SURROGATE.exec(sessionId);
  if (surrogate) return `it holds a lone surrogate at index ${surrogate.index} (not well-formed Unicode)`;
  const control = CONTROL.exec(sessionId);
  if (control) return `it holds a control character at index ${control.index}`;
  const bidi = BIDI_CONTROL.exec(sessionId);
  if (bidi) return `it holds a bidirectional control (U+${bidi[0].codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}) at index ${bidi.index}`;
  return null;
}

/** Every store calls this before any query: the id rule of `sessionIdProblem`, as a typed error. */
export function checkSessionId(sessionId: string): void {
  const problem = sessionIdProblem(sessionId);
  if (problem) throw new InvalidSessionIdError(sessionId, problem);
}

/** Validates a journal write and serializes the result. */
export function encodeJournalEntry(sessionId: string, turnKey: string, result: unknown): { toolCallId: string; json: string } {
  checkSessionId(sessionId);
  if (typeof turnKey !== 'string' || turnKey.length === 0) {
    throw new InvalidWriteError(sessionId, 'journal turnKey must be a non-empty string');
  }
  const parsed = ToolMessageSchema.safeParse(result);
  if (!parsed.success) throw new InvalidWriteError(sessionId, `invalid tool result: ${issuesText(parsed.error)}`);
  return { toolCallId: parsed.data.toolCallId, json: JSON.stringify(parsed.data) };
}

/** Validates trace entries and serializes each: a JSON object per entry. */
export function encodeTraceEntries(sessionId: string, entries: readonly unknown[]): string[] {
  checkSessionId(sessionId);
  if (!Array.isArray(entries)) throw new InvalidWriteError(sessionId, 'trace entries must be an array');
  return entries.map((entry, i) => {
    if (typeof entry !== 'object' || entry === null || Array.isArray(entry)) {
      throw new InvalidWriteError(sessionId, `trace entry ${i} is not a JSON object`);
    }
    try {
      return JSON.stringify(entry);
    } catch (error) {
      throw new InvalidWriteError(sessionId, `trace entry ${i} is not JSON-serializable: ${(error as Error).message}`);
    }
  });
}

/** The largest `limit` a trace read takes (SQLite's and PostgreSQL's LIMIT both take it). */
const MAX_TRACE_LIMIT = 2 ** 31 - 1;

/**
 * A trace read's `limit` as the stores use it: null for none (every entry), else the whole number
 * given, checked (a fraction, 0 or NaN is refused, not read as "all").
 */
export function traceLimit(limit: number | undefined): number | null {
  if (limit === undefined) return null;
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_TRACE_LIMIT) {
    throw new StoreError('readTrace', `limit must be a whole number from 1 to ${MAX_TRACE_LIMIT}, got ${String(limit)}`);
  }
  return limit;
}

/** A stored trace row parsed back (the entry is validated by the reader of the trace). */
export function decodeTraceRow(sessionId: string, seq: number, json: unknown): { seq: number; entry: unknown } {
  if (typeof json !== 'string') return { seq, entry: { type: 'unreadable', text: `not JSON text (${typeof json}) in session ${sessionId}` } };
  try {
    return { seq, entry: JSON.parse(json) };
  } catch {
    // An unreadable row is reported by the trace reader as what it is, not as a failed read.
    return { seq, entry: { type: 'unreadable', text: json.slice(0, 200) } };
  }
}

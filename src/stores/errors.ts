import { LoopchartError, type LoopchartErrorCode } from '../errors.js';

/**
 * Another writer got there first: the stored version is not the one this writer loaded.
 * Nothing was written. Reload the session and decide again (or give up: another process
 * is driving it).
 */
export class SessionBusyError extends LoopchartError {
  readonly sessionId: string;
  readonly expected: number;
  readonly actual: number;
  constructor(sessionId: string, expected: number, actual: number) {
    super(
      'SessionBusy',
      expected === 0
        ? `session ${sessionId} already exists (version ${actual}); cannot create it again`
        : `session ${sessionId} is at version ${actual}, not ${expected}: another writer committed a step first`,
    );
    this.sessionId = sessionId;
    this.expected = expected;
    this.actual = actual;
  }
}

/** A step expected an existing session (expectedVersion > 0) but there is none. */
export class SessionNotFoundError extends LoopchartError {
  readonly sessionId: string;
  constructor(sessionId: string) {
    super('SessionNotFound', `session ${sessionId} does not exist`);
    this.sessionId = sessionId;
  }
}

/** Where in a session the bad data sits, so an operator can find the row. */
export type CorruptPart =
  | { kind: 'message'; position: number }
  | { kind: 'state' }
  | { kind: 'log' }
  | { kind: 'journal'; turnKey: string; toolCallId: string };

function describePart(part: CorruptPart): string {
  switch (part.kind) {
    case 'message':
      return `message at position ${part.position}`;
    case 'state':
      return 'state row';
    case 'log':
      return 'message log';
    case 'journal':
      return `tool journal entry ${part.turnKey}/${part.toolCallId}`;
  }
}

/**
 * A stored row of this session cannot be read back: unparsable JSON, a message that fails
 * `MessageSchema`, or a log with gaps. Only this session is affected; others stay loadable.
 */
export class CorruptSessionError extends LoopchartError {
  readonly sessionId: string;
  readonly part: CorruptPart;
  readonly problem: string;
  constructor(sessionId: string, part: CorruptPart, problem: string, options?: { cause?: unknown }) {
    super('CorruptSession', `session ${sessionId} is corrupt: ${describePart(part)}: ${problem}`, options);
    this.sessionId = sessionId;
    this.part = part;
    this.problem = problem;
  }
}

/**
 * The store was written by a newer loopchart (or by something else entirely): its schema
 * version is not one this code can read or migrate. Nothing was changed.
 */
export class StoreSchemaVersionError extends LoopchartError {
  readonly found: string;
  readonly supported: number;
  constructor(where: string, found: string, supported: number) {
    super(
      'StoreSchemaVersion',
      `${where} has store schema version ${found}; this loopchart reads versions up to ${supported}`,
    );
    this.found = found;
    this.supported = supported;
  }
}

/** The caller asked for a write that breaks the store contract. Nothing was written. */
export class InvalidWriteError extends LoopchartError {
  readonly sessionId: string;
  constructor(sessionId: string, problem: string) {
    super('InvalidWrite', `session ${sessionId}: ${problem}`);
    this.sessionId = sessionId;
  }
}

/**
 * The database stayed locked by another connection for longer than the configured wait
 * (SQLite's busy_timeout). Unlike SessionBusyError this says nothing about versions:
 * retrying later may succeed.
 */
export class StoreBusyError extends LoopchartError {
  constructor(where: string, options?: { cause?: unknown }) {
    super('StoreBusy', `${where} stayed locked by another writer; try again later`, options);
  }
}

/** The longest session id every store takes, in UTF-16 code units (what `string.length` counts). */
export const MAX_SESSION_ID_LENGTH = 256;

/**
 * A session id that breaks the one id rule every store applies before any query: a non-empty
 * string of at most `MAX_SESSION_ID_LENGTH` code units, well-formed Unicode (no lone surrogate,
 * which a database would store as U+FFFD and so merge with another id) and no control
 * character (C0, DEL, C1; NUL included). Nothing was read or written.
 *
 * @example
 * ```ts
 * try { await store.load('a\uD800'); } catch (e) { if (e instanceof InvalidSessionIdError) console.log(e.code); }
 * ```
 */
export class InvalidSessionIdError extends LoopchartError {
  /** The refused id, as given (it may hold anything: print `message`, which escapes it). */
  readonly sessionId: unknown;
  readonly problem: string;
  constructor(sessionId: unknown, problem: string) {
    super('InvalidSessionId', `invalid session id ${describeId(sessionId)}: ${problem}`);
    this.sessionId = sessionId;
    this.problem = problem;
  }
}

/**
 * At most 40 code units, quoted, with every control character (DEL and C1 too, which JSON
 * leaves as they are) and lone surrogate written as \u…: safe to print on a terminal.
 */
function describeId(sessionId: unknown): string {
  if (typeof sessionId !== 'string') return `of type ${typeof sessionId}`;
  const shown = JSON.stringify(sessionId.slice(0, 40)).replace(
    /[\u007f-\u009f]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
  return sessionId.length > 40 ? `${shown}… (${sessionId.length} code units)` : shown;
}

/**
 * The storage under a store failed: what the database or its driver reported, as a loopchart
 * error with a stable `code` and the driver's error as `cause`. The subclasses name the
 * failures an operator acts on differently; this class itself (code `StoreFailed`) is the rest.
 */
export class StoreError extends LoopchartError {
  /** Which store, e.g. `SQLite store /srv/app/loopchart.db` or `PostgreSQL store (schema loopchart)`. */
  readonly where: string;
  constructor(where: string, problem: string, options?: { cause?: unknown; code?: LoopchartErrorCode | undefined; message?: string | undefined }) {
    super(options?.code ?? 'StoreFailed', options?.message ?? `${where}: ${problem}`, options);
    this.where = where;
  }
}

/** The database file is damaged or is not a database at all. Restore it from a backup. */
export class StoreCorruptError extends StoreError {
  constructor(where: string, detail: string, options?: { cause?: unknown }) {
    super(where, `the database is corrupt or not a database (${detail})`, { ...options, code: 'StoreCorrupt' });
  }
}

/** The disk (or the database's size limit) is full. Nothing of the failed write was kept. */
export class StoreFullError extends StoreError {
  constructor(where: string, detail: string, options?: { cause?: unknown }) {
    super(where, `the database is full (${detail}); nothing of this write was kept`, { ...options, code: 'StoreFull' });
  }
}

/** The database cannot be reached or opened: a refused or lost connection, a file that cannot be opened. */
export class StoreUnavailableError extends StoreError {
  /** `where` names the database: its path, or its address with any password masked. */
  constructor(where: string, detail: string, options?: { cause?: unknown }) {
    const problem = `the database is unavailable (${detail})`;
    super(where, problem, { ...options, code: 'StoreUnavailable', message: `cannot reach the database at ${where}: ${detail}` });
  }
}

import { LoopchartError } from '../errors.js';

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

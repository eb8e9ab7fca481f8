import { MessageSchema, ToolMessageSchema } from '../schemas.js';
import type { Message, ToolMessage } from '../schemas.js';
import { CorruptSessionError } from './errors.js';
import type { CorruptPart } from './errors.js';
import type { StoredSession } from './session-store.js';
import { issuesText } from './step.js';

/**
 * Turning stored rows back into values, shared by every backend. Nothing read from storage is
 * trusted: each row is parsed and validated here, and any failure becomes a
 * CorruptSessionError that names the session and the row, so one bad session never takes the
 * others down and an operator knows which row to look at.
 */

export interface LogRow {
  position: number;
  message: string;
}

function parseJson(sessionId: string, part: CorruptPart, text: unknown): unknown {
  if (typeof text !== 'string') throw new CorruptSessionError(sessionId, part, `expected JSON text, found ${typeof text}`);
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new CorruptSessionError(sessionId, part, `unparsable JSON: ${(error as Error).message}`, { cause: error });
  }
}

export function decodeMessage(sessionId: string, row: LogRow): Message {
  const part: CorruptPart = { kind: 'message', position: row.position };
  const parsed = MessageSchema.safeParse(parseJson(sessionId, part, row.message));
  if (!parsed.success) {
    throw new CorruptSessionError(sessionId, part, `not a Message: ${issuesText(parsed.error)}`, { cause: parsed.error });
  }
  return parsed.data;
}

/** Rebuilds the log from rows ordered by position; positions must run 0..messageCount-1. */
export function decodeLog(sessionId: string, rows: Iterable<LogRow>, messageCount: number): Message[] {
  const messages: Message[] = [];
  for (const row of rows) {
    if (row.position !== messages.length) {
      throw new CorruptSessionError(
        sessionId,
        { kind: 'log' },
        `expected position ${messages.length}, found ${row.position} (a missing or stray row)`,
      );
    }
    messages.push(decodeMessage(sessionId, row));
  }
  if (messages.length !== messageCount) {
    throw new CorruptSessionError(
      sessionId,
      { kind: 'log' },
      `the state row counts ${messageCount} messages but the log holds ${messages.length}`,
    );
  }
  return messages;
}

export function decodeSession(
  sessionId: string,
  head: { version: number; messageCount: number; stateJson: unknown },
  rows: Iterable<LogRow>,
): StoredSession {
  const state = parseJson(sessionId, { kind: 'state' }, head.stateJson);
  return { sessionId, version: head.version, state, messages: decodeLog(sessionId, rows, head.messageCount) };
}

export function decodeJournalEntry(sessionId: string, turnKey: string, toolCallId: string, json: unknown): ToolMessage {
  const part: CorruptPart = { kind: 'journal', turnKey, toolCallId };
  const parsed = ToolMessageSchema.safeParse(parseJson(sessionId, part, json));
  if (!parsed.success) {
    throw new CorruptSessionError(sessionId, part, `not a ToolMessage: ${issuesText(parsed.error)}`, { cause: parsed.error });
  }
  return parsed.data;
}

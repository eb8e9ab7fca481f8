import type * as restate from '@restatedev/restate-sdk';
import type { AgentContext } from '../agent/core/context.js';
import type { Message } from '../schemas.js';
import { EMPTY_LOG, logEffect } from '../sessions/log-delta.js';
import { logOf, type MessageLog } from '../brain/message-log.js';
import { decodeRow, encodeRow } from '../sessions/session-row.js';

/**
 * A session's state in Restate's K/V, laid out as the SQL stores lay it out: the small state row
 * (`row`, the same versioned row `DurableSession` stores, migrated the same way when read) and
 * the append-only message log, one key per position (`log:<i>`) plus its length (`logLength`).
 * A step writes the messages it added and the row: its cost does not grow with the conversation.
 */

const ROW = 'row';
const LOG_LENGTH = 'logLength';
const at = (index: number) => `log:${index}`;

/** What was last written, to compute the next step's delta. */
export interface KvWritten {
  log: MessageLog;
  row: string;
}

/** The stored session (migrated to the current row version), or undefined for a new one. */
export async function loadSession(ctx: restate.ObjectSharedContext, sessionId: string): Promise<AgentContext | undefined> {
  const row = await ctx.get<unknown>(ROW);
  if (row === null) return undefined;
  const messages = await loadLog(ctx);
  // Throws SessionRowError naming the session for a row this build cannot read.
  return decodeRow(sessionId, row, messages);
}

/** The whole log, positions 0..n-1 (for reads and the start of a turn). */
export async function loadLog(ctx: restate.ObjectSharedContext): Promise<Message[]> {
  const length = (await ctx.get<number>(LOG_LENGTH)) ?? 0;
  const messages: Message[] = [];
  for (let index = 0; index < length; index++) messages.push((await ctx.get<Message>(at(index)))!);
  return messages;
}

/** The raw state row, for the shared `state` handler (no log read). */
export async function loadRow(ctx: restate.ObjectSharedContext): Promise<{ row: unknown; logLength: number }> {
  return { row: await ctx.get<unknown>(ROW), logLength: (await ctx.get<number>(LOG_LENGTH)) ?? 0 };
}

/** What a context looks like once written: the baseline of the next delta. */
export function writtenOf(context: AgentContext, stored: boolean): KvWritten {
  const log = logOf(context.brain.context);
  return stored ? { log, row: JSON.stringify(encodeRow(context)) } : { log: EMPTY_LOG, row: '' };
}

/**
 * Writes what changed since `written`: truncated positions cleared, new ones set by index, the
 * row. Returns the new baseline. Nothing is written when nothing changed.
 */
export function persistSession(ctx: restate.ObjectContext, context: AgentContext, written: KvWritten): KvWritten {
  const row = encodeRow(context);
  const rowJson = JSON.stringify(row);
  const log = logOf(context.brain.context);
  const effect = logEffect(written.log, log);
  const oldLength = written.log.length;
  if (rowJson === written.row && !('replaceLog' in effect) && effect.truncateTo === undefined && !effect.append) return written;
  let keep: number;
  let append: Message[];
  if ('replaceLog' in effect) {
    keep = 0;
    append = effect.replaceLog;
  } else {
    keep = effect.truncateTo ?? oldLength;
    append = effect.append ?? [];
  }
  append.forEach((message, offset) => ctx.set(at(keep + offset), message));
  const length = keep + append.length;
  for (let index = length; index < oldLength; index++) ctx.clear(at(index));
  if (length !== oldLength || written.row === '') ctx.set(LOG_LENGTH, length);
  ctx.set(ROW, row);
  return { log, row: rowJson };
}

import { z } from 'zod';
import { conversationFault } from './conversation.js';
import { InvalidFeedError } from '../errors.js';
import { MessageSchema, type Message } from '../schemas.js';

const HistorySchema = z.array(MessageSchema);

/**
 * A starting conversation from outside (`new LoopMachine({ history })`, an agent's
 * `input.history`), checked once where it enters: every message well formed, and the whole
 * coherent as a provider reads it (each call answered once, right after it, ids unique among the
 * calls open at once). Throws `InvalidFeedError` naming the position.
 *
 * @example
 * ```ts
 * parseHistory([{ role: 'user', content: 'Hi' }]); // the messages, parsed
 * parseHistory([{ role: 'assistant', content: '', toolCalls: [{ id: 'a', name: 'read', args: {} }] }]); // throws: no result
 * ```
 */
export function parseHistory(value: unknown): Message[] {
  const messages = parseFeed('history', HistorySchema, value);
  const fault = conversationFault(messages);
  if (fault) throw new InvalidFeedError('history', `starting history is not coherent: ${fault.problem}`);
  return messages;
}

/** A feed's argument checked against its schema; the first problem is an `InvalidFeedError` naming its path. */
export function parseFeed<S extends z.ZodType>(feed: string, schema: S, value: unknown): z.output<S> {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0]!;
  const where = issue.path.length ? ` at ${issue.path.join('.')}` : '';
  throw new InvalidFeedError(feed, `malformed argument${where}: ${issue.message}`);
}

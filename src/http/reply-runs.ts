import { z } from 'zod';
import { digestOf } from '../agent/approvals/approval-binding.js';
import type { Message, ToolCall } from '../schemas.js';

/**
 * Which run made each reply of a stored conversation, for a reload that shows each call with the
 * answer a person gave it: an answer names its run, and a chat's runs may give their calls the
 * same ids and arguments (a provider that numbers calls by their place in a turn), so a call's run
 * is what tells whose answer it is. The log does not keep runs; the trace does: each model call's
 * entry has its run and its reply, as the log stores it. A reply is found by its text and its
 * calls (ids, names, digests of their arguments), matched from the end of both, each entry once:
 * entries of replies a rewind took out of the log, or that never reached it, are passed over. A
 * reply the trace does not have (a store without one, a trace cut short) has no run.
 */

/** A reply with calls, as its model call's trace entry recorded it: the run it was made in. */
export interface TracedReply {
  run: number;
  content: string;
  toolCalls: ToolCall[];
}

/** The fields read of a model call's trace entry (see `TraceEntrySchema`). */
const ModelEntrySchema = z.object({
  type: z.literal('model'),
  run: z.number().int().nonnegative(),
  reply: z.object({
    message: z.object({
      content: z.string(),
      toolCalls: z.array(z.object({ id: z.string().min(1), name: z.string().min(1), args: z.unknown() })).min(1),
    }),
  }),
});

/** Whether a trace entry may be a reply with calls (checked before it is parsed: most model entries carry a whole prompt). */
export const mayBeReply = (entry: unknown): boolean => {
  const model = entry as { type?: unknown; reply?: { message?: { toolCalls?: unknown } | undefined } | undefined } | null;
  const calls = model?.reply?.message?.toolCalls;
  return model?.type === 'model' && Array.isArray(calls) && calls.length > 0;
};

/** The reply with calls a trace entry records, or null. */
export function replyOfEntry(entry: unknown): TracedReply | null {
  const parsed = ModelEntrySchema.safeParse(entry);
  if (!parsed.success) return null;
  const { run, reply } = parsed.data;
  return { run, content: reply.message.content, toolCalls: reply.message.toolCalls as ToolCall[] };
}

/** What tells replies apart: the text, and each call's id, name and digest of its arguments. */
const keyOf = (content: string, calls: readonly ToolCall[]): string => JSON.stringify([content, calls.map((call) => [call.id, call.name, digestOf(call)])]);

/** The run of each assistant message with calls of `messages` (by index) whose reply `replies` (a trace's, in order) has. */
export function runsOfReplies(messages: readonly Message[], replies: readonly TracedReply[]): Map<number, number> {
  const runs = new Map<number, number>();
  if (replies.length === 0) return runs;
  // The places of each reply in the trace, in order; a message takes the last one before the place the message after it took.
  const places = new Map<string, number[]>();
  replies.forEach((reply, at) => {
    const key = keyOf(reply.content, reply.toolCalls);
    const list = places.get(key);
    if (list) list.push(at);
    else places.set(key, [at]);
  });
  let before = replies.length;
  for (let at = messages.length - 1; at >= 0; at--) {
    const message = messages[at]!;
    if (message.role !== 'assistant' || !message.toolCalls?.length) continue;
    const list = places.get(keyOf(message.content, message.toolCalls));
    // Places at or after `before` were passed over for a later message: no earlier one takes them.
    while (list?.length && list.at(-1)! >= before) list.pop();
    const found = list?.pop();
    // Not in the trace: no run, and the entries before stay for the messages before.
    if (found === undefined) continue;
    runs.set(at, replies[found]!.run);
    before = found;
  }
  return runs;
}

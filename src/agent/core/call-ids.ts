import type { ModelReply } from '../../model.js';
import type { ToolCall } from '../../schemas.js';

/**
 * A reply whose tool calls have one id each. Providers do repeat ids within a reply (a
 * streamed call sent twice, a local model that numbers every call `call_0`), and a provider
 * rejects a conversation in which two open calls share an id. So, within one reply:
 * - a call that repeats an earlier one exactly (same id, name and arguments) is dropped: the
 *   provider sent the same call twice, and it runs once;
 * - a different call under an id already taken gets a fresh id (`<id>~2`, `<id>~3`, ...,
 *   skipping any the reply uses), runs, and is answered under that id.
 * Ids may repeat across replies (each is answered before the next reply): that is left alone.
 * The same reply always gives the same ids, so a replayed reply is renamed the same way.
 *
 * @example
 * ```ts
 * const call = { id: 'call_0', name: 'read', args: { path: 'a.txt' } };
 * const toolCalls = [call, call, { ...call, args: { path: 'b.txt' } }];
 * const reply = uniqueCallIds({ message: { role: 'assistant', content: '', toolCalls }, finishReason: 'tool-calls' });
 * reply.message.toolCalls?.map((c) => c.id); // ['call_0', 'call_0~2']
 * ```
 */
export function uniqueCallIds(reply: ModelReply): ModelReply {
  const calls = reply.message.toolCalls;
  if (!calls || calls.length < 2) return reply;
  const taken = new Map<string, ToolCall>();
  for (const call of calls) if (!taken.has(call.id)) taken.set(call.id, call);
  if (taken.size === calls.length) return reply;
  const used = new Set(calls.map((call) => call.id));
  const seen = new Map<string, ToolCall[]>();
  const unique: ToolCall[] = [];
  for (const call of calls) {
    const earlier = seen.get(call.id);
    if (!earlier) {
      seen.set(call.id, [call]);
      unique.push(call);
      continue;
    }
    if (earlier.some((other) => sameCall(other, call))) continue;
    earlier.push(call);
    let n = 2;
    while (used.has(`${call.id}~${n}`)) n++;
    const id = `${call.id}~${n}`;
    used.add(id);
    unique.push({ ...call, id });
  }
  return { ...reply, message: { ...reply.message, toolCalls: unique } };
}

const sameCall = (a: ToolCall, b: ToolCall): boolean => a.name === b.name && JSON.stringify(a.args) === JSON.stringify(b.args);

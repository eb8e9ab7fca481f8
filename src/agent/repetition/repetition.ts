import type { Message, ToolCall, ToolMessage } from '../../schemas.js';
import { InvalidConfigError } from '../../errors.js';
import { objectSlot } from '../../object-slot.js';

/**
 * Repetition ("doom loop") detection, as pure functions of the conversation: a model that asks
 * for the very same batch of tool calls reply after reply is stuck, and every further round
 * burns a turn of budget for a result it already has. The verdict is read from the
 * conversation alone, so a restored run (another process, a replay) reaches the same verdict
 * with no state of its own.
 *
 * - A batch is its calls' names and arguments; argument objects compare with their keys in any
 *   order, and the calls of a batch in any order (parallel calls have no meaningful order).
 * - Batches count "in a row" back from the newest: any other message than a tool result between
 *   two batches (a user message, a steer, a compaction's summary) ends the row.
 * - The `limit`-th identical batch in a row is not run: each of its calls is answered with a note
 *   saying why. One more identical batch seals the run with `repetition: …`.
 */

/**
 * Identical batches in a row whose last one is answered with a note instead of running.
 *
 * @example
 * ```ts
 * const agent = createAgentMachine({ model, repetition: DEFAULT_REPETITION_LIMIT + 2 }); // a patient agent: note at 5, seal at 6
 * ```
 */
export const DEFAULT_REPETITION_LIMIT = 3;

/**
 * The limit `repetition` configures: a whole number of at least 2 (the default 3), or null with
 * `false` (detection off). Anything else is an `InvalidConfigError` when the machine is created.
 *
 * @example
 * ```ts
 * repetitionLimit(undefined); // 3
 * repetitionLimit(false); // null
 * ```
 */
export function repetitionLimit(option: unknown): number | null {
  if (option === undefined) return DEFAULT_REPETITION_LIMIT;
  if (option === false) return null;
  if (typeof option !== 'number' || !Number.isInteger(option) || option < 2) {
    throw new InvalidConfigError(`repetition must be a whole number of at least 2 (identical tool-call batches in a row), or false; got ${describe(option)}`);
  }
  return option;
}

const describe = (value: unknown): string => (typeof value === 'number' ? String(value) : value === null ? 'null' : typeof value);

/**
 * JSON with object keys sorted at every depth: two argument objects that differ only in key
 * order give the same text. Arguments are plain JSON (the driver checks every reply), so no
 * cycle or exotic value can reach here.
 */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  const record = value as Record<string, unknown>;
  const keys = Object.keys(record).sort();
  return `{${keys.map((key) => `${JSON.stringify(key)}:${canonicalJson(record[key])}`).join(',')}}`;
}

const signatures = objectSlot<object, string>();

/** A batch as one string: each call's name and canonical arguments, sorted. Cached per message. */
export function batchSignature(message: { toolCalls: readonly ToolCall[] }): string {
  let signature = signatures.get(message);
  if (signature === undefined) {
    signature = message.toolCalls.map((call) => `${call.name}\u0000${canonicalJson(call.args)}`).sort().join('\u0001');
    signatures.set(message, signature);
  }
  return signature;
}

/** A conversation read by position: a list, or the brain's `MessageLog`. */
export interface MessageSequence {
  readonly length: number;
  at(index: number): Message | undefined;
}

/**
 * How many identical batches in a row end the conversation (history, then pending), counted up
 * to `cap`: 0 when its newest message after the tool results is not a batch of calls. Reads
 * from the end, so the cost is the batches counted, not the conversation's length.
 */
export function identicalBatchesInRow(conversation: MessageSequence, cap: number): number {
  let newest: string | undefined;
  let count = 0;
  for (let i = conversation.length - 1; i >= 0 && count < cap; i--) {
    const message = conversation.at(i)!;
    if (message.role === 'tool') continue;
    if (message.role !== 'assistant' || !message.toolCalls?.length) break;
    const signature = batchSignature(message as { toolCalls: ToolCall[] });
    if (newest === undefined) newest = signature;
    else if (signature !== newest) break;
    count++;
  }
  return count;
}

/** What the newest batch gets: run as usual, a note instead of running, or the run's seal. */
export type RepetitionVerdict = { type: 'run' } | { type: 'note'; times: number } | { type: 'seal'; reason: string };

/**
 * The verdict on the batch the run is about to execute (the newest message is its reply), for
 * a detector with `limit` (null: off).
 *
 * @example
 * ```ts
 * const batch = { role: 'assistant' as const, content: '', toolCalls: [{ id: 'c1', name: 'read_file', args: { path: 'a' } }] };
 * const result = { role: 'tool' as const, toolCallId: 'c1', toolName: 'read_file', content: 'text of a' };
 * const verdict = repetitionVerdict([batch, result, batch, result, batch, result, batch], 3);
 * if (verdict.type === 'seal') console.log(verdict.reason); // 'repetition: read_file({"path":"a"}) asked for 4 times in a row'
 * ```
 */
export function repetitionVerdict(conversation: MessageSequence, limit: number | null): RepetitionVerdict {
  if (limit === null) return { type: 'run' };
  const times = identicalBatchesInRow(conversation, limit + 1);
  if (times < limit) return { type: 'run' };
  if (times === limit) return { type: 'note', times };
  let last = conversation.length - 1;
  while (conversation.at(last)!.role !== 'assistant') last--;
  const newest = conversation.at(last) as { toolCalls: ToolCall[] };
  return { type: 'seal', reason: `repetition: ${batchLabel(newest.toolCalls)} asked for ${times} times in a row` };
}

/** The batch for a human: `name(args)` per call, cut short when long. */
function batchLabel(calls: readonly ToolCall[]): string {
  const label = calls.map((call) => `${call.name}(${canonicalJson(call.args)})`).join(', ');
  return label.length > 200 ? `${label.slice(0, 199)}…` : label;
}

const ordinal = (n: number): string => {
  const tens = n % 100;
  const suffix = tens >= 11 && tens <= 13 ? 'th' : ({ 1: 'st', 2: 'nd', 3: 'rd' } as Record<number, string>)[n % 10] ?? 'th';
  return `${n}${suffix}`;
};

/** The result each call of a noted batch gets instead of running: the model reads why. */
export function repetitionNote(call: ToolCall, times: number): ToolMessage {
  return {
    role: 'tool',
    toolCallId: call.id,
    toolName: call.name,
    content:
      `error: not run. This is the ${ordinal(times)} time in a row you asked for exactly these tool calls with the same arguments; ` +
      'the results would be the same as before. Use the results you already have or try something different: ' +
      'asking for the same calls once more ends the run.',
    isError: true,
  };
}

import { z } from 'zod';
import { RefusalReasonSchema } from '../agent/approvals/approval-binding.js';
import { GuardrailVerdictSchema } from '../agent/guardrails/guardrails.js';
import { DoubtActionSchema } from '../agent/core/call-decisions.js';
import { ToolPolicyVerdictSchema } from '../agent/approvals/tool-policy.js';
import type { SessionStore, TraceRecord } from '../stores/session-store.js';
import {
  CompactionReasonSchema,
  MessageSchema,
  OutcomeSchema,
  PolicySchema,
  StateNameSchema,
  ToolCallSchema,
  ToolMessageSchema,
  UsageSchema,
  type Message,
} from '../schemas.js';

/**
 * A durable session's trace: what happened and when, beside the message log and the state row
 * (which hold only the conversation and the current state). One entry per side effect (model
 * call with its latency, reply and the prompt as the model saw it; tool call with its duration),
 * per retry, approval, prune, resume, external event, and one per stored step with the brain's
 * counters. `loopchart view` draws the timeline from it; `replaySession` re-runs the brain over it.
 */

const count = z.number().int().nonnegative();
/** Milliseconds since the epoch. */
const at = z.number();
const ms = z.number().nonnegative();
const ErrorInfoSchema = z.object({ name: z.string(), message: z.string() });

/** A model reply as recorded (already normalized by the driver). */
const RecordedReplySchema = z.object({
  message: MessageSchema.options[2],
  finishReason: z.string().optional(),
  usage: UsageSchema.optional(),
});

/**
 * One trace entry (see the module comment); read entries back with `readSessionTrace`.
 *
 * @example
 * ```ts
 * for (const record of (await store.readTrace?.('support-42')) ?? []) {
 *   const parsed = TraceEntrySchema.safeParse(record.entry);
 *   if (parsed.success && parsed.data.type === 'model') console.log(parsed.data.ms, parsed.data.reply?.usage);
 * }
 * ```
 */
export const TraceEntrySchema = z.discriminatedUnion('type', [
  /** A run started with this prompt under this policy. */
  z.object({ type: z.literal('run'), at, run: count, prompt: z.string(), policy: PolicySchema }),
  /**
   * One model call. The prompt the model saw is the previous call's prompt cut to `promptBase`
   * messages, then `promptDelta` (instructions included): each call stores only what is new.
   */
  z.object({
    type: z.literal('model'),
    at,
    ms,
    run: count,
    turn: count,
    key: z.string(),
    /** The model that took the call (absent in traces of older builds). */
    model: z.string().optional(),
    tools: z.array(z.string()),
    promptBase: count,
    promptDelta: z.array(MessageSchema),
    reply: RecordedReplySchema.optional(),
    error: ErrorInfoSchema.optional(),
  }),
  z.object({ type: z.literal('retry'), at, run: count, turn: count, retry: count, delayMs: ms, error: z.string() }),
  /** The turn's model call failed with a fallback trigger: the run moved to the next model of its list. */
  z.object({ type: z.literal('fallback'), at, run: count, turn: count, from: z.string(), to: z.string(), trigger: z.string(), error: z.string() }),
  z.object({
    type: z.literal('tool'),
    at,
    ms,
    run: count,
    turn: count,
    key: z.string(),
    call: ToolCallSchema,
    result: ToolMessageSchema.optional(),
    error: ErrorInfoSchema.optional(),
    /**
     * The session of the child run the call started (an agent tool's, `<session>/run-<r>:turn-<t>:<call id>`):
     * a chat page reloaded shows that child's calls from it. Absent for other tools and in older traces.
     */
    child: z.string().optional(),
  }),
  z.object({
    type: z.literal('approval.requested'),
    at,
    run: count,
    calls: z.array(z.string()),
    /** What each call was shown as: a decision must name this digest (absent in older traces). */
    requests: z.array(z.object({ toolCallId: z.string(), digest: z.string() })).optional(),
  }),
  /** A decision the run took. */
  z.object({
    type: z.literal('approval'),
    at,
    run: count,
    toolCallId: z.string(),
    approved: z.boolean(),
    by: z.string().optional(),
    reason: z.string().optional(),
    digest: z.string().optional(),
    /** The decision stands for the rest of the run: the tool's later calls are not asked again (absent in older traces). */
    always: z.literal(true).optional(),
  }),
  /** A decision the run refused (`refusal` says why): it decided nothing. */
  z.object({
    type: z.literal('approval.refused'),
    at,
    run: count,
    toolCallId: z.string(),
    approved: z.boolean(),
    refusal: RefusalReasonSchema,
    detail: z.string(),
    by: z.string().optional(),
    digest: z.string().optional(),
  }),
  /** Calls found in doubt after a restart (started, no result, of tools that ask): the run waits for a decision. */
  z.object({
    type: z.literal('doubt.requested'),
    at,
    run: count,
    calls: z.array(z.string()),
    requests: z.array(z.object({ toolCallId: z.string(), digest: z.string() })),
  }),
  /** A decision for a call in doubt the run took. */
  z.object({
    type: z.literal('doubt'),
    at,
    run: count,
    toolCallId: z.string(),
    action: DoubtActionSchema,
    digest: z.string(),
    by: z.string().optional(),
    reason: z.string().optional(),
  }),
  /** A decision for a call in doubt that was refused: it decided nothing. */
  z.object({
    type: z.literal('doubt.refused'),
    at,
    run: count,
    toolCallId: z.string(),
    action: DoubtActionSchema,
    refusal: RefusalReasonSchema,
    detail: z.string(),
    by: z.string().optional(),
    digest: z.string().optional(),
  }),
  z.object({
    type: z.literal('compaction'),
    at,
    ms,
    run: count,
    turn: count,
    key: z.string(),
    reason: CompactionReasonSchema,
    before: count,
    after: count,
    rewritten: z.boolean(),
    error: ErrorInfoSchema.optional(),
  }),
  z.object({ type: z.literal('prune'), at, run: count, pruned: count, before: count, after: count }),
  /** One guardrail of a check (`check`: the run's input, or a reply that would complete it), with its verdict or why it failed. */
  z.object({
    type: z.literal('guardrail'),
    at,
    ms,
    run: count,
    turn: count,
    key: z.string(),
    check: z.string(),
    stage: z.enum(['input', 'output']),
    name: z.string(),
    verdict: GuardrailVerdictSchema.optional(),
    error: ErrorInfoSchema.optional(),
  }),
  /**
   * The tool policy's verdict on one call, before the approval rules and before anything runs,
   * with the policy that decided (`by`: the one that denied, else the first that asked for
   * approval; absent for an allow, which every policy gave, and for a verdict replayed from a journal).
   */
  z.object({
    type: z.literal('policy'),
    at,
    ms,
    run: count,
    turn: count,
    key: z.string(),
    call: ToolCallSchema,
    verdict: ToolPolicyVerdictSchema.optional(),
    by: z.string().optional(),
    error: ErrorInfoSchema.optional(),
  }),
  /** The model asked for the same batch `times` times in a row: its calls were answered with a note, not run. */
  /** The conversation was handed from agent `from` to agent `to` (handoffs). */
  z.object({ type: z.literal('handoff'), at, run: count, turn: count, from: z.string(), to: z.string() }),
  z.object({ type: z.literal('repetition'), at, run: count, turn: count, times: count, calls: z.array(ToolCallSchema) }),
  /** An event a host sent that moves the brain (cancel, seal, steer, policy, rewind). */
  z.object({ type: z.literal('event'), at, run: count, event: z.record(z.string(), z.unknown()) }),
  /** A step was stored: the brain's counters then, and the driver's IO state. */
  z.object({
    type: z.literal('step'),
    at,
    v: count,
    run: count,
    state: StateNameSchema,
    io: z.string(),
    turns: count,
    tokens: count,
    toolCalls: count,
    log: count,
    policy: PolicySchema,
    usage: UsageSchema,
    outcome: OutcomeSchema.nullable(),
  }),
  /**
   * A process opened the session with a run in flight: the previous one stopped mid-run (a
   * crash), unless the entry before is a `closed` at the same version.
   */
  z.object({ type: z.literal('resumed'), at, v: count, run: count, state: StateNameSchema, turns: count, tokens: count }),
  /**
   * The session was closed cleanly (`close()`) with its run in flight, stored at version `v`:
   * waiting for an approval, an operation's yield, a model call. Reopening it continues the run.
   */
  z.object({ type: z.literal('closed'), at, v: count, run: count, state: StateNameSchema, io: z.string() }),
  z.object({
    type: z.literal('finished'),
    at,
    run: count,
    outcome: OutcomeSchema,
    usage: UsageSchema,
    costUsd: z.number().optional(),
  }),
  /** This session was forked from another one's log prefix. */
  z.object({ type: z.literal('forked'), at, from: z.string(), messages: count }),
]);

export type TraceEntry = z.infer<typeof TraceEntrySchema>;
export type TraceEntryOf<T extends TraceEntry['type']> = Extract<TraceEntry, { type: T }>;

/** One trace entry as read back: valid, or the reason it is not (shown, never dropped silently). */
export type ReadTraceEntry = { seq: number; entry: TraceEntry } | { seq: number; invalid: string };

/** Validates the records a store returned. */
export function parseTrace(records: readonly TraceRecord[]): ReadTraceEntry[] {
  return records.map(({ seq, entry }) => {
    const parsed = TraceEntrySchema.safeParse(entry);
    return parsed.success ? { seq, entry: parsed.data } : { seq, invalid: z.prettifyError(parsed.error) };
  });
}

/**
 * The session's trace, validated; empty for a store without one.
 *
 * @example
 * ```ts
 * const trace = await readSessionTrace(store, 'support-42');
 * const models = trace.flatMap((r) => ('entry' in r && r.entry.type === 'model' ? [r.entry] : []));
 * ```
 */
export async function readSessionTrace(store: SessionStore, sessionId: string, afterSeq = 0): Promise<ReadTraceEntry[]> {
  return store.readTrace ? parseTrace(await store.readTrace(sessionId, afterSeq)) : [];
}

/**
 * Tracks the prompt of the previous model call to store each call's prompt as a delta. A
 * message is kept when it is the very same object (the driver grows its lists in place) or a
 * system message with the same text (prompt parts are rebuilt per call).
 */
export class PromptDelta {
  /**
   * The previous prompt by reference, with its length then: the driver's request lists only
   * grow in place or are replaced by new ones, so their first `#length` messages never change.
   * No copy per call, and the same list grown costs only its new messages.
   */
  #last: readonly Message[] = [];
  #length = 0;

  next(messages: readonly Message[]): { promptBase: number; promptDelta: Message[] } {
    let base = 0;
    if (messages === this.#last && messages.length >= this.#length) base = this.#length;
    else {
      const end = Math.min(this.#length, messages.length);
      while (base < end && sameMessage(this.#last[base]!, messages[base]!)) base++;
    }
    this.#last = messages;
    this.#length = messages.length;
    return { promptBase: base, promptDelta: messages.slice(base) };
  }
}

const sameMessage = (a: Message, b: Message) => a === b || (a.role === 'system' && b.role === 'system' && a.content === b.content);

/**
 * The prompt of every model call in the trace, rebuilt from the deltas: index i is the prompt
 * of the i-th model entry.
 */
export function promptsOf(entries: readonly TraceEntry[]): Message[][] {
  const prompts: Message[][] = [];
  let last: Message[] = [];
  for (const entry of entries) {
    if (entry.type !== 'model') continue;
    last = last.slice(0, entry.promptBase).concat(entry.promptDelta);
    prompts.push(last);
  }
  return prompts;
}

/** A thrown value as recorded: its name and message, never its stack. */
export function errorRecord(error: unknown): { name: string; message: string } {
  try {
    if (error instanceof Error) return { name: String(error.name), message: String(error.message) };
    return { name: 'Error', message: String(error) };
  } catch {
    return { name: 'Error', message: 'an error whose message could not be read' };
  }
}

/** A driver snapshot's state value as one dotted path per active leaf, e.g. `Running.AwaitingModel`. */
export function statePath(value: unknown): string {
  if (typeof value === 'string') return value;
  if (typeof value !== 'object' || value === null) return String(value);
  return Object.entries(value as Record<string, unknown>)
    .map(([key, inner]) => {
      const rest = statePath(inner);
      return rest.includes(' | ') ? rest.split(' | ').map((leaf) => `${key}.${leaf}`).join(' | ') : `${key}.${rest}`;
    })
    .join(' | ');
}

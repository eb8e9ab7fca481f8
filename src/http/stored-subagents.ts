import { z } from 'zod';
import { digestOf } from '../agent/approvals/approval-binding.js';
import { pendingCalls } from '../agent/core/brain-state.js';
import { type AgentContext } from '../agent/core/context.js';
import { batchKey } from '../agent/core/driver-rules.js';
import { batchResults } from '../agent/core/run-rules.js';
import { innerKey, serviceKey } from '../agent/protocol/keys.js';
import { runInFlight } from '../agent/protocol/actor-types.js';
import { childSessionId } from '../agent/subagents/subagents.js';
import { decodeRow } from '../sessions/session-row.js';
import type { SessionStore } from '../stores/session-store.js';
import type { Message, ToolCall, ToolMessage } from '../schemas.js';
import { addAnswer, answerOfEntry, isDecision, type Answers } from './denials.js';
import { mayBeReply, replyOfEntry, type TracedReply } from './reply-runs.js';
import { runRecords } from './run-trace.js';

/**
 * The subagents of a chat as the store keeps them, for a page that loads the chat (a reload) or
 * replays its run in flight from the store (a reattach in a process that does not hold the run):
 * the live stream showed each child's calls as they ran (`RunChunker.childEvent`); these are read
 * back from the child sessions, so the page shows the same parts.
 *
 * Which call ran which child: the session's trace, whose entry for a finished call names the child
 * session it opened (`child`), and, for a call of the batch in flight (no entry yet), the session
 * its key names, if there is one. A child's id is always built here from its parent's own session
 * id, its run, turn and call id (`childSessionId`), never taken from a request nor from the stored
 * string: a chat reaches only sessions under its own id, which the chat's authorization admitted
 * (its `chatKey`); a child whose scope is not the chat's is not shown.
 *
 * Bounded: a request reads at most `MAX_CHILD_SESSIONS` child sessions (rows and logs, looking up
 * a call in flight included), and of each child's trace (its answers and its own children) the
 * first `MAX_CHILD_TRACE_ENTRIES` entries. A child that cannot be shown whole is a
 * `data-subagent-incomplete` part under its call, saying why: its session is missing, unreadable,
 * past the bound, or its trace is longer than the bound (its calls show; answers and children the
 * entries past it name do not).
 */

/** The most child sessions one request reads (each a row and its log). */
export const MAX_CHILD_SESSIONS = 50;

/** The most entries read of one child's trace. */
export const MAX_CHILD_TRACE_ENTRIES = 2000;

/** Why a child is not shown whole. */
export type IncompleteReason = 'missing' | 'unreadable' | 'bound';

/**
 * The data of a `data-subagent-incomplete` part, which a reloaded page gets where a subagent's
 * steps are not shown whole: the call that ran the child (as the page shows it, `c1`, `c1/c2`),
 * why (`missing`: its session is not in the store; `unreadable`: its row could not be read;
 * `bound`: past what a reload reads, see the chat guide), and a sentence saying so.
 *
 * @example
 * ```ts
 * import type { UIMessage } from 'ai';
 * import type { SubagentIncomplete } from 'loopchart/http';
 *
 * declare const message: UIMessage; // a message of GET <api>/<id>/messages
 * const notes = (message: UIMessage) =>
 *   message.parts.flatMap((part) => (part.type === 'data-subagent-incomplete' ? [(part as { data: SubagentIncomplete }).data] : []));
 * for (const note of notes(message)) console.log(`${note.toolCallId}: ${note.message}`);
 * ```
 */
export interface SubagentIncomplete {
  toolCallId: string;
  reason: IncompleteReason;
  message: string;
}

/** A child session as a page shows it, for the call `callId` (its parent's id for the call, with that call's `digest`). */
export type StoredChild = { callId: string; digest: string } & (
  | {
      kind: 'shown';
      /** Its replies and tool results (its run's, after its prompt), the results of its batch in flight included. */
      messages: Message[];
      /** The calls a person answered, by the child's own call ids (see denials.ts). */
      answers: Answers;
      /** The calls a person was asked about, by the child's own call ids. */
      asked: AskedCall[];
      /** Its own children, by the ordinal of their call among the calls of `messages`. */
      children: ChildrenOf;
      /** Its trace was read to the bound only. */
      cut: boolean;
    }
  | { kind: 'incomplete'; reason: IncompleteReason; message: string }
);

/** Children by the ordinal of their call among the tool calls of a list of messages (0 for the first call). */
export type ChildrenOf = ReadonlyMap<number, StoredChild>;

/** What a session's trace says for a page: the answers people gave, the calls that opened a child, the replies with calls. */
export interface TraceFacts {
  answers: Answers;
  opened: Opened[];
  /** The replies with calls, in order, with their runs (see reply-runs.ts). */
  replies: TracedReply[];
  /** The calls a person was asked about (the page was shown an approval request), in order. */
  asked: AskedCall[];
  /** The read stopped at its limit: what the entries past it say is not known. */
  cut: boolean;
}

/**
 * A call a person was asked about in run `run`: its id and the digest of the call as shown;
 * `kind`: an approval, or whether to run again a call in doubt after a restart.
 */
export interface AskedCall {
  kind: 'approval' | 'doubt';
  run: number;
  toolCallId: string;
  digest: string;
}

/** The fields read of a trace entry for requests (see `TraceEntrySchema`; older traces have no digests: not read). */
const AskedEntrySchema = z.object({
  type: z.enum(['approval.requested', 'doubt.requested']),
  run: z.number().int().nonnegative(),
  requests: z.array(z.object({ toolCallId: z.string().min(1), digest: z.string() })),
});

/** A call that opened a child session: its run, turn, id and digest. */
interface Opened {
  run: number;
  turn: number;
  callId: string;
  digest: string;
}

/** The fields read of a trace entry for a tool call that opened a child (see `TraceEntrySchema`). */
const OpenedEntrySchema = z.object({
  type: z.literal('tool'),
  run: z.number().int().nonnegative(),
  turn: z.number().int().nonnegative(),
  call: z.object({ id: z.string().min(1), name: z.string().min(1), args: z.unknown() }),
  child: z.string(),
});

/** Decisions, requests, the calls that opened children and replies with calls are parsed: the trace also holds every model call's prompt. */
const isRead = (entry: unknown): boolean => {
  const type = (entry as { type?: unknown } | null)?.type;
  if (type === 'approval.requested' || type === 'doubt.requested') return true;
  return type === 'tool' ? typeof (entry as { child?: unknown }).child === 'string' : isDecision(entry) || mayBeReply(entry);
};

/** The session of the child `call` opened in turn `turn` of run `run` of `sessionId`, or null when no valid id names it. */
function childOf(sessionId: string, run: number, turn: number, callId: string): string | null {
  try {
    return childSessionId(sessionId, innerKey(serviceKey({ sessionId, runIndex: run }, turn, 'tools'), { kind: 'tool', call: callId, rerun: 0 }));
  } catch {
    return null;
  }
}

/**
 * The session's answers and opened children, from its trace (`run`: of that run only, read from
 * the run's start, see run-trace.ts; `limit`: of its first entries only). A store without a trace
 * has none.
 */
export async function readTraceFacts(store: SessionStore, sessionId: string, { run, limit }: { run?: number | undefined; limit?: number | undefined } = {}): Promise<TraceFacts> {
  const facts: TraceFacts = { answers: new Map(), opened: [], replies: [], asked: [], cut: false };
  if (!store.readTrace) return facts;
  const traced = { readTrace: store.readTrace.bind(store) };
  const records = run !== undefined ? await runRecords(traced, sessionId, run) : await traced.readTrace(sessionId, 0, limit === undefined ? undefined : limit + 1);
  // A store that ignores the limit (one written before it) is read to it all the same.
  if (limit !== undefined && records.length > limit) facts.cut = true;
  for (const { entry } of limit === undefined ? records : records.slice(0, limit)) {
    if (!isRead(entry)) continue;
    const answer = answerOfEntry(entry);
    if (answer) {
      if (run === undefined || answer.answer.run === run) addAnswer(facts.answers, answer.toolCallId, answer.answer);
      continue;
    }
    const reply = replyOfEntry(entry);
    if (reply) {
      if (run === undefined || reply.run === run) facts.replies.push(reply);
      continue;
    }
    const asked = AskedEntrySchema.safeParse(entry);
    if (asked.success) {
      const kind = asked.data.type === 'approval.requested' ? 'approval' : 'doubt';
      if (run === undefined || asked.data.run === run) facts.asked.push(...asked.data.requests.map((request) => ({ kind, run: asked.data.run, ...request }) as const));
      continue;
    }
    const opened = OpenedEntrySchema.safeParse(entry);
    if (!opened.success || (run !== undefined && opened.data.run !== run)) continue;
    const { run: taken, turn, call, child } = opened.data;
    // The entry names the child its call opened; an entry naming another session (not written by this build) is not followed.
    if (childOf(sessionId, taken, turn, call.id) !== child) continue;
    facts.opened.push({ run: taken, turn, callId: call.id, digest: digestOf(call as ToolCall) });
  }
  return facts;
}

/** Reads the child sessions of a chat, up to the bound (one per request). */
export class StoredSubagents {
  readonly #store: SessionStore;
  /** The chat's scope: its children were made with it. */
  readonly #scope: string | undefined;
  readonly #report: (error: unknown) => void;
  #reads = 0;

  /** `report`: told of what a child's read threw (the page sees only that the child could not be read). */
  constructor(store: SessionStore, scope: string | undefined, report: (error: unknown) => void) {
    this.#store = store;
    this.#scope = scope;
    this.#report = report;
  }

  /**
   * The children of the calls in `messages`, a list of the session `sessionId`'s messages, by
   * call ordinal, read depth first in the order a page shows them. `facts`: what the session's
   * trace says (of the runs `messages` holds). `inFlight`: the session's context when its run is
   * in flight and `messages` ends with its batch: a call of that batch that has no trace entry yet
   * is looked up by the child id its key names.
   */
  async childrenOf(sessionId: string, messages: readonly Message[], facts: TraceFacts, inFlight?: AgentContext | undefined): Promise<ChildrenOf> {
    const calls = messages.flatMap((message) => (message.role === 'assistant' ? (message.toolCalls ?? []) : []));
    // A call's entry is the last unclaimed one with its id and digest, the list read from its end:
    // entries of calls a rewind or a stop took out of the log come before the ones it keeps.
    const byCall = new Map<string, Opened[]>();
    for (const opened of facts.opened) {
      const key = `${opened.callId}\u0000${opened.digest}`;
      const list = byCall.get(key);
      if (list) list.push(opened);
      else byCall.set(key, [opened]);
    }
    const ids = new Map<number, { id: string; known: boolean }>();
    for (let at = calls.length - 1; at >= 0; at--) {
      const call = calls[at]!;
      const opened = byCall.get(`${call.id}\u0000${digestOf(call)}`)?.pop();
      const id = opened && childOf(sessionId, opened.run, opened.turn, call.id);
      if (id) ids.set(at, { id, known: true });
    }
    if (inFlight && runInFlight(inFlight.brain)) {
      const batch = new Set(pendingCalls(inFlight.brain).map(({ call }) => call.id));
      const last = messages.findLastIndex((message) => message.role === 'assistant');
      const first = calls.length - (last < 0 ? 0 : ((messages[last] as { toolCalls?: ToolCall[] | undefined }).toolCalls?.length ?? 0));
      for (let at = first; at < calls.length; at++) {
        const call = calls[at]!;
        if (ids.has(at) || !batch.has(call.id)) continue;
        const id = childOf(sessionId, inFlight.runIndex, inFlight.brain.context.turnsTaken, call.id);
        if (id) ids.set(at, { id, known: false });
      }
    }
    const children = new Map<number, StoredChild>();
    for (const [at, { id, known }] of [...ids].sort(([a], [b]) => a - b)) {
      const call = calls[at]!;
      const child = await this.#read(id, known);
      if (child) children.set(at, { callId: call.id, digest: digestOf(call), ...child });
    }
    return children;
  }

  /**
   * One child, read to the bound, or why it is not shown; null for a call in flight that opened
   * no child (not an agent tool's, or its child not stored yet).
   */
  async #read(sessionId: string, known: boolean): Promise<DistributiveOmit<StoredChild, 'callId' | 'digest'> | null> {
    const incomplete = (reason: IncompleteReason, message: string) => ({ kind: 'incomplete' as const, reason, message });
    if (this.#reads >= MAX_CHILD_SESSIONS) {
      return known ? incomplete('bound', `not shown: a page loads the steps of at most ${MAX_CHILD_SESSIONS} subagents`) : null;
    }
    this.#reads++;
    let context: AgentContext;
    let facts: TraceFacts;
    let batch: ToolMessage[] = [];
    try {
      const stored = await this.#store.load(sessionId);
      if (!stored) return known ? incomplete('missing', "not shown: the subagent's session is not in the store") : null;
      context = decodeRow(sessionId, stored.state, stored.messages);
      // Made with its parent's scope: a session of another is not this chat's to show.
      if (context.scope !== this.#scope) return incomplete('unreadable', "not shown: the subagent's session could not be read");
      facts = await readTraceFacts(this.#store, sessionId, { limit: MAX_CHILD_TRACE_ENTRIES });
      if (context.brain.value === 'AwaitingTools') {
        // Its batch in flight: the results it has are journaled, not logged yet.
        const toolJournal = await this.#store.journaledToolResults(sessionId, batchKey(context));
        batch = batchResults({ ...context, toolJournal }, Number.MAX_SAFE_INTEGER).flatMap(({ result }) => (result ? [result] : []));
      }
    } catch (error) {
      this.#report(error);
      return incomplete('unreadable', "not shown: the subagent's session could not be read");
    }
    const { history, pending } = context.brain.context;
    // Its replies and results: its prompt, and the feedback loopchart wrote to its model, are no calls.
    const messages = [...history, ...pending, ...batch].filter((message) => message.role === 'assistant' || message.role === 'tool');
    const children = await this.childrenOf(sessionId, messages, facts, context);
    return { kind: 'shown', messages, answers: facts.answers, asked: facts.asked, children, cut: facts.cut };
  }
}

/** `Omit` over each member of a union. */
type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

/** The marker a page shows for a child not shown whole (`toolCallId`: its call as the page shows it), or null when it is. */
export function incompleteOf(toolCallId: string, child: StoredChild): SubagentIncomplete | null {
  if (child.kind === 'incomplete') return { toolCallId, reason: child.reason, message: child.message };
  if (!child.cut) return null;
  return {
    toolCallId,
    reason: 'bound',
    message: `partly shown: only the first ${MAX_CHILD_TRACE_ENTRIES} entries of the subagent's trace were read (answers and subagents after them are not shown)`,
  };
}

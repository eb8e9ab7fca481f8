import { z } from 'zod';
import { deniedResult } from '../agent/core/call-decisions.js';
import { digestOf } from '../agent/approvals/approval-binding.js';
import { failedResult } from '../agent/in-doubt/in-doubt.js';
import type { SessionStore } from '../stores/session-store.js';
import type { ToolCall, ToolMessage } from '../schemas.js';

/**
 * The calls of a chat a person denied, for a reload to show them as the live stream did (AI SDK 6
 * and 7: `output-denied`, with the approval the page answered). The stored conversation cannot
 * tell: a denial is an error result like any tool's, and its text (`denied: <reason>`) is one a
 * tool, or a user through a tool's input, could write too. The session's trace can: it records
 * each decision the run took, in a live session or in the store at rest (`decideStored`), bound
 * to the call's run and digest. A store without a trace (it is optional) shows none denied.
 */

/** What the "no" was: a denied approval, or a call in doubt failed instead of run again. */
type DenialKind = 'approval' | 'doubt';

/** One denial the trace records. */
export interface Denial {
  kind: DenialKind;
  /** The run it was taken in, which the approval id the page answered names. */
  run: number;
  /** The digest of the call as it was shown. */
  digest: string;
  /** The reason the decision gave (the model read it in the call's result). */
  reason?: string | undefined;
  /** Who decided, as the decision said (`chat`: this handler, for a call in doubt). */
  by?: string | undefined;
}

/** Denials by call id, in the order they were taken (a model may give calls of later runs the same id). */
export type Denials = Map<string, Denial[]>;

/** The reason a call in doubt the page did not run again fails with when the page gave none. */
export const NOT_RUN_AGAIN = 'the user did not run it again after it was cut off';

/** The trace entries read here (the fields read; see `TraceEntrySchema`): a decision that said no. */
const DenialEntrySchema = z.discriminatedUnion('type', [
  z.object({ type: z.literal('approval'), run: z.number(), toolCallId: z.string(), approved: z.literal(false), digest: z.string(), by: z.string().optional(), reason: z.string().optional() }),
  z.object({ type: z.literal('doubt'), run: z.number(), toolCallId: z.string(), action: z.literal('fail'), digest: z.string(), by: z.string().optional(), reason: z.string().optional() }),
]);

/** Only decisions are parsed: the trace also holds every model call, with its prompt. */
const isDecision = (entry: unknown): boolean => {
  const type = (entry as { type?: unknown } | null)?.type;
  return type === 'approval' || type === 'doubt';
};

/** The reason as the page's approval part keeps it: the handler's stand-in for none (NOT_RUN_AGAIN) was never on the page. */
export function pageReason(denial: Denial): string | undefined {
  if (denial.kind === 'doubt' && denial.by === 'chat' && denial.reason === NOT_RUN_AGAIN) return undefined;
  return denial.reason;
}

/** The session's denials, from its trace. */
export async function readDenials(store: SessionStore, sessionId: string): Promise<Denials> {
  const denials: Denials = new Map();
  for (const { entry } of (await store.readTrace?.(sessionId)) ?? []) {
    if (!isDecision(entry)) continue;
    const parsed = DenialEntrySchema.safeParse(entry);
    if (!parsed.success) continue;
    const { type, run, toolCallId, digest, reason, by } = parsed.data;
    const denial: Denial = { kind: type, run, digest, reason, by };
    const list = denials.get(toolCallId);
    if (list) list.push(denial);
    else denials.set(toolCallId, [denial]);
  }
  return denials;
}

/** The result a denial gave its call: what the model read instead of the tool's. */
const resultOf = (denial: Denial, call: ToolCall): ToolMessage =>
  denial.kind === 'approval' ? deniedResult(call, { approved: false, reason: denial.reason }) : failedResult(call, denial.reason);

/**
 * The denial that gave `call` this result, taken from `denials` (each stands for one result), or
 * undefined. It must name this call as shown (its digest) and have written exactly this result:
 * a call of another run with the same id and arguments that ran, or failed on its own, is not it.
 */
export function claimDenial(denials: Denials, call: ToolCall, result: ToolMessage): Denial | undefined {
  const list = denials.get(call.id);
  if (!list || !result.isError) return undefined;
  const at = list.findIndex((denial) => denial.digest === digestOf(call) && resultOf(denial, call).content === result.content);
  return at < 0 ? undefined : list.splice(at, 1)[0];
}

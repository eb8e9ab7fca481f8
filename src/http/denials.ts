import { z } from 'zod';
import { deniedResult } from '../agent/core/call-decisions.js';
import { digestOf } from '../agent/approvals/approval-binding.js';
import { failedResult } from '../agent/in-doubt/in-doubt.js';
import type { ToolCall, ToolMessage } from '../schemas.js';
import type { AiSdkVersion } from './ai-sdk-version.js';

/**
 * The calls of a chat a person answered, and how a page shows a call that was answered: the one
 * rule (`callEnd`) the live stream, a page's replay of a run (reattach) and the reload share.
 *
 * Which calls were answered: the stored conversation cannot tell. A denial is an error result
 * like any tool's, and its text (`denied: <reason>`) is one a tool, or a user through a tool's
 * input, could write too; a tool policy's denial is a decision with the same result that nobody
 * was asked for (the page shows it as the error it is). The session's trace can: it records each
 * decision a person took (`approval.decided`, `doubt.decided`; a policy's verdict is not one), in
 * a live session or in the store at rest (`decideStored`), bound to the call's run and digest.
 * While this process runs the chat, the answers the page sends join them. A store without a trace
 * (it is optional) shows none answered.
 */

/** What was answered: an approval, or a call in doubt run again (approved) or failed instead. */
type AnswerKind = 'approval' | 'doubt';

/** One answer to a call's approval request (or "run it again?" for a call in doubt). */
export interface Answer {
  kind: AnswerKind;
  /** The run it was taken in (a subagent's call: the child's), which the approval id the page answered names. */
  run: number;
  /** The digest of the call as it was shown. */
  digest: string;
  approved: boolean;
  /** The reason the decision gave (a denial's: the model read it in the call's result). */
  reason?: string | undefined;
  /** Who decided, as the decision said (`chat`: this handler, for a call in doubt). */
  by?: string | undefined;
}

/** Answers by call id, in the order they were taken (a model may give calls of later runs the same id). */
export type Answers = Map<string, Answer[]>;

/** The reason a call in doubt the page did not run again fails with when the page gave none. */
export const NOT_RUN_AGAIN = 'the user did not run it again after it was cut off';

/** The trace entries read here (the fields read; see `TraceEntrySchema`): a person's decision. */
const AnswerEntrySchema = z.discriminatedUnion('type', [
  z.object({ type: z.literal('approval'), run: z.number(), toolCallId: z.string(), approved: z.boolean(), digest: z.string(), by: z.string().optional(), reason: z.string().optional() }),
  z.object({ type: z.literal('doubt'), run: z.number(), toolCallId: z.string(), action: z.enum(['rerun', 'result', 'fail']), digest: z.string(), by: z.string().optional(), reason: z.string().optional() }),
]);

/** Whether a trace entry is a person's decision (the entries `answerOfEntry` reads). */
export const isDecision = (entry: unknown): boolean => {
  const type = (entry as { type?: unknown } | null)?.type;
  return type === 'approval' || type === 'doubt';
};

/** Adds an answer to `answers`, after those of its call taken before. */
export function addAnswer(answers: Answers, toolCallId: string, answer: Answer): void {
  const list = answers.get(toolCallId);
  if (list) list.push(answer);
  else answers.set(toolCallId, [answer]);
}

/** The answer a trace entry records (a person's decision, see `isDecision`), with its call, or null for any other entry. */
export function answerOfEntry(entry: unknown): { toolCallId: string; answer: Answer } | null {
  const parsed = AnswerEntrySchema.safeParse(entry);
  if (!parsed.success) return null;
  const { run, toolCallId, digest, reason, by } = parsed.data;
  // A call in doubt run again, or given its result by hand, was let through: approved.
  const approved = parsed.data.type === 'approval' ? parsed.data.approved : parsed.data.action !== 'fail';
  return { toolCallId, answer: { kind: parsed.data.type, run, digest, approved, reason, by } };
}

/** The reason as the page's approval part keeps it: the handler's stand-in for none (NOT_RUN_AGAIN) was never on the page. */
export function pageReason(answer: Answer): string | undefined {
  if (answer.kind === 'doubt' && answer.by === 'chat' && answer.reason === NOT_RUN_AGAIN) return undefined;
  return answer.reason;
}

/** The result a denial gave its call: what the model read instead of the tool's. */
const resultOf = (denial: Answer, call: ToolCall): ToolMessage =>
  denial.kind === 'approval' ? deniedResult(call, { approved: false, reason: denial.reason }) : failedResult(call, denial.reason);

/**
 * The answer that decided `call`, which has this result, taken from `answers` (each stands for one
 * result), or undefined. It must name this call as shown (its digest), and `run`, the run the call
 * was made in when it is known (answers of several runs, a reload's); a denial must have written
 * exactly this result: a call of another run with the same id and arguments that ran, or failed
 * on its own, is not it. `denials`: only a denial is taken (a reload's call whose run is not known
 * takes no approval: its result says nothing of it).
 */
export function claimAnswer(answers: Answers, call: ToolCall, result: ToolMessage, { denials = false, run }: { denials?: boolean | undefined; run?: number | undefined } = {}): Answer | undefined {
  const list = answers.get(call.id);
  if (!list) return undefined;
  const decided = (answer: Answer): boolean => {
    if (answer.digest !== digestOf(call)) return false;
    if (run !== undefined && answer.run !== run) return false;
    if (answer.approved) return !denials;
    return result.isError === true && resultOf(answer, call).content === result.content;
  };
  const at = list.findIndex(decided);
  if (at < 0) return undefined;
  const [answer] = list.splice(at, 1);
  // A call approved, then cut off while it ran, was asked again after the restart (in doubt): that
  // later answer decided its result, and the approval stands for no result of its own.
  const again = answer!.kind === 'approval' ? list.findIndex((later) => later.kind === 'doubt' && later.run === answer!.run && later.digest === answer!.digest) : -1;
  return again >= 0 && decided(list[again]!) ? list.splice(again, 1)[0] : answer;
}

/** The answer as a page's tool part carries it (`addToolApprovalResponse` leaves it so): `id` is the approval id it answered. */
export interface ShownApproval {
  id: string;
  approved: boolean;
  reason?: string | undefined;
}

export const shownApproval = (answer: Answer, id: string): ShownApproval => {
  const reason = pageReason(answer);
  return { id, approved: answer.approved, ...(reason !== undefined && { reason }) };
};

/**
 * Who a call's end is shown to: `page`, a page that holds the message with the answers it gave
 * (it watched live and answered), or one that gets the part whole (a reload); `replay`, a page
 * that builds the message from a replayed stream alone (a reattach).
 */
export type ShownIn = 'page' | 'replay';

/** How a call ends on a page: the tool part's state and what goes with it. */
export type CallEnd =
  | { state: 'output-available'; output: unknown; approval?: ShownApproval | undefined }
  | { state: 'output-error'; errorText: string; approval?: ShownApproval | undefined }
  | { state: 'output-denied'; approval: ShownApproval };

/**
 * How a call ends on a page of AI SDK `version`: its result, and the answer that decided it if one
 * did (`approval`). A denied call is `output-denied` with the page's approval, an approved one
 * keeps its approval beside its output (AI SDK 6 and 7, as `addToolApprovalResponse` and the
 * live stream leave them); a call nobody answered (a tool policy's denial included) is its result.
 * AI SDK 5 has no denied state and no approval on a tool part: the result as the model read it.
 * AI SDK 6 has no stream chunk for a page's answer (7 has `tool-approval-response`), and the SDK
 * takes an `output-denied` part only with its approval, so a replay shows what the model read
 * too: a denial as the error it is, with no approval.
 */
export function callEnd(version: AiSdkVersion, to: ShownIn, result: ToolMessage, approval: ShownApproval | undefined): CallEnd {
  const shown = version === 5 || (version === 6 && to === 'replay') ? undefined : approval;
  if (shown && !shown.approved) return { state: 'output-denied', approval: shown };
  const end: CallEnd = result.isError ? { state: 'output-error', errorText: result.content } : { state: 'output-available', output: result.content };
  return shown ? { ...end, approval: shown } : end;
}

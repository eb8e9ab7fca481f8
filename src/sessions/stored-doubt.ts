import type { ApprovalRequest } from '../agent/approvals/approval-binding.js';
import type { DoubtAction } from '../agent/core/call-decisions.js';
import { doubtEventProblem, takeDoubtDecision } from '../agent/in-doubt/in-doubt.js';
import { InvalidFeedError } from '../errors.js';
import type { SessionStore } from '../stores/session-store.js';
import { decideOnStoredRow } from './stored-row-decision.js';
import { ApprovalRefusedError, decidedDownTheTree } from './stored-decision.js';
import type { TraceEntry } from './trace.js';

/** What a person decides for a call in doubt: run it again, give its result (any JSON value), or fail it. */
export type DoubtVerdict = { action: DoubtAction; result?: unknown; by?: string | undefined; reason?: string | undefined };

/**
 * Decides a call in doubt straight in the store, from any process, without the agent (the
 * counterpart of `decideStored` for `tool.inDoubt`): checked against the stored row (the call
 * must wait in doubt, and the request must be the one shown: call id, digest, run) and written
 * with the row's version check. A refused decision throws `ApprovalRefusedError` (reason
 * `not-waiting` for a call that is not in doubt) and is recorded as refused; a hand result that
 * is not plain JSON throws `InvalidFeedError` and nothing is read or written. The process that
 * next opens the session runs the call again, or hands the given result (or the failure) to the model.
 * A call inside a child run is decided by the id its parent showed (`c1/p1`), as `decideStored` does.
 *
 * @example
 * ```ts
 * import { decideDoubtStored, openSessionStore } from 'loopchart';
 *
 * const store = await openSessionStore('.loopchart/loopchart.db');
 * // `request` is what `tool.inDoubt` showed: { toolCallId, digest, run, ... }
 * const request = { toolCallId: 'call_1', digest: '0'.repeat(64), run: 1 };
 * await decideDoubtStored(store, 'support-42', request, { action: 'result', result: { sent: true }, by: 'ana' }).catch(console.error);
 * ```
 */
export async function decideDoubtStored(
  store: SessionStore,
  sessionId: string,
  request: Pick<ApprovalRequest, 'toolCallId' | 'digest' | 'run'>,
  verdict: DoubtVerdict,
): Promise<void> {
  const problem = doubtEventProblem(verdict);
  if (problem) throw new InvalidFeedError('decideDoubtStored', problem);
  if (await decidedDownTheTree(store, sessionId, request, (child, inner) => decideDoubtStored(store, child, inner, verdict))) return;
  const { toolCallId, digest, run } = request;
  const by = verdict.by !== undefined ? { by: verdict.by } : {};
  await decideOnStoredRow(store, sessionId, (context, decoded) => {
    const taken = takeDoubtDecision(context, { toolCallId, digest, run, ...verdict });
    const at = Date.now();
    if ('refusal' in taken) {
      const { reason: refusal, detail } = taken.refusal;
      const refused: TraceEntry = { type: 'doubt.refused', at, run: context.runIndex, toolCallId, action: verdict.action, refusal, detail, digest, ...by };
      return { refused, error: new ApprovalRefusedError(toolCallId, taken.refusal) };
    }
    const entry: TraceEntry = {
      type: 'doubt',
      at,
      run: context.runIndex,
      toolCallId,
      action: verdict.action,
      digest: taken.decision.digest,
      ...by,
      ...(verdict.reason !== undefined && { reason: verdict.reason }),
    };
    // The decision (with a hand result or failure in it) goes in the row: the next open hands it over.
    return { write: { ...decoded, doubt: taken.doubt }, entry };
  });
}

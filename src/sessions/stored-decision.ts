import type { ApprovalRequest, RefusalReason } from '../agent/approval-binding.js';
import { takeDecision, type Refusal } from '../agent/approvals.js';
import { LoopchartError } from '../errors.js';
import type { SessionStore } from '../stores/session-store.js';
import { decideOnStoredRow } from './stored-row-decision.js';
import type { TraceEntry } from './trace.js';

/**
 * A decision that does not apply: the call is unknown, decided, finished, of another run, or
 * changed since it was shown. Nothing was decided; the session's trace records the refusal.
 *
 * @example
 * ```ts
 * import { ApprovalRefusedError, decideStored, openSessionStore } from 'loopchart';
 *
 * const store = await openSessionStore('.loopchart/loopchart.db');
 * const request = { toolCallId: 'call_1', digest: '0'.repeat(64), run: 1 };
 * try {
 *   await decideStored(store, 'support-42', request, { approved: true, by: 'ana' });
 * } catch (error) {
 *   if (ApprovalRefusedError.isInstance(error)) console.log(error.reason); // 'changed', 'already-decided', ...
 * }
 * ```
 */
export class ApprovalRefusedError extends LoopchartError {
  readonly reason: RefusalReason;
  readonly toolCallId: string;
  constructor(toolCallId: string, refusal: Refusal) {
    super('ApprovalRefused', `decision for '${toolCallId}' refused (${refusal.reason}): ${refusal.detail}`);
    this.reason = refusal.reason;
    this.toolCallId = toolCallId;
  }
}

/** How a person decides a request. */
export interface Verdict {
  approved: boolean;
  by?: string;
  reason?: string;
}

/**
 * Decides a waiting call straight in the store, from any process, without the agent: the
 * decision is checked against the stored row (the request must be the one shown: its call id,
 * digest and run) and written with the row's version check, so of two racing decisions one
 * wins and the other is refused (`already-decided`). A refused decision throws
 * `ApprovalRefusedError` and is recorded as refused. The process that next opens the session
 * with its agent runs (or answers) the call; one still holding it open loses its next write.
 *
 * @example
 * ```ts
 * import { decideStored, openSessionStore } from 'loopchart';
 *
 * const store = await openSessionStore('.loopchart/loopchart.db');
 * // `request` is what `approval.requested` showed: { toolCallId, digest, run, ... }
 * const request = { toolCallId: 'call_1', digest: '0'.repeat(64), run: 1 };
 * await decideStored(store, 'support-42', request, { approved: false, by: 'ana', reason: 'wrong account' }).catch(console.error);
 * ```
 */
export async function decideStored(
  store: SessionStore,
  sessionId: string,
  request: Pick<ApprovalRequest, 'toolCallId' | 'digest' | 'run'>,
  verdict: Verdict,
): Promise<void> {
  const { toolCallId, digest, run } = request;
  const event = {
    type: verdict.approved ? ('approve' as const) : ('deny' as const),
    toolCallId,
    digest,
    run,
    ...(verdict.by !== undefined && { by: verdict.by }),
    ...(verdict.reason !== undefined && { reason: verdict.reason }),
  };
  await decideOnStoredRow(store, sessionId, (context) => {
    const taken = takeDecision(context, event, true);
    const at = Date.now();
    const by = verdict.by !== undefined ? { by: verdict.by } : {};
    if ('refusal' in taken) {
      const refused: TraceEntry = { type: 'approval.refused', at, run: context.runIndex, toolCallId, approved: verdict.approved, refusal: taken.refusal.reason, detail: taken.refusal.detail, digest, ...by };
      return { refused, error: new ApprovalRefusedError(toolCallId, taken.refusal) };
    }
    const entry: TraceEntry = { type: 'approval', at, run: context.runIndex, toolCallId, approved: verdict.approved, digest, ...by, ...(verdict.reason !== undefined && { reason: verdict.reason }) };
    return { write: { ...context, approvals: taken.approvals }, entry };
  });
}

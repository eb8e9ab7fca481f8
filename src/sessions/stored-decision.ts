import type { ApprovalRequest, RefusalReason } from '../agent/approvals/approval-binding.js';
import { takeDecision, type Refusal } from '../agent/approvals/approvals.js';
import { pendingCalls } from '../agent/core/brain-state.js';
import { innerKey, serviceKey } from '../agent/protocol/keys.js';
import { ambiguityDetail, childSessionId, isAmbiguous, routeAmong, routeOf } from '../agent/subagents/subagents.js';
import { LoopchartError } from '../errors.js';
import { SessionNotFoundError } from '../stores/errors.js';
import type { SessionStore } from '../stores/session-store.js';
import { decodeRow } from './session-row.js';
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
  readonly detail: string;
  constructor(toolCallId: string, refusal: Refusal) {
    super('ApprovalRefused', `decision for '${toolCallId}' refused (${refusal.reason}): ${refusal.detail}`);
    this.reason = refusal.reason;
    this.toolCallId = toolCallId;
    this.detail = refusal.detail;
  }
}

/** How a person decides a request. */
export interface Verdict {
  approved: boolean;
  by?: string | undefined;
  reason?: string | undefined;
}

/**
 * Decides a waiting call straight in the store, from any process, without the agent: the
 * decision is checked against the stored row (the request must be the one shown: its call id,
 * digest and run) and written with the row's version check, so of two racing decisions one
 * wins and the other is refused (`already-decided`). A refused decision throws
 * `ApprovalRefusedError` and is recorded as refused. The process that next opens the session
 * with its agent runs (or answers) the call; one still holding it open loses its next write.
 * A call inside a child run is decided by the id its parent showed (`c1/e1/w1`): the decision
 * goes down the tree, through each level's call in flight, to the child session that waits.
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
  if (await decidedDownTheTree(store, sessionId, request, (child, inner) => decideStored(store, child, inner, verdict))) return;
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

/** The request a decision answers: the call as shown, in its run. */
type ShownRequest = Pick<ApprovalRequest, 'toolCallId' | 'digest' | 'run'>;

/**
 * A decision on a call inside a child run (`c1/p1`) taken where that child's session is, through
 * each level's call in flight: true once `decide` took it there; false for a call of this
 * session's own. A refusal down the tree is said of the id the caller gave.
 */
export async function decidedDownTheTree(
  store: SessionStore,
  sessionId: string,
  request: ShownRequest,
  decide: (childSessionId: string, request: ShownRequest) => Promise<void>,
): Promise<boolean> {
  const child = await childOfCall(store, sessionId, request.toolCallId);
  if (!child) return false;
  try {
    await decide(child.sessionId, { ...request, toolCallId: child.rest });
    return true;
  } catch (error) {
    if (ApprovalRefusedError.isInstance(error)) throw new ApprovalRefusedError(request.toolCallId, { reason: error.reason, detail: error.detail });
    throw error;
  }
}

/**
 * The child session that holds the call `qualifiedId` names, and the id it knows it by: routed
 * as the agent routes it, by the calls of the batch the row waits for (see `routeAmong`; a
 * provider's id may hold the separator), while that call is in flight (without a journaled
 * result); else the decision is refused (`unknown-call`, or `already-ran`): it names no call
 * that waits, or reads as the call of more than one call of the batch. Null when `qualifiedId`
 * is a call of this session's own.
 */
async function childOfCall(store: SessionStore, sessionId: string, qualifiedId: string): Promise<{ sessionId: string; rest: string } | null> {
  if (routeOf(qualifiedId) === null) return null;
  const refuse = (reason: RefusalReason, detail: string) => new ApprovalRefusedError(qualifiedId, { reason, detail });
  const stored = await store.load(sessionId);
  if (!stored) throw new SessionNotFoundError(sessionId);
  const context = decodeRow(sessionId, stored.state, stored.messages);
  const batchCalls = context.brain.value === 'AwaitingTools' ? pendingCalls(context.brain) : [];
  const route = routeAmong(qualifiedId, batchCalls.map(({ call }) => call.id));
  if (route === null) return null;
  if (isAmbiguous(route)) throw refuse('unknown-call', ambiguityDetail(qualifiedId, route));
  const { callId } = route;
  const inBatch = batchCalls.some(({ call }) => call.id === callId);
  if (!inBatch) throw refuse('unknown-call', `session '${sessionId}' has no call '${callId}' in flight`);
  const batch = serviceKey(context, context.brain.context.turnsTaken, 'tools');
  const journaled = await store.journaledToolResults(sessionId, batch);
  if (journaled.some((result) => result.toolCallId === callId)) throw refuse('already-ran', `call '${callId}' of session '${sessionId}' has its result`);
  const child = childSessionId(sessionId, innerKey(batch, { kind: 'tool', call: callId, rerun: 0 }));
  if (!(await store.load(child))) throw refuse('unknown-call', `call '${callId}' of session '${sessionId}' runs no child session`);
  return { sessionId: child, rest: route.rest };
}

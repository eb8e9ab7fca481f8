import type { PendingToolCall, ToolMessage } from '../../schemas.js';
import type { ToolSet } from '../../tools/define-tool.js';
import { parseToolArguments } from '../../tools/own-arguments.js';
import { bindingRefusal, digestOf, provenDecisions, type RefusalReason } from './approval-binding.js';
import { pendingCalls, type BrainState } from '../core/brain-state.js';
import { decisionFor, type Approvals, type Decision } from '../core/call-decisions.js';

/**
 * Human approval of tool calls (seed 003: an approval step yields while a request awaits a
 * decision and lets it run once the decision is saved). Decisions live in the driver's context,
 * so they are persisted with it: a decision is never asked for twice, not after a restore.
 * This slice decides which calls need a person and takes their decisions; the record itself, which
 * every batch reads, is the core's (`core/call-decisions.ts`).
 */

type DecisionFields = { toolCallId: string; always?: boolean | undefined; reason?: string | undefined; by?: string | undefined; digest?: string | undefined; run?: number | undefined };
export type ApprovalEvent = ({ type: 'approve' } & DecisionFields) | ({ type: 'deny' } & DecisionFields);

/** Records a decision once: a second decision for the same call, or for a call not in the batch, changes nothing. */
export function recordDecision(approvals: Approvals, calls: readonly PendingToolCall[], event: ApprovalEvent): Approvals {
  const call = calls.find((pending) => pending.call.id === event.toolCallId)?.call;
  if (!call || Object.hasOwn(approvals.decisions, call.id)) return approvals;
  const decision: Decision = {
    approved: event.type === 'approve',
    ...(event.reason !== undefined && { reason: event.reason }),
    ...(event.by !== undefined && { by: event.by }),
    digest: digestOf(call),
  };
  // Computed keys define own properties, `__proto__` included (a literal `__proto__:` would not).
  return {
    ...approvals,
    decisions: { ...approvals.decisions, [call.id]: decision },
    standing: event.always ? { ...approvals.standing, [call.name]: event.type === 'approve' ? 'approve' : 'deny' } : approvals.standing,
  };
}

/** Which undecided calls of a batch need approval, asking each tool's `needsApproval`. */
export async function callsNeedingApproval(
  calls: readonly PendingToolCall[],
  tools: ToolSet,
  approvals: Approvals,
  sessionId: string,
  finished: ReadonlySet<string>,
): Promise<string[]> {
  const waiting: string[] = [];
  for (const { call, preAnswered } of calls) {
    if (preAnswered || finished.has(call.id) || decisionFor(approvals, call)) continue;
    const rule = tools.get(call.name)?.needsApproval;
    if (rule === undefined || rule === false) continue;
    if (rule === true) {
      waiting.push(call.id);
      continue;
    }
    // Arguments the tool would reject never run, so they need no approval: the runner reports them.
    const args = parseToolArguments(tools.get(call.name)!, call.args);
    if (args.success && (await rule(args.data, { toolCallId: call.id, sessionId }))) waiting.push(call.id);
  }
  return waiting;
}

/** What a run holds that a decision is checked against. */
export interface DecisionState {
  brain: BrainState;
  toolJournal: readonly ToolMessage[];
  approvals: Approvals;
  runIndex: number;
}

/** The refusal of a decision: why, in words and as a code. */
export type Refusal = { reason: RefusalReason; detail: string };

/**
 * Takes a decision for one call of the batch, or refuses it (see `bindingRefusal`). With
 * `waitingOnly`, only a call that was asked about may be decided (a decision from outside the
 * process, which can only have seen a request).
 */
export function takeDecision(state: DecisionState, event: ApprovalEvent, waitingOnly = false): { approvals: Approvals } | { refusal: Refusal } {
  const batch = pendingCalls(state.brain);
  const refusal = bindingRefusal(
    {
      run: state.runIndex,
      batch,
      finished: new Set(state.toolJournal.map((result) => result.toolCallId)),
      decided: new Set(batch.filter(({ call }) => decisionFor(state.approvals, call) !== undefined).map(({ call }) => call.id)),
      history: state.brain.context.history,
      waiting: waitingOnly ? new Set(state.approvals.waiting) : null,
    },
    event,
  );
  return refusal ? { refusal } : { approvals: recordDecision(state.approvals, batch, event) };
}

/** A restored batch keeps only the decisions that prove themselves (fail closed): the others are asked again. */
export function restoredApprovals(approvals: Approvals, brain: BrainState): Approvals {
  const decisions = provenDecisions(approvals.decisions, pendingCalls(brain));
  // A dropped decision's call still waits (or is checked again): it is asked again.
  return decisions === approvals.decisions ? approvals : { ...approvals, decisions };
}

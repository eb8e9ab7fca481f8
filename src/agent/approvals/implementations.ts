/**
 * Approvals in the driver: the chart's guards and actions for calls that wait for a person's
 * decision (a tool's approval rule, a tool policy's verdict), the decisions that come in as
 * `approve` / `deny` or the approvals operation's resume, and the events listeners get; with the
 * rules they read over the compiled agent and the run's context (the decisions themselves:
 * approvals.ts, their binding to the call shown: approval-binding.ts, the policy: tool-policy.ts).
 */
import type { ToolCall } from '../../schemas.js';
import { hasApprovalRule } from '../../tools/define-tool.js';
import { fromCurrent, rule, when, type Args, type ContextHook, type RefusalHook } from '../core/bind.js';
import type { FeatureHandlers } from '../protocol/io-protocol.js';
import { approvalsHandler } from './io.js';
import { pendingCalls } from '../core/brain-state.js';
import type { CompiledAgent } from '../core/compile.js';
import type { AgentContext } from '../core/context.js';
import { conversation, runnable } from '../core/driver-rules.js';
import { answeredCalls, type Effect } from '../core/effects.js';
import { batchResults, waitingCalls } from '../core/run-rules.js';
import type { AgentEmitted } from '../protocol/actor-types.js';
import { as, type AgentEvent } from '../protocol/agent-event.js';
import type { IoRequest } from '../protocol/io-protocol.js';
import { keyOf, turnAt } from '../protocol/keys.js';
import { ambiguityDetail, callMayRunChild, isAmbiguous, routeIn } from '../subagents/subagents.js';
import { requestFor } from './approval-binding.js';
import { APPROVALS_OPERATION, approvalEventOf, approvalEvents, approvalResumeProblem } from './approval-events.js';
import { decisionFor, deniedResult } from '../core/call-decisions.js';
import { restoredApprovals, takeDecision } from './approvals.js';
import { applyPolicyVerdicts, ToolPolicyError } from './tool-policy.js';

/** The key of the current batch's approval check. */
export const approvalKey = (context: AgentContext) => keyOf({ kind: 'approvals', ...turnAt(context, context.brain.context.turnsTaken) });

/**
 * Calls of the batch that may need a human's decision and were not asked about yet (a
 * restored batch keeps its waiting list): the approval check runs only for these.
 */
export const undecided = (agent: CompiledAgent, context: AgentContext): ToolCall[] =>
  agent.gated
    ? runnable(agent, context).filter((call) => {
        if (decisionFor(context.approvals, call) || context.approvals.waiting.includes(call.id)) return false;
        // With a policy every call is asked once (its verdict recorded); else only calls with a rule.
        if (agent.toolPolicy) return !(context.policyChecked ?? []).includes(call.id);
        const tool = agent.tools.get(call.name);
        return tool !== undefined && hasApprovalRule(tool);
      })
    : [];

/** Asks the IO which of the batch's undecided calls wait for a person (and, with a policy, its verdicts). */
export function requestApprovals(agent: CompiledAgent, context: AgentContext, _event: AgentEvent): IoRequest {
  return {
    type: 'approvals',
    key: approvalKey(context),
    turn: context.brain.context.turnsTaken,
    sessionId: context.sessionId,
    calls: undecided(agent, context),
    conversation: conversation(context),
  };
}

/** The check's answer: the calls that wait join the waiting list; a policy's denials are their calls' results. */
export function awaitApproval(agent: CompiledAgent, context: AgentContext, event: AgentEvent): Effect[] {
  const out: Effect[] = [];
  const { waiting, policy } = as(event, 'io.approvalsChecked');
  const batch = pendingCalls(context.brain).map(({ call }) => call);
  const approvals = applyPolicyVerdicts({ ...context.approvals, waiting: [...context.approvals.waiting, ...waiting] }, policy, batch);
  out.push({ assign: { approvals, ...(agent.toolPolicy && { policyChecked: [...(context.policyChecked ?? []), ...policy.map((entry) => entry.toolCallId)] }) } });
  // A policy's denial is the call's result: listeners see it like any other.
  const denied = batchResults({ ...context, approvals }, agent.maxCalls).filter(
    ({ call, result }) => result && policy.some((entry) => entry.toolCallId === call.id && entry.verdict.type === 'deny'),
  );
  return [...out, ...answeredCalls(context, denied)];
}

/** The run's wait for decisions, as listeners see it: the calls that wait and the requests a decision binds to. */
const waitEvents = (agent: CompiledAgent, context: AgentContext) => {
  const calls = waitingCalls(context, agent.maxCalls);
  return approvalEvents(calls, calls.map((call) => requestFor(call, context.runIndex, context.brain.context.turnsTaken)), true);
};

export function emitApprovalRequested(agent: CompiledAgent, context: AgentContext, _event: AgentEvent): AgentEmitted {
  return waitEvents(agent, context).requested;
}

export function emitApprovalYielded(agent: CompiledAgent, context: AgentContext, _event: AgentEvent): AgentEmitted {
  return waitEvents(agent, context).yielded;
}

/**
 * Why a decision on a call of a child (`c1/w1`, routed among the calls of the batch, see
 * `routeAmong`) is refused here: its id reads as more than one call of the batch, or no child of
 * its call runs; null when it goes down (forwardToChild) and the child decides or refuses it.
 * Undefined for a call of this run's own.
 */
function childRefusal(context: AgentContext, toolCallId: string): { reason: 'unknown-call'; detail: string } | null | undefined {
  const route = routeIn(context, toolCallId);
  if (route === null) return undefined;
  if (isAmbiguous(route)) return { reason: 'unknown-call', detail: ambiguityDetail(toolCallId, route) };
  return callMayRunChild(context, route.callId)
    ? null
    : { reason: 'unknown-call', detail: `no call '${toolCallId}' waits in run ${context.runIndex}: no child run of call '${route.callId}' is running` };
}

/** A person's decision, bound to the call as shown (a refused one changes nothing); a denial is its call's result. */
export function recordDecision(_agent: CompiledAgent, context: AgentContext, event: AgentEvent): Effect[] {
  const out: Effect[] = [];
  const decision = approvalEventOf(event);
  if (!decision) return out;
  const gone = childRefusal(context, decision.toolCallId);
  // A child's call goes down to its child (forwardToChild), which decides or refuses it.
  if (gone === null) return out;
  const taken = gone ? { refusal: gone } : takeDecision(context, decision);
  const { toolCallId, by, reason, digest } = decision;
  const approved = decision.type === 'approve';
  if ('refusal' in taken) {
    const { reason: refusal, detail } = taken.refusal;
    out.push({ emit: { type: 'approval.refused', run: context.runIndex, toolCallId, approved, refusal, detail, ...(by !== undefined && { by }), ...(digest !== undefined && { digest }) } });
    out.push({ emit: { type: 'event.rejected', event: decision.type, reason: `${refusal}: ${detail}` } });
    return out;
  }
  const { approvals } = taken;
  const calls = pendingCalls(context.brain);
  out.push({ assign: { approvals } });
  const made = approvals.decisions[toolCallId]!;
  out.push({
    emit: { type: 'approval.decided', run: context.runIndex, toolCallId, digest: made.digest!, approved, ...(by !== undefined && { by }), ...(reason !== undefined && { reason }), ...(decision.always && { always: true }) },
  });
  // A denial is the call's result: listeners see it like any other.
  const finished = new Set(context.toolJournal.map((result) => result.toolCallId));
  const denied = calls.flatMap(({ call, preAnswered }) => {
    const made = decisionFor(approvals, call);
    if (preAnswered || finished.has(call.id) || decisionFor(context.approvals, call) || made?.approved !== false) return [];
    return [{ call, result: deniedResult(call, made) }];
  });
  return [...out, ...answeredCalls(context, denied)];
}

/** The guards and actions the chart names for approvals. */
export const approvalImplementations = {
  // A stored decision that does not prove itself against the batch is dropped: its call is asked again.
  restore: ((_agent, context) => ({ approvals: restoredApprovals(context.approvals, context.brain) })) satisfies ContextHook,
  // The IO's handler for this feature's requests.
  io: { approvals: approvalsHandler } satisfies FeatureHandlers,
  // A resume of the approvals operation that no transition took: what is wrong with its payload, if anything.
  refusal: ((_agent, _context, event) =>
    event.type === 'operation.resume' && event.operation === APPROVALS_OPERATION ? approvalResumeProblem(event) : null) satisfies RefusalHook,
  guards: {
    needsApprovalCheck: when(({ agent, context }) => undecided(agent, context).length > 0),
    /** Without approvals configured and with no call in doubt (a restored batch), a batch needs no approval or doubt region. */
    straightToWork: when(({ agent, context }) => !agent.gated && (context.doubt?.waiting.length ?? 0) === 0),
    policyFailure: ({ event }: Args) => event.type === 'io.failed' && ToolPolicyError.isInstance(event.error),
    nothingWaiting: when(({ agent, context }) => waitingCalls(context, agent.maxCalls).length === 0),
    someoneWaiting: when(({ agent, context }) => waitingCalls(context, agent.maxCalls).length > 0),
    currentApprovalCheck: fromCurrent(approvalKey),
    approvalResume: when(({ agent, event }) => agent.gated && approvalEventOf(event) !== null),
  },
  actions: {
    requestApprovals: rule.send(requestApprovals),
    awaitApproval: rule.effects(awaitApproval),
    emitApprovalRequested: rule.emit(emitApprovalRequested),
    emitApprovalYielded: rule.emit(emitApprovalYielded),
    recordDecision: rule.effects(recordDecision),
  },
};

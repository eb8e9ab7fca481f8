/**
 * Subagents in the driver: the chart's guard and actions between a run and the child runs its
 * agent tools start (see agent-tool.ts): decisions and steering for a child go down to the call
 * that runs it; a child's wait for a person, its refusals and its usage come up.
 */
import { rule, type Args } from '../core/bind.js';
import type { CompiledAgent } from '../core/compile.js';
import type { AgentContext } from '../core/context.js';
import type { Effect } from '../core/effects.js';
import { approvalEventOf, approvalEvents } from '../approvals/approval-events.js';
import type { ApprovalRequest } from '../approvals/approval-binding.js';
import { as, type AgentEvent } from '../protocol/agent-event.js';
import type { FeatureHandlers, IoRequest } from '../protocol/io-protocol.js';
import { callMayRunChild, childMayRun, childUsageCounted, qualifiedCallId, qualifiedCalls, routedEvent, type RoutableEvent } from './subagents.js';
import { forwardHandler } from './io.js';

/** A decision or steer for a child run goes down to the call that runs it (see `routedEvent`). */
export function forwardToChild(_agent: CompiledAgent, context: AgentContext, event: AgentEvent): Effect[] {
  const out: Effect[] = [];
  const routable = (approvalEventOf(event) ?? event) as RoutableEvent;
  const routed = routedEvent(routable);
  if (!routed) return out;
  // An event with a target (a steer, a raise, a resume) for a child that no call of the batch runs
  // reaches no one: refused, not lost in silence (a decision for such a child is refused by its own rule, see `childMayRun`).
  if (routable.target !== undefined && !callMayRunChild(context, routed.callId)) {
    return [{ emit: { type: 'event.rejected', event: event.type, reason: `no child run of call '${routed.callId}' is running to take it (target '${routable.target}')` } }];
  }
  out.push({ send: { type: 'forward', event: routable } satisfies IoRequest });
  return out;
}

/** A child's wait for a human, and its refusal of a decision, show at the parent (qualified ids); its usage joins the run once. */
export function acceptSubagentReport(agent: CompiledAgent, context: AgentContext, event: AgentEvent): Effect[] {
  const { callId, report } = as(event, 'io.subagent');
  switch (report.type) {
    case 'usage': {
      const counted = childUsageCounted(context, report.childId, report.usage, report.models);
      if (!counted) return [];
      // Booked under the child's models at the child's prices (the run's cost, and so maxCostUsd,
      // covers the tree); a child counted by an older build without models, as the run's own reply.
      const books = counted.addedByModel ? agent.pricing.bookSpent?.(context, counted.addedByModel) : agent.pricing.book?.(context, counted.added);
      return [{ assign: { ...counted.assign, ...books } }];
    }
    case 'approval.refused':
    case 'doubt.refused':
      return [{ emit: { ...report.refused, toolCallId: qualifiedCallId(callId, report.refused.toolCallId) } }];
    case 'waiting': {
      const { target } = report.event;
      return [{ emit: { ...report.event, target: target ? qualifiedCallId(callId, target) : callId } }];
    }
    case 'tool.inDoubt':
      return [{ emit: { type: 'tool.inDoubt', calls: qualifiedCalls(callId, report.calls), requests: qualifiedRequests(callId, report.requests) } }];
    case 'approval.requested': {
      const { requested, yielded } = approvalEvents(qualifiedCalls(callId, report.calls), qualifiedRequests(callId, report.requests), false);
      return [{ emit: requested }, { emit: yielded }];
    }
  }
}

/** A child's requests as the parent shows them: each call under the id of the call that runs the child. */
const qualifiedRequests = (callId: string, requests: readonly ApprovalRequest[]): ApprovalRequest[] =>
  requests.map((request) => ({ ...request, toolCallId: qualifiedCallId(callId, request.toolCallId) }));

/** The guards and actions the chart names for subagents. */
export const subagentImplementations = {
  guards: {
    steersChild: ({ event }: Args) => routedEvent(as(event, 'steer')) !== null,
    /** A raise or a resume with a target (`c1`, `c1/e1`): it goes down to that child (or is refused when none runs). */
    targetsChild: ({ event }: Args) => typeof (event as { target?: unknown }).target === 'string',
    /**
     * A decision on a child's call in doubt (`c1/p1`): it goes down to the call that runs the
     * child, while one may run (else the run's own rule refuses it as an unknown call).
     */
    decidesForChild: ({ context, event }: Args) => routedEvent(as(event, 'doubt.decide')) !== null && childMayRun(context, as(event, 'doubt.decide').toolCallId),
  },
  actions: {
    forwardToChild: rule.effects(forwardToChild),
    acceptSubagentReport: rule.effects(acceptSubagentReport),
  },
  io: { forward: forwardHandler } satisfies FeatureHandlers,
};

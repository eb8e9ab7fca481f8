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
import {
  ambiguityDetail,
  batchCallIds,
  callMayRunChild,
  childMayRun,
  childUsageCounted,
  isAmbiguous,
  qualifiedCallId,
  qualifiedCalls,
  routedEvent,
  routeIn,
  type RoutableEvent,
} from './subagents.js';
import { forwardHandler } from './io.js';

/**
 * A decision or steer for a child run goes down to the call that runs it (see `routedEvent`,
 * routed among the calls of the batch). An event with a target (a steer, a raise, a resume) for
 * a child that no call of the batch runs, or whose target reads as more than one call's, reaches
 * no one: refused, not lost in silence nor given to either. A decision for such a child is
 * refused by its own rule (`recordDecision`, `refuseAmbiguousDoubt`): it is not sent down.
 */
export function forwardToChild(_agent: CompiledAgent, context: AgentContext, event: AgentEvent): Effect[] {
  const routable = (approvalEventOf(event) ?? event) as RoutableEvent;
  const routed = routedEvent(routable, batchCallIds(context.brain));
  if (!routed) return [];
  const targeted = routable.target !== undefined;
  if (isAmbiguous(routed)) return targeted ? [{ emit: { type: 'event.rejected', event: event.type, reason: ambiguityDetail(routable.target!, routed) } }] : [];
  if (!callMayRunChild(context, routed.callId)) {
    return targeted ? [{ emit: { type: 'event.rejected', event: event.type, reason: `no child run of call '${routed.callId}' is running to take it (target '${routable.target}')` } }] : [];
  }
  return [{ send: { type: 'forward', callId: routed.callId, event: routed.event } satisfies IoRequest }];
}

/**
 * A decision on a call in doubt whose id reads as more than one call of the batch (see
 * `routeAmong`): refused as an unknown call, neither taken as the run's own nor sent down.
 */
export function refuseAmbiguousDoubt(_agent: CompiledAgent, context: AgentContext, event: AgentEvent): Effect[] {
  const decision = as(event, 'doubt.decide');
  const route = routeIn(context, decision.toolCallId);
  if (!isAmbiguous(route)) return [];
  const detail = ambiguityDetail(decision.toolCallId, route);
  const { toolCallId, action, by, digest } = decision;
  return [
    { emit: { type: 'doubt.refused', run: context.runIndex, toolCallId, action, refusal: 'unknown-call', detail, ...(by !== undefined && { by }), ...(digest !== undefined && { digest }) } },
    { emit: { type: 'event.rejected', event: 'doubt.decide', reason: `unknown-call: ${detail}` } },
  ];
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
    steersChild: ({ context, event }: Args) => routedEvent(as(event, 'steer'), batchCallIds(context.brain)) !== null,
    /** A raise or a resume with a target (`c1`, `c1/e1`): it goes down to that child (or is refused when none runs). */
    targetsChild: ({ event }: Args) => typeof (event as { target?: unknown }).target === 'string',
    /**
     * A decision on a child's call in doubt (`c1/p1`): it goes down to the call that runs the
     * child, while one may run (else the run's own rule refuses it as an unknown call).
     */
    decidesForChild: ({ context, event }: Args) => childMayRun(context, as(event, 'doubt.decide').toolCallId),
    /** A decision on a call in doubt whose id reads as more than one call of the batch (see `routeAmong`). */
    doubtAmbiguous: ({ context, event }: Args) => isAmbiguous(routeIn(context, as(event, 'doubt.decide').toolCallId)),
  },
  actions: {
    forwardToChild: rule.effects(forwardToChild),
    refuseAmbiguousDoubt: rule.effects(refuseAmbiguousDoubt),
    acceptSubagentReport: rule.effects(acceptSubagentReport),
  },
  io: { forward: forwardHandler } satisfies FeatureHandlers,
};

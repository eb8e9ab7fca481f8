/**
 * Tracing in the driver: the chart's guard and actions for the run's spans (trace marks at the
 * run's start, resume and end, prunes, approvals, retries and fallbacks; see trace-marks.ts) and
 * the traceparent a host's telemetry reports back.
 */
import { enqueueActions } from 'xstate';
import { configuredAction, currentAgent, rule, type Args } from '../core/bind.js';
import type { CompiledAgent } from '../core/compile.js';
import type { AgentContext } from '../core/context.js';
import { pruneReport } from '../core/driver-rules.js';
import { waitingCalls } from '../core/run-rules.js';
import { as, type AgentEvent } from '../protocol/agent-event.js';
import { fromTelemetry } from '../protocol/agent-event.js';
import { traceMark, type TraceMark } from './trace-marks.js';

/** The run's traceparent, as the telemetry reported it for this run (a late report of another run changes nothing). */
export function recordTrace(_agent: CompiledAgent, context: AgentContext, event: AgentEvent): Partial<AgentContext> {
  const { runIndex, traceparent } = as(event, 'telemetry.traced');
  return runIndex === context.runIndex ? { trace: traceparent } : {};
}

/** Whether the agent traces its runs (a tracer in its config). */
const traced = (agent: CompiledAgent) => agent.tracing !== undefined;

/** The guard and actions the chart names for tracing. */
export const tracingImplementations = {
  guards: {
    fromTelemetry: ({ event }: Args) => fromTelemetry(event),
  },
  actions: {
    // A mark resolves with its agent and runs with the actions' effects (those of an actor's
    // initial state run when it starts, after its first transition returned). An agent without
    // tracing runs a chart without the marks.
    trace: configuredAction(
      traced,
      enqueueActions<AgentContext, AgentEvent, TraceMark, AgentEvent, never, never, never, never, never>(({ context, event, self, enqueue }, mark) => {
        const agent = currentAgent();
        const { tracing } = agent;
        if (tracing) enqueue(() => traceMark(tracing, mark, { context, event, self, prune: () => pruneReport(agent, context), waiting: () => waitingCalls(context, agent.maxCalls) }));
      }),
    ),
    recordTrace: rule.assign(recordTrace),
  },
};

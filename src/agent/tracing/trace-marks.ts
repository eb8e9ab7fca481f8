import type { AgentTracing } from './agent-tracing.js';
import { decisionFor } from '../core/call-decisions.js';
import { pendingCalls } from '../core/brain-state.js';
import type { AgentContext } from '../core/context.js';
import type { ToolCall } from '../../schemas.js';
import { runKeyOf as runPrefix } from '../protocol/keys.js';
import { telemetryReport, type TelemetryEvent } from '../protocol/agent-event.js';

/**
 * The points of a run only the chart sees, as one action (`trace`) with the point as its
 * parameter; everything else the tracing learns from the executor seam. Each point reads the
 * context the chart has just made, so a mark never decides anything.
 */
export type TraceMark = 'run.started' | 'run.resumed' | 'run.finished' | 'prune' | 'approval.requested' | 'approval.decided' | 'model.retry' | 'model.fallback';


/** The prefix every effect key of the context's current run starts with (see `serviceKey`). */
export const runKeyOf = (context: Pick<AgentContext, 'sessionId' | 'runIndex'>): string => runPrefix({ session: context.sessionId, run: context.runIndex });

export interface MarkArgs {
  context: AgentContext;
  event: { type: string };
  self: { send(event: TelemetryEvent): void };
  /** The prune the chart is about to apply (computed by the chart, which knows the pruner). */
  prune: () => { pruned: number; tokensSaved: number; before: number; after: number };
  /** The calls that wait for a decision now. */
  waiting: () => ToolCall[];
}

export function traceMark(tracing: AgentTracing, mark: TraceMark, { context, event, self, prune, waiting }: MarkArgs): void {
  const runKey = runKeyOf(context);
  switch (mark) {
    case 'run.started':
    case 'run.resumed': {
      const continues = mark === 'run.resumed' ? context.trace : null;
      const traceparent = tracing.runStarted({ runKey, sessionId: context.sessionId, runIndex: context.runIndex, continues });
      // A span the tracer failed to start has no context: a new run stores none (not the last
      // run's), a resumed one keeps the stored one for the next resume.
      if (traceparent !== undefined || mark === 'run.started') {
        self.send(telemetryReport({ type: 'telemetry.traced', runIndex: context.runIndex, traceparent: traceparent ?? null }));
      }
      return;
    }
    case 'run.finished':
      if (context.lastRun) tracing.runFinished(runKey, { ...context.lastRun, turns: context.brain.context.turnsTaken });
      return;
    case 'prune':
      return tracing.pruned(runKey, prune());
    case 'approval.requested':
      return tracing.approvalRequested(runKey, waiting());
    case 'approval.decided': {
      const decided = pendingCalls(context.brain).flatMap(({ call }) => {
        const decision = decisionFor(context.approvals, call);
        return decision ? [{ callId: call.id, approved: decision.approved }] : [];
      });
      return tracing.approvalDecided(runKey, decided);
    }
    case 'model.fallback':
      if (context.models) tracing.fellBack(runKey, { turn: context.brain.context.turnsTaken + 1, to: context.models.active.name, error: (event as { error?: unknown }).error });
      return;
    case 'model.retry': {
      const retry = event as { type: string; key: string; retry: number; delayMs: number; error: unknown };
      return tracing.retried(retry.key, retry);
    }
  }
}

/**
 * A persisted snapshot restored with its run in flight (`createActor(machine, { snapshot })`):
 * no event marks the run going on, so the run's span is opened as the snapshot is restored,
 * continuing the stored trace.
 */
export function resumeTrace(tracing: AgentTracing, context: AgentContext): void {
  tracing.runStarted({ runKey: runKeyOf(context), sessionId: context.sessionId, runIndex: context.runIndex, continues: context.trace });
}

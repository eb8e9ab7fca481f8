import { z } from 'zod';
import type { ApprovalEvent } from './approvals.js';
import { ExternalEventSchemas } from '../protocol/events.js';
import type { AgentEvent } from '../protocol/agent-event.js';
import type { ToolCall } from '../../schemas.js';
import type { ApprovalRequest } from './approval-binding.js';

/**
 * The built-in approvals, as an operation: its decisions arrive as `approve` / `deny`, or as
 * `{ type: 'operation.resume', operation: 'approvals', payload: { toolCallId, approved, always?, reason? } }`.
 *
 * @example
 * ```ts
 * actor.on('operation.yielded', ({ operation, payload }) => {
 *   if (operation !== APPROVALS_OPERATION) return;
 *   for (const toolCallId of (payload as { calls: string[] }).calls) {
 *     actor.send({ type: 'operation.resume', operation: APPROVALS_OPERATION, payload: { toolCallId, approved: true } });
 *   }
 * });
 * ```
 */
export const APPROVALS_OPERATION = 'approvals';

const ApprovalResumeSchema = z.strictObject({
  ...ExternalEventSchemas.approve.omit({ type: true }).shape,
  approved: z.boolean(),
});

/** Why an approvals resume is refused (its payload), or null. */
export function approvalResumeProblem(event: { payload?: unknown }): string | null {
  const parsed = ApprovalResumeSchema.safeParse(event.payload);
  return parsed.success ? null : `payload for '${APPROVALS_OPERATION}': ${z.prettifyError(parsed.error)}`;
}

/** The decision an event carries: an `approve` / `deny`, or the approvals operation's resume. */
export function approvalEventOf(event: AgentEvent): ApprovalEvent | null {
  if (event.type === 'approve' || event.type === 'deny') return event;
  if (event.type !== 'operation.resume' || event.operation !== APPROVALS_OPERATION) return null;
  const parsed = ApprovalResumeSchema.safeParse(event.payload);
  if (!parsed.success) return null;
  const { approved, ...rest } = parsed.data;
  return { type: approved ? 'approve' : 'deny', ...rest };
}

/**
 * The two events a wait for decisions shows listeners: `approval.requested` (the calls, and the
 * requests a decision binds to) and the approvals operation's `operation.yielded` (the calls' ids;
 * with `yieldRequests`, the requests too, as a run's own wait gives them, where a child's wait
 * surfaced at its parent never has).
 */
export function approvalEvents(calls: ToolCall[], requests: ApprovalRequest[], yieldRequests: boolean) {
  return {
    requested: { type: 'approval.requested' as const, calls, requests },
    yielded: {
      type: 'operation.yielded' as const,
      operation: APPROVALS_OPERATION,
      reason: 'approval',
      payload: { calls: calls.map((call) => call.id), ...(yieldRequests && { requests }) },
    },
  };
}

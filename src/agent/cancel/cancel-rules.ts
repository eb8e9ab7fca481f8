import { contextFor } from '../operations/operation-context.js';
import type { Slices } from '../protocol/io-protocol.js';
import { messageOf, type OperationPlan } from '../operations/operation-rules.js';
import { OperationError, type InterruptedStep } from '../operations/operation.js';
import type { OperationsState } from '../operations/operation-state.js';
import { batchResults, type RunState } from '../core/run-rules.js';
import type { Message } from '../../schemas.js';

/**
 * Cancellation as seed 003 describes it, as pure functions: the running step's work was dropped;
 * the operations get their `onCancel` with what the step had received, and keep what they
 * return; then every unanswered call is answered (interrupted) and the run ends `Cancelled`.
 */

/** What the interrupted step had received: the point in progress, the batch's results so far, its unanswered calls. */
export function interruptedStep(state: RunState & { operations: OperationsState }, maxCalls: number): InterruptedStep {
  const batch = batchResults(state, maxCalls);
  return {
    point: state.operations.point?.hook ?? null,
    results: batch.flatMap(({ result }) => (result ? [result] : [])),
    unanswered: batch.flatMap(({ call, result }) => (result ? [] : [call])),
  };
}

/**
 * Runs every `onCancel` in list order. Returns the slices with what they kept, and the failures
 * (a throw, a slice the schema refuses) for the caller to report; a failure changes nothing.
 */
export function runCancelHooks(
  plan: OperationPlan,
  slices: Slices,
  interrupted: InterruptedStep,
  ctx: { sessionId: string; turn: number; messages: readonly Message[] },
): { slices: Slices; failures: OperationError[] } {
  let kept = slices;
  const failures: OperationError[] = [];
  for (const op of plan.list) {
    if (!op.onCancel) continue;
    try {
      const output = op.onCancel(interrupted, contextFor(op, ctx, kept));
      if (output === undefined || output === null) continue;
      if (typeof output !== 'object' || Array.isArray(output)) throw new OperationError(op.name, 'onCancel', 'returned something other than { state }');
      if (!('state' in output)) continue;
      const parsed = op.state?.schema.safeParse(output.state);
      if (!parsed?.success) throw new OperationError(op.name, 'onCancel', op.state ? `state refused by its schema: ${parsed!.error.message}` : 'returned state but declares no state schema');
      kept = { ...kept, [op.name]: parsed.data };
    } catch (error) {
      failures.push(OperationError.isInstance(error) ? error : new OperationError(op.name, 'onCancel', `threw: ${messageOf(error)}`, { cause: error }));
    }
  }
  return { slices: kept, failures };
}

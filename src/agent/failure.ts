import { z } from 'zod';
import { OutcomeSchema, type Outcome } from '../schemas.js';

/**
 * Why an agent run failed: a closed set, so `switch (outcome.error.type)` is exhaustive.
 * - `ModelError`: the model call failed (after its retries), or its reply was not one the
 *   conversation can take;
 * - `ToolError`: running a batch failed outside any one tool (a tool's own error is its result);
 * - `CompactionError`: the compactor failed or returned a conversation the brain refuses;
 * - `CompactionStalled`: compaction could not bring the request under the line (seed 001);
 * - `OperationError`: an operation's hook, prompt part or request rewrite failed;
 * - `ToolPolicyError`: a tool policy threw, timed out or returned no verdict (`ToolPolicyError`):
 *   no call of the batch ran;
 * - `TurnFailed`: the host running the turn (a Restate handler) kept failing in an unexpected
 *   way past its bounded retries;
 * - `Unknown`: a failure stored by another build under a type this one does not know (its
 *   message keeps the stored type and text).
 *
 * @example
 * ```ts
 * function explain(type: FailureType): string {
 *   switch (type) {
 *     case 'ModelError': return 'the model call failed';
 *     case 'ToolError': return 'the tools could not run';
 *     case 'CompactionError': return 'the compactor failed';
 *     case 'CompactionStalled': return 'the conversation no longer fits';
 *     case 'OperationError': return 'an operation failed';
 *     case 'ToolPolicyError': return 'a tool policy failed';
 *     case 'TurnFailed': return 'the host could not run the turn';
 *     case 'Unknown': return 'a failure this version does not know';
 *   }
 * }
 * ```
 */
export const FAILURE_TYPES = ['ModelError', 'ToolError', 'CompactionError', 'CompactionStalled', 'OperationError', 'ToolPolicyError', 'TurnFailed', 'Unknown'] as const;
export type FailureType = (typeof FAILURE_TYPES)[number];

const known = new Set<string>(FAILURE_TYPES);

/** A failure as an agent run reports it. */
export interface Failure {
  type: FailureType;
  message: string;
}

/**
 * How an agent run ended: the brain's outcomes, with a failure's type from `FAILURE_TYPES`.
 *
 * @example
 * ```ts
 * const summary = (outcome: AgentOutcome) => (outcome.type === 'Failed' ? `${outcome.error.type}: ${outcome.error.message}` : outcome.type);
 * ```
 */
export type AgentOutcome = Exclude<Outcome, { type: 'Failed' }> | { type: 'Failed'; error: Failure };

/** A brain outcome as an agent outcome: a failure type outside the set reads as `Unknown`, keeping its text. */
export function agentOutcome(outcome: Outcome): AgentOutcome {
  if (outcome.type !== 'Failed' || known.has(outcome.error.type)) return outcome as AgentOutcome;
  return { type: 'Failed', error: { type: 'Unknown', message: `${outcome.error.type}: ${outcome.error.message}` } };
}

/** A stored agent outcome (a session row, a snapshot), read with unknown failure types as `Unknown`. */
export const AgentOutcomeSchema = OutcomeSchema.transform(agentOutcome);

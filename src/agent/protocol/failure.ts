import { z } from 'zod';
import { LoopchartError } from '../../errors.js';
import { OutcomeSchema, type Outcome, type TrippedGuardrail } from '../../schemas.js';
import { jsonValueProblem } from '../../json-value.js';

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
 * - `StructuredOutputError`: the final answer never matched the agent's `output` schema;
 * - `GuardrailTripped`: a guardrail tripped (`error.guardrail` names it, with its stage and info);
 * - `GuardrailError`: a guardrail threw, timed out or returned no verdict;
 * - `InvalidInput`: the actor's input (`history`, `policy`, `prompt`, `sessionId`) was refused when
 *   it was created; nothing ran, and the message says what was wrong;
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
 *     case 'StructuredOutputError': return 'the answer never matched the output schema';
 *     case 'GuardrailTripped': return 'a guardrail stopped the run';
 *     case 'GuardrailError': return 'a guardrail failed';
 *     case 'InvalidInput': return 'the input was refused before anything ran';
 *     case 'TurnFailed': return 'the host could not run the turn';
 *     case 'Unknown': return 'a failure this version does not know';
 *   }
 * }
 * ```
 */
export const FAILURE_TYPES = ['ModelError', 'ToolError', 'CompactionError', 'CompactionStalled', 'OperationError', 'ToolPolicyError', 'StructuredOutputError', 'GuardrailTripped', 'GuardrailError', 'InvalidInput', 'TurnFailed', 'Unknown'] as const;
export type FailureType = (typeof FAILURE_TYPES)[number];

const known = new Set<string>(FAILURE_TYPES);

/** A failure as an agent run reports it. */
export interface Failure {
  type: FailureType;
  message: string;
  /** A `GuardrailTripped` failure: the guardrail, the stage it guards and the info it gave. */
  guardrail?: TrippedGuardrail | undefined;
}

/**
 * A completed run: the brain's `Completed`, with `output`, the answer validated by the agent's
 * `output` schema (typed `O` when the schema is a zod schema), when the agent has one.
 */
export type CompletedOutcome<O = unknown> = Extract<Outcome, { type: 'Completed' }> & OutputField<O>;

/**
 * `output` is optional when `O` admits undefined (no schema), required otherwise. Asked as "does a
 * function of O take undefined" rather than `undefined extends O`: TypeScript relates two such
 * conditionals only when their `extends` sides are identical, so O there made every result type
 * invariant (`RunAgentResult<{ city: string }>` was no `RunAgentResult<unknown>`); with O on the
 * checked side they are covariant in O.
 */
type OutputField<O> = ((value: O) => void) extends (value: undefined) => void ? { output?: O | undefined } : { output: O };

/**
 * How an agent run ended: the brain's outcomes, with a failure's type from `FAILURE_TYPES` and,
 * for an agent with an `output` schema, the validated answer on `Completed` (`outcome.output`).
 *
 * @example
 * ```ts
 * const summary = (outcome: AgentOutcome) => (outcome.type === 'Failed' ? `${outcome.error.type}: ${outcome.error.message}` : outcome.type);
 * ```
 */
export type AgentOutcome<O = unknown> =
  | Exclude<Outcome, { type: 'Failed' } | { type: 'Completed' }>
  | CompletedOutcome<O>
  | { type: 'Failed'; error: Failure };

/** A brain outcome as an agent outcome: a failure type outside the set reads as `Unknown`, keeping its text. */
export function agentOutcome(outcome: Outcome | AgentOutcome): AgentOutcome {
  if (outcome.type !== 'Failed' || known.has(outcome.error.type)) return outcome as AgentOutcome;
  return { type: 'Failed', error: { type: 'Unknown', message: `${outcome.error.type}: ${outcome.error.message}` } };
}

const [CompletedSchema, ...otherOutcomes] = OutcomeSchema.options;

/**
 * A stored agent outcome (a session row, a snapshot), read with unknown failure types as
 * `Unknown`. A `Completed` keeps its `output` (plain JSON); a row written before outputs existed
 * reads as it was.
 */
export const AgentOutcomeSchema = z
  .discriminatedUnion('type', [
    CompletedSchema.extend({
      output: z
        .unknown()
        .refine((value) => jsonValueProblem(value, 'output') === null, { message: 'the output is not plain JSON' })
        .optional(),
    }),
    ...otherOutcomes,
  ])
  .transform((outcome) => agentOutcome(outcome as Outcome | AgentOutcome));

/**
 * Thrown through the executor in place of running a call whose start an earlier process
 * journaled and whose result nobody recorded: the run asks a person instead (the tool's `inDoubt:
 * 'ask'`). An executor passes it on like any tool error; only its name and message must survive
 * (Restate's steps keep no more), so the driver knows it by its name.
 *
 * @example
 * ```ts
 * import { ToolInDoubtError } from 'loopchart';
 *
 * const error: unknown = new ToolInDoubtError('call_1');
 * if (error instanceof Error && error.name === 'ToolInDoubtError') console.log('the run will ask a person');
 * ```
 */
export class ToolInDoubtError extends LoopchartError {
  readonly toolCallId: string;
  constructor(toolCallId: string) {
    super('ToolInDoubt', `tool call '${toolCallId}' was started before the restart and has no recorded result`);
    this.toolCallId = toolCallId;
  }
}

export const isInDoubtSignal = (error: unknown): boolean => error instanceof Error && error.name === ToolInDoubtError.name;

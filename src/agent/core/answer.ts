/**
 * How a model's reply becomes the run's answer. The core applies a reply as it is; a feature that
 * judges answers (structured output) gives the compiled agent its `AnswerRules`, wired in by
 * `compile`, so an agent without one never reaches that feature's code on its reply path.
 */
import type { StructuredOutputError } from '../../errors.js';
import type { ModelReply } from '../../model.js';
import type { Outcome, Policy } from '../../schemas.js';
import type { AgentOutcome } from '../protocol/failure.js';
import type { BrainState } from './brain-state.js';

/** A reply judged: what the run applies, and what the judge decided (`S`: the judge's own state, kept in the run's context). */
export interface AnswerStep<S> {
  /** The brain to feed the reply to (with the feedback queued when the answer goes back). */
  brain: BrainState;
  /** The reply as the transcript keeps it (an answer given through the tool becomes its JSON text). */
  reply: ModelReply;
  state: S | undefined;
  /** The outcome the run ends with instead of the brain's, once the reply is in. */
  overrule?: Outcome | undefined;
  /** The answer did not validate (sent back, or the run fails with it). */
  rejected?: StructuredOutputError | undefined;
}

/** What a judge of answers does at the four points the core gives it. */
export interface AnswerRules<S> {
  /** The reply judged before it is applied. */
  judge(brain: BrainState, state: S | undefined, reply: ModelReply): AnswerStep<S>;
  /** The brain once the judged reply is applied: an overruling outcome ends the run with it. */
  settle(step: AnswerStep<S>, brain: BrainState): BrainState;
  /** The policy the brain decides with (a final call may take one turn past the limit). */
  policy(policy: Policy, state: S | undefined): Policy;
  /** The run's outcome as its output says it (a completed run's answer parsed). */
  outcome(outcome: AgentOutcome): AgentOutcome;
}

/**
 * A reply judged by `rules`, or taken as it is without them.
 *
 * @example
 * ```ts
 * declare const brain: Parameters<typeof judgeReply>[1];
 * const step = judgeReply(undefined, brain, undefined, { message: { role: 'assistant', content: 'Lyon' }, finishReason: 'stop' });
 * console.log(step.reply.message.content); // 'Lyon': without a judge, the reply as it is
 * ```
 */
export const judgeReply = <S>(rules: AnswerRules<S> | undefined, brain: BrainState, state: S | undefined, reply: ModelReply): AnswerStep<S> =>
  rules ? rules.judge(brain, state, reply) : { brain, reply, state };

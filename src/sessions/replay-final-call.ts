import { FINAL_ANSWER_TOOL, finalCallOf, type OutputState, type StructuredOutput } from '../agent/structured-output/structured-output.js';
import type { BrainState } from '../agent/core/brain-state.js';
import type { Message, Outcome, UserMessage } from '../schemas.js';
import type { ReplayedReply } from './replay-guard.js';

/*
 * Replay's rules for a structured-output final call (structured-output.ts, `beginFinalCall`):
 * a run about to end by maxTurns or a budget (also a time budget that cut a tool batch) asked
 * the model once more for its answer. The trace has no entry of its own for it: the request the
 * driver put into the conversation is in that model call's prompt delta, which says why the run
 * was ending and how the answer was asked for. Pure functions of recorded entries.
 */

/** A final call as replay holds it: the driver's own record of it, how the answer was asked for, and the answer once fed. */
export interface ReplayedFinalCall {
  state: NonNullable<OutputState['finalCall']>;
  mode: StructuredOutput['mode'];
  /** The text the brain was fed as the final call's reply. */
  answer?: string | undefined;
}

/**
 * The final call's request in a model call's prompt delta, or null. Only a request the model has
 * not answered yet counts: a later call's delta that holds the whole prompt again (a reopened
 * process) shows an earlier run's request with that run's answer after it.
 */
export function finalCallRequestIn(prompt: readonly Message[]): { message: UserMessage; mode: StructuredOutput['mode']; outcome: ReplayedFinalCall['state']['outcome'] } | null {
  for (let i = prompt.length - 1; i >= 0; i--) {
    const message = prompt[i]!;
    if (message.role === 'assistant') return null;
    if (message.role !== 'user') continue;
    const asked = finalCallOf(message);
    if (asked) return { message, ...asked };
  }
  return null;
}

/**
 * The final call's reply as the brain was fed it (`judgeAnswer`): text only, whatever it held.
 * In tool mode a `final_answer` call among its calls is the answer, its arguments' JSON; else the
 * reply's text (its other calls never run). The turn ends as a natural stop does.
 */
export function finalReplyAsText(reply: ReplayedReply, mode: StructuredOutput['mode']): ReplayedReply {
  const answer = mode === 'tool' ? reply.message.toolCalls?.find((call) => call.name === FINAL_ANSWER_TOOL) : undefined;
  return {
    message: { role: 'assistant', content: answer ? JSON.stringify(answer.args) : reply.message.content },
    finishReason: reply.finishReason === 'tool-calls' ? 'stop' : reply.finishReason,
  };
}

const sameOutcome = (recorded: Outcome, reached: ReplayedFinalCall['state']['outcome']): boolean =>
  recorded.type === reached.type && (reached.type !== 'Sealed' || (recorded.type === 'Sealed' && recorded.reason === reached.reason));

/**
 * The outcome the driver gave a run once its final call's reply was in (`settleAnswer`), read off
 * the recorded one, or null when it is none of these (a cancel, a failure, a host's seal: fed as
 * recorded). Replay has no schema to judge the answer with: an answer refused ends the run as it
 * would have ended (the outcome the request names); a valid one completes it, also when a steer
 * queued during the call would otherwise have kept the brain going.
 */
export function finalCallOutcome(call: ReplayedFinalCall, recorded: Outcome, brain: BrainState): Outcome | null {
  if (call.answer === undefined || brain.context.outcome?.type === 'Failed') return null;
  if (sameOutcome(recorded, call.state.outcome)) return call.state.outcome;
  if (recorded.type === 'Completed' && brain.value !== 'Terminal') return { type: 'Completed', finalText: call.answer };
  return null;
}

import { guardFeedbackMessage, type GuardrailVerdict } from '../agent/guardrails/guardrails.js';
import { FINAL_ANSWER_TOOL, isOutputFeedback } from '../agent/structured-output/structured-output.js';
import type { AssistantMessage, Message, ToolMessage, UserMessage } from '../schemas.js';
import type { TraceEntry, TraceEntryOf } from './trace.js';

/*
 * Replay's rules for what the driver does to a reply beyond the brain (pure functions of
 * recorded entries): a structured answer given through the `final_answer` tool, and a reply
 * that would complete the run held until the output guardrails decide (guardrails.ts).
 */

/** A recorded reply as the brain is fed it. */
export interface ReplayedReply {
  message: AssistantMessage;
  finishReason?: string | undefined;
}

/**
 * A lone `final_answer` call (offered to the model) is the run's answer, not a tool to run: the
 * driver keeps it as text, its arguments' JSON, and the turn ends as a natural stop does
 * (structured-output.ts, `judgeAnswer`). Any other reply is fed as recorded.
 */
export function answerAsText(reply: ReplayedReply, offered: readonly string[]): ReplayedReply {
  const calls = reply.message.toolCalls ?? [];
  if (calls.length !== 1 || calls[0]!.name !== FINAL_ANSWER_TOOL || !offered.includes(FINAL_ANSWER_TOOL)) return reply;
  return {
    message: { role: 'assistant', content: JSON.stringify(calls[0]!.args) },
    finishReason: reply.finishReason === 'tool-calls' ? 'stop' : reply.finishReason,
  };
}

/** What became of a held reply: fed as is, fed then answered with the guardrails' feedback, or never fed (the run stopped). */
export type HeldReplyOutcome = { type: 'apply' } | { type: 'feedback'; message: UserMessage } | { type: 'stopped' };

/**
 * Settles a held reply from its check's guardrail entries once the entry after them is read
 * (`next`, null at the trace's end). A trip, a guardrail that failed, or a run that then failed
 * a guardrail check (feedback past its rounds trips with no trip verdict) stops the run before
 * the reply is fed; feedback is joined as the driver joins it (guardrails.ts, `guardOutcome`).
 */
export function settleHeldReply(checks: readonly TraceEntryOf<'guardrail'>[], next: TraceEntry | null): HeldReplyOutcome {
  const failedGuard = next?.type === 'finished' && next.outcome.type === 'Failed' && ['GuardrailTripped', 'GuardrailError'].includes(next.outcome.error.type);
  const verdicts = checks.flatMap((entry): GuardrailVerdict[] => (entry.verdict ? [entry.verdict] : []));
  if (failedGuard || checks.some((entry) => entry.error) || verdicts.some((verdict) => verdict.type === 'trip')) return { type: 'stopped' };
  const feedback = verdicts.flatMap((verdict) => (verdict.type === 'feedback' ? [verdict.message] : []));
  return feedback.length === 0 ? { type: 'apply' } : { type: 'feedback', message: guardFeedbackMessage(feedback.join('\n\n')) };
}

/** The result a model call's prompt delta shows for a call (not pruned), or undefined. */
export const shownResult = (prompt: readonly Message[], callId: string): ToolMessage | undefined =>
  prompt.find((message): message is ToolMessage => message.role === 'tool' && message.toolCallId === callId && !message.content.startsWith('[pruned: '));

/**
 * The feedback the driver sent back with an answer that did not match the output schema
 * (structured-output.ts, `judgeAnswer`): it steers the feedback in, then feeds the reply, and
 * the model answers again. Read off the next model call of the run, whose prompt shows it after
 * the reply; undefined when that call shows none.
 */
export function outputFeedbackIn(next: TraceEntry | null, run: number): UserMessage | undefined {
  if (next?.type !== 'model' || next.run !== run) return undefined;
  return next.promptDelta.find((message): message is UserMessage => message.role === 'user' && isOutputFeedback(message));
}

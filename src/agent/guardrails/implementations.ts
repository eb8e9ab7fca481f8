/**
 * Guardrails in the driver: the chart's guards and actions for them, and the rules those read
 * over the compiled agent and the run's context (the checks themselves are in guardrails.ts,
 * their IO in io.ts). An input check opens before the run's first model call; a reply that would
 * complete the run is held until the output check is decided.
 */
import type { ModelReply } from '../../model.js';
import { assign, assigns, configured, configuredAction, rule, when, type Args, type ContextHook } from '../core/bind.js';
import { MessageLog } from '../../brain/message-log.js';
import type { Message } from '../../schemas.js';
import type { FeatureHandlers } from '../protocol/io-protocol.js';
import { guardrailsHandler } from './io.js';
import { firstPending, feedBrain } from '../core/brain-state.js';
import type { CompiledAgent } from '../core/compile.js';
import type { AgentContext } from '../core/context.js';
import { afterReply, answerOf, conversation, endRun, replyApplied } from '../core/driver-rules.js';
import type { Effect } from '../core/effects.js';
import { errorInfo } from '../core/run-rules.js';
import { as, type AgentEvent } from '../protocol/agent-event.js';
import { deliveryIds } from '../protocol/delivery.js';
import { fromIo, type IoRequest } from '../protocol/io-protocol.js';
import { keyOf, turnAt } from '../protocol/keys.js';
import { judgeReply } from '../core/answer.js';
import * as guard from './guardrails.js';

/** The run's own input check is due (before its first model call). */
const inputDue = (agent: CompiledAgent, context: AgentContext) =>
  guard.inputCheckDue(agent.guardrails, context.guard, context.brain.context.turnsTaken, guard.inputCheckKey(context));

/** The output guardrail check of the reply the current model call brought. */
export const outputCheckKey = (context: AgentContext) =>
  keyOf({ kind: 'guardCheck', stage: 'output', ...turnAt(context, context.brain.context.turnsTaken + 1) });

/** The open guardrail check's outcome (see guardrails.ts); a final call leaves no turn for feedback. */
export const guardVerdict = (agent: CompiledAgent, context: AgentContext) => guard.guardOutcome(agent.guardrails!, context.guard!.check!, context.guard!.feedbacks, !context.outputState?.finalCall);

/** A reply that would complete the run waits for the output guardrails first. */
export const guardsReply = (agent: CompiledAgent, context: AgentContext, event: AgentEvent) =>
  !!agent.guardrails?.output.length && guard.completes(replyApplied(agent, context, answerOf(agent, context, event)).brain);

const pickUsage = ({ runUsage, sessionUsage, models }: Pick<AgentContext, 'runUsage' | 'sessionUsage' | 'models'>) => ({ runUsage, sessionUsage, ...(models && { models }) });

/** Asks the IO for the verdicts of the check's guardrails that have none yet. */
export function requestGuardrails(agent: CompiledAgent, context: AgentContext, _event: AgentEvent): Effect[] {
  const out: Effect[] = [];
  const check = context.guard!.check!;
  const names = guard.undecidedGuardrails(agent.guardrails!, check).map((guardrail) => guardrail.name);
  const { turnsTaken } = context.brain.context;
  const judged = check.stage === 'output' ? guard.judgedText(agent.structured, judgeReply(agent.answers, context.brain, context.outputState, check.reply as ModelReply)) : null;
  const steered = check.steers !== undefined ? (context.guard!.steered ?? []).slice(0, check.steers) : null;
  const about = judged ?? { text: steered ? steered.join('\n\n') : firstPending(context.brain)!.content };
  const request = { type: 'guardrails', key: check.key, stage: check.stage, names, turn: turnsTaken + 1, sessionId: context.sessionId, ...about } as const;
  const before = judged ? conversation(context) : steered ? withoutSteered(conversation(context), steered) : conversation(context).discardPending();
  if (names.length > 0) out.push({ send: { ...request, conversation: before } satisfies IoRequest });
  return out;
}

/** The conversation before the steering a check judges: its messages taken out (the last user messages with those texts). */
function withoutSteered(log: MessageLog, steered: readonly string[]): MessageLog {
  const left = [...steered];
  const kept: Message[] = [];
  const all = log.toArray();
  for (let i = all.length - 1; i >= 0; i--) {
    const message = all[i]!;
    const at = message.role === 'user' ? left.lastIndexOf(message.content as string) : -1;
    if (at >= 0) left.splice(at, 1);
    else kept.unshift(message);
  }
  return MessageLog.of(kept, []);
}

/** The text of a message a user sent into the run (a string, or a user message's content). */
const steeredText = (event: AgentEvent): string => {
  const message = (event as { message: string | { content: string } }).message;
  return typeof message === 'string' ? message : message.content;
};

/** The check is decided (guardrails.ts): the input passes or trips; an output check's held reply is applied, with feedback, or trips. */
export function settleGuard(agent: CompiledAgent, context: AgentContext, _event: AgentEvent): Effect[] {
  const out: Effect[] = [];
  const outcome = guardVerdict(agent, context) as Exclude<guard.GuardOutcome, { type: 'open' }>;
  const { stage, reply } = context.guard!.check!;
  const settled = { guard: guard.settledGuard(context.guard!, outcome) };
  const judged = stage === 'output' ? judgeReply(agent.answers, context.brain, context.outputState, reply as ModelReply) : null;
  if (outcome.type === 'tripped') {
    out.push({ emit: { type: 'guardrail.tripped', error: new guard.GuardrailTrippedError(outcome.guardrail, outcome.message) } });
    const spent = judged ? pickUsage(replyApplied(agent, context, judged)) : {};
    return [...out, { assign: { ...endRun(agent, context, { type: 'Failed', error: guard.trippedFailure(outcome) }), ...settled, ...spent } }];
  }
  if (!judged) return [...out, { assign: settled }];
  const turn = context.brain.context.turnsTaken + 1;
  if (outcome.type === 'feedback') out.push({ emit: { type: 'guardrail.feedback', turn, message: outcome.message } });
  const steered = outcome.type === 'feedback' ? feedBrain(judged.brain, { type: 'steer', message: guard.guardFeedbackMessage(outcome.message) }) : judged.brain;
  out.push({ assign: { ...afterReply(agent, context, { ...judged, brain: steered }), ...settled } });
  out.push({ emit: { type: 'turn.finished', id: deliveryIds.reply(context.runIndex, turn, context.attempt?.attempt ?? 1), turn, reply: reply as ModelReply } });
  return out;
}

/** A guardrail that could not be run (it threw, timed out) fails the run. */
export function failGuardrail(agent: CompiledAgent, context: AgentContext, event: AgentEvent): Partial<AgentContext> {
  return endRun(agent, context, { type: 'Failed', error: errorInfo('GuardrailError', as(event, 'io.failed').error) });
}

/** The guards and actions the chart names for guardrails. */
export const guardrailImplementations = {
  // The IO's handler for this feature's requests.
  io: { guardrails: guardrailsHandler } satisfies FeatureHandlers,
  runStart: ((agent, context) => (agent.guardrails ? { guard: guard.nextRunGuard(context.guard, conversation(context).historyView()) } : {})) satisfies ContextHook,
  guards: {
    // The run's input before its first model call; then, before each call, what a user sent into the run meanwhile.
    inputGuardDue: configured(
      (agent) => !!agent.guardrails?.input.length,
      ({ agent, context }) => inputDue(agent, context) || guard.steerCheckDue(agent.guardrails, context.guard),
    ),
    outputGuardDue: configured((agent) => !!agent.guardrails?.output.length, ({ agent, context, event }) => guardsReply(agent, context, event)),
    // Only an agent with guardrails opens a check (a stored one is checked against them).
    guardOpen: configured((agent) => agent.guardrails !== null, ({ context }) => !!context.guard?.check),
    guardUndecided: when(({ agent, context }) => guardVerdict(agent, context).type === 'open'),
    guardTripped: when(({ agent, context }) => guardVerdict(agent, context).type === 'tripped'),
    currentGuardCheck: ({ context, event }: Args) => fromIo(event) && context.guard?.check?.key === (event as { key: string }).key,
  },
  actions: {
    openInputCheck: assigns(({ agent, context }) => ({
      guard: inputDue(agent, context)
        ? guard.openCheck(context.guard, guard.inputCheckKey(context), 'input')
        : guard.openSteerCheck(context.guard!, guard.steerCheckKey(context, (context.guard!.steerChecks ?? 0) + 1)),
    })),
    // A message sent into the run while it goes is judged by the input guardrails before a model call reads it.
    noteSteer: configuredAction(
      (agent) => !!agent.guardrails?.input.length,
      assigns(({ context, event }) => ({ guard: guard.withSteered(context.guard, steeredText(event)) })),
    ),
    holdReply: assign({ guard: ({ context, event }) => guard.openCheck(context.guard, outputCheckKey(context), 'output', as(event, 'io.replied').reply) }),
    recordGuardVerdict: assign({ guard: ({ context, event }) => guard.withVerdict(context.guard!, as(event, 'io.guarded').name, as(event, 'io.guarded').verdict) }),
    requestGuardrails: rule.effects(requestGuardrails),
    settleGuard: rule.effects(settleGuard),
    failGuardrail: rule.assign(failGuardrail),
  },
};

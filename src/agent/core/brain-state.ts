import { decide, emptyLoopContext, reduceLoop } from '../../../machines/loop.machine.js';
import { InvalidFeedError } from '../../errors.js';
import { feedRejection } from '../../brain/feed-rejection.js';
import { fieldsOf, logOf, loopContextOf } from '../../brain/message-log.js';
import type { LoopEvent } from '../../brain/loop-events.js';
import type { FailureType } from '../protocol/failure.js';
import type { LoopContext, Message, PendingToolCall, Policy, StateName, Step } from '../../schemas.js';

/**
 * The brain as the driver carries it: plain data (state name + context) inside the driver's
 * context, advanced by `reduceLoop`, the pure transition generated from the statechart's own
 * table. Plain data persists with the driver's snapshot as is, and the driver never reads a
 * stale brain.
 */
export interface BrainState {
  value: StateName;
  context: LoopContext;
}

export const freshBrain = (history: Message[] = []): BrainState => ({
  value: 'Start',
  context: emptyLoopContext(history),
});

/** Applies one feed; a feed the brain refuses is a driver bug and throws the brain's typed error. */
export function feedBrain(brain: BrainState, event: LoopEvent): BrainState {
  const rejected = feedRejection(brain.value, brain.context, event);
  if (rejected) throw rejected;
  return reduceLoop(brain.value, brain.context, event, true) ?? brain;
}

/**
 * Steering queued when the run was cancelled is kept: delivered into the run's pending messages,
 * so the conversation the next run sees has it (the salvage keeps it, after the coherent part).
 */
export function keepSteering(brain: BrainState): BrainState {
  if (brain.value === 'Terminal' || brain.context.steering.length === 0) return brain;
  return brain.context.steering.reduce<BrainState>((next, message) => feedBrain(next, { type: 'inject', message }), brain);
}

/**
 * Applies a feed whose payload came from outside (a model reply, a compactor's output); if the
 * brain refuses the payload, the run fails with `errorType` instead of the actor crashing.
 */
export function feedOrFail(brain: BrainState, event: LoopEvent, errorType: FailureType): BrainState {
  const rejected = feedRejection(brain.value, brain.context, event);
  if (!rejected) return reduceLoop(brain.value, brain.context, event, true) ?? brain;
  if (!(rejected instanceof InvalidFeedError)) throw rejected;
  return feedBrain(brain, { type: 'fail', error: { type: errorType, message: rejected.message } });
}

/**
 * The tool calls the brain waits for (none outside AwaitingTools). The brain's own array, for
 * the driver's read-only use: `stepOf` hands callers a copy, this is the hot path.
 */
export const pendingCalls = (brain: BrainState): readonly PendingToolCall[] =>
  brain.value === 'AwaitingTools' ? brain.context.pendingTools : [];

/**
 * The last step kind asked of each brain, with the policy it was asked under: a decision list
 * asks the same brain several times in one pass (`callLLM`, then `callTools` and the folded
 * branches after it; see chart-variant.ts). A brain is a value, never changed in place.
 */
const asked = new WeakMap<BrainState, { policy: Policy; type: Step['type'] }>();

/** The kind of the next step, without building it. */
export function stepTypeOf(brain: BrainState, policy: Policy): Step['type'] {
  const last = asked.get(brain);
  if (last?.policy === policy) return last.type;
  const { type } = decide(brain.value, brain.context, policy);
  asked.set(brain, { policy, type });
  return type;
}

/** Takes the decision `stepTypeOf` reports, moving the brain as the statechart would. */
export function takeStep(brain: BrainState, policy: Policy): BrainState {
  return decide(brain.value, brain.context, policy).target ? feedBrain(brain, { type: 'next', policy }) : brain;
}

/** The whole conversation (history, then pending) as a new list. */
export const conversationOf = (brain: BrainState): Message[] => logOf(brain.context).toArray();

/** The run's first message (its prompt), if a run is in flight. */
export const firstPending = (brain: BrainState): Message | undefined => {
  const log = logOf(brain.context);
  return log.at(log.split);
};

/** A brain at rest over the committed history of `previous`, sharing its messages (the next run starts here). */
export const restingBrain = (previous: BrainState): BrainState => ({
  value: 'Start',
  context: loopContextOf(fieldsOf(emptyLoopContext()), logOf(previous.context).discardPending()),
});

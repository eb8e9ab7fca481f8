import { decide, emptyLoopContext, reduceLoop, type Append } from '../../machines/loop.machine.js';
import { InvalidFeedError } from '../errors.js';
import { feedRejection } from '../feed-rejection.js';
import type { LoopEvent } from '../loop-events.js';
import type { FailureType } from './failure.js';
import type { LoopContext, Message, PendingToolCall, Policy, StateName, Step } from '../schemas.js';

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

/**
 * Lists the driver grew itself. It appends to those in place, so a turn costs the same at
 * message 10 and at message 10,000; any other list (a caller's history, a restored snapshot's)
 * is copied once, and the copy is the driver's from then on. The price: a list read from an
 * earlier snapshot may have grown since; copy it if you keep it across events.
 */
const owned = new WeakSet<readonly unknown[]>();
export const appendOwned: Append = <T>(list: readonly T[], items: readonly T[]): T[] => {
  if (owned.has(list)) {
    const mutable = list as T[];
    for (const item of items) mutable.push(item);
    return mutable;
  }
  const copy = list.concat(items);
  owned.add(copy);
  return copy;
};

/** Applies one feed; a feed the brain refuses is a driver bug and throws the brain's typed error. */
export function feedBrain(brain: BrainState, event: LoopEvent): BrainState {
  const rejected = feedRejection(brain.value, brain.context, event);
  if (rejected) throw rejected;
  return reduceLoop(brain.value, brain.context, event, appendOwned) ?? brain;
}

/**
 * Applies a feed whose payload came from outside (a model reply, a compactor's output); if the
 * brain refuses the payload, the run fails with `errorType` instead of the actor crashing.
 */
export function feedOrFail(brain: BrainState, event: LoopEvent, errorType: FailureType): BrainState {
  const rejected = feedRejection(brain.value, brain.context, event);
  if (!rejected) return reduceLoop(brain.value, brain.context, event, appendOwned) ?? brain;
  if (!(rejected instanceof InvalidFeedError)) throw rejected;
  return feedBrain(brain, { type: 'fail', error: { type: errorType, message: rejected.message } });
}

/**
 * The tool calls the brain waits for (none outside AwaitingTools). The brain's own array, for
 * the driver's read-only use: `stepOf` hands callers a copy, this is the hot path.
 */
export const pendingCalls = (brain: BrainState): readonly PendingToolCall[] =>
  brain.value === 'AwaitingTools' ? brain.context.pendingTools : [];

/** The kind of the next step, without building it. */
export function stepTypeOf(brain: BrainState, policy: Policy): Step['type'] {
  return decide(brain.value, brain.context, policy).type;
}

/** Takes the decision `stepTypeOf` reports, moving the brain as the statechart would. */
export function takeStep(brain: BrainState, policy: Policy): BrainState {
  return decide(brain.value, brain.context, policy).target ? feedBrain(brain, { type: 'next', policy }) : brain;
}

/** The whole conversation (history, then pending) as a new list. */
export const conversationOf = (brain: BrainState): Message[] => brain.context.history.concat(brain.context.pending);

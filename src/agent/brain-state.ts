import { transition } from 'xstate';
import { decide, emptyLoopContext, loopMachine, type LoopSnapshot } from '../../machines/loop.machine.js';
import { IllegalFeedError, InvalidFeedError } from '../errors.js';
import { feedProblem } from '../feed-problems.js';
import type { LoopEvent } from '../loop-events.js';
import type { LoopContext, Message, Policy, StateName, Step } from '../schemas.js';

/**
 * The brain as the driver carries it: plain data (state name + context) inside the driver's
 * context, advanced with XState's pure `transition`. Plain data persists with the driver's
 * snapshot as is, and a pure transition is synchronous, so the driver never reads a stale brain.
 */
export interface BrainState {
  value: StateName;
  context: LoopContext;
}

export const freshBrain = (history: Message[] = []): BrainState => ({
  value: 'Start',
  context: emptyLoopContext(history),
});

const snapshotOf = (brain: BrainState): LoopSnapshot =>
  loopMachine.resolveState({ value: brain.value, context: brain.context });

/** Applies one feed; a feed the brain refuses is a driver bug and throws the brain's typed error. */
export function feedBrain(brain: BrainState, event: LoopEvent): BrainState {
  const snapshot = snapshotOf(brain);
  if (!snapshot.can(event)) {
    const problem = feedProblem(brain.context, event);
    throw problem?.kind === 'invalid'
      ? new InvalidFeedError(event.type, problem.problem)
      : new IllegalFeedError(event.type, brain.value, problem?.problem);
  }
  const [next] = transition(loopMachine, snapshot, event);
  return { value: next.value, context: next.context };
}

/**
 * Applies a feed whose payload came from outside (a model reply, a compactor's output); if the
 * brain refuses the payload, the run fails with `errorType` instead of the actor crashing.
 */
export function feedOrFail(brain: BrainState, event: LoopEvent, errorType: string): BrainState {
  const problem = feedProblem(brain.context, event);
  if (problem?.kind !== 'invalid') return feedBrain(brain, event);
  return feedBrain(brain, { type: 'fail', error: { type: errorType, message: `${event.type}: ${problem.problem}` } });
}

export function stepOf(brain: BrainState, policy: Policy): Step {
  return decide(brain.value, brain.context, policy).step(brain.context);
}

/** Takes the decision `stepOf` reports, moving the brain as the statechart would. */
export function takeStep(brain: BrainState, policy: Policy): BrainState {
  return decide(brain.value, brain.context, policy).target
    ? feedBrain(brain, { type: 'next', policy })
    : brain;
}

export const conversationOf = (brain: BrainState): Message[] =>
  brain.context.history.concat(brain.context.pending);

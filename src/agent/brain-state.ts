import { createActor } from 'xstate';
import { decide, emptyLoopContext, loopMachine, type LoopSnapshot } from '../../machines/loop.machine.js';
import { InvalidFeedError } from '../errors.js';
import { feedRejection } from '../feed-rejection.js';
import type { LoopEvent } from '../loop-events.js';
import type { LoopContext, Message, PendingToolCall, Policy, StateName, Step } from '../schemas.js';

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

// Snapshots are rebuilt from plain data only when the driver was restored: otherwise the one
// the last transition produced is found by its context, which is never shared.
const snapshots = new WeakMap<LoopContext, LoopSnapshot>();
const snapshotOf = (brain: BrainState): LoopSnapshot => {
  let snapshot = snapshots.get(brain.context);
  if (!snapshot || snapshot.value !== brain.value) {
    snapshot = loopMachine.resolveState({ value: brain.value, context: brain.context });
    snapshots.set(brain.context, snapshot);
  }
  return snapshot;
};

// XState's pure `transition()` builds a throwaway actor per call; the brain has no children,
// no delayed events and only `assign` actions, so one inert scope serves every transition.
let scope: Parameters<typeof loopMachine.transition>[2] | undefined;
function inertScope(): Parameters<typeof loopMachine.transition>[2] {
  if (scope) return scope;
  const self = createActor(loopMachine);
  scope = {
    self,
    system: self.system,
    id: '',
    sessionId: '',
    logger: () => {},
    defer: () => {},
    emit: () => {},
    stopChild: () => {},
    actionExecutor: () => {},
  } as unknown as Parameters<typeof loopMachine.transition>[2];
  return scope;
}

/** Applies one feed; a feed the brain refuses is a driver bug and throws the brain's typed error. */
export function feedBrain(brain: BrainState, event: LoopEvent): BrainState {
  const rejected = feedRejection(brain.value, brain.context, event);
  if (rejected) throw rejected;
  return transitionBrain(brain, event);
}

/** The transition itself, for feeds already checked. */
function transitionBrain(brain: BrainState, event: LoopEvent): BrainState {
  const next = loopMachine.transition(snapshotOf(brain), event, inertScope());
  snapshots.set(next.context, next);
  return { value: next.value, context: next.context };
}

/**
 * Applies a feed whose payload came from outside (a model reply, a compactor's output); if the
 * brain refuses the payload, the run fails with `errorType` instead of the actor crashing.
 */
export function feedOrFail(brain: BrainState, event: LoopEvent, errorType: string): BrainState {
  const rejected = feedRejection(brain.value, brain.context, event);
  if (!rejected) return transitionBrain(brain, event);
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

import { acceptsFeed } from '../../machines/loop.machine.js';

export { acceptsFeed };
import { IllegalFeedError, InvalidFeedError } from '../errors.js';
import { feedProblem } from './feed-problems.js';
import type { LoopEvent } from './loop-events.js';
import type { LoopContext, StateName } from '../schemas.js';

/**
 * The typed error a feed earns in this state, or null when the brain takes it: the one place
 * the facade and the driver turn "refused" into IllegalFeedError or InvalidFeedError.
 */
export function feedRejection(state: StateName, context: LoopContext, event: LoopEvent): Error | null {
  if (!acceptsFeed(state, event.type)) return new IllegalFeedError(event.type, state);
  const problem = feedProblem(context, event);
  if (!problem) return null;
  return problem.kind === 'invalid'
    ? new InvalidFeedError(event.type, problem.problem)
    : new IllegalFeedError(event.type, state, problem.problem);
}

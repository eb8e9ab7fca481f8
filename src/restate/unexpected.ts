import * as restate from '@restatedev/restate-sdk';
import { runInFlight } from '../agent/protocol/actor-types.js';
import { type AgentContext } from '../agent/core/context.js';
import { feedBrain } from '../agent/core/brain-state.js';
import { closeOperations } from '../agent/operations/operation-rules.js';
import { finishBrain, overruleOutcome } from '../agent/core/run-rules.js';
import { agentOutcome, type FailureType } from '../agent/protocol/failure.js';
import type { Outcome } from '../schemas.js';

/*
 * An unexpected error in a turn (not a TerminalError, not a step's failure, which is the run's to
 * decide): Restate would retry the invocation forever, and the session's queue behind it with
 * it. Instead it is retried a bounded number of times, counted by Restate itself (the error is
 * rethrown inside a `ctx.run` with `maxRetryAttempts`: each attempt replays the journal to the
 * same point, and the run's retry count survives attempts and workers). Once they are spent,
 * the run in flight, if any, ends `Failed` with `UNEXPECTED_ERROR_TYPE` in the K/V, and the
 * client gets a TerminalError saying so: the session takes the next input.
 */

/** The error type of a run failed this way (its outcome's `error.type`). */
export const UNEXPECTED_ERROR_TYPE = 'TurnFailed' satisfies FailureType;
/** Attempts of a turn that fails unexpectedly, the first included. */
export const UNEXPECTED_MAX_ATTEMPTS = 4;
const RETRY = { maxRetryAttempts: UNEXPECTED_MAX_ATTEMPTS, initialRetryInterval: 200, maxRetryInterval: 2_000 };

/** Whether an error is the SDK's own (suspension, a closed attempt, a terminal error): passed on untouched. */
export const isRestateOwn = (error: unknown): boolean => error instanceof restate.RestateError;

/**
 * Retries the turn's unexpected `error` (by ending this attempt) until the attempts are spent;
 * then resolves with the message to fail the run with.
 */
export async function boundedRetry(ctx: restate.ObjectSharedContext, error: unknown): Promise<string> {
  const message = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  try {
    await ctx.run(
      'turn failed unexpectedly',
      () => {
        throw error instanceof Error ? error : new Error(message);
      },
      RETRY,
    );
  } catch (spent) {
    if (!(spent instanceof restate.TerminalError) || spent instanceof restate.CancelledError) throw spent;
  }
  return `the turn failed ${UNEXPECTED_MAX_ATTEMPTS} times: ${message}`.slice(0, 2_000);
}

/** The context with its run in flight ended `Failed` (a context at rest is returned as it is). */
export function failedRun(context: AgentContext, message: string): AgentContext {
  if (!runInFlight(context.brain)) return context;
  const error = { type: UNEXPECTED_ERROR_TYPE, message };
  const outcome: Outcome = { type: 'Failed', error };
  const stopped = context.brain.value === 'Terminal' ? overruleOutcome(context.brain, outcome) : feedBrain(context.brain, { type: 'fail', error });
  const brain = finishBrain(stopped);
  // As a run the chart stops: no batch, nobody awaited, no operation point open.
  return {
    ...context,
    brain,
    lastRun: { outcome: agentOutcome(brain.context.outcome!), usage: context.runUsage },
    toolJournal: [],
    approvals: { ...context.approvals, waiting: [], decisions: {} },
    operations: closeOperations(context.operations),
  };
}

import * as restate from '@restatedev/restate-sdk';
import type { Executor, SideEffect, SideEffectKind, SideEffectOutputs } from '../agent/executor.js';

/**
 * The executor seam as Restate steps: every side effect the agent hands to its executor becomes
 * one `ctx.run` named by the effect's idempotency key. A finished step is in the invocation's
 * journal and is replayed, never run again; a step in flight when a worker or the server died
 * runs again on retry, with the same key (the tools and the model see it as `idempotencyKey`).
 *
 * The step's outcome goes back to the agent only when the turn's loop picks it from a
 * `RestatePromise.race` (see `session-object.ts`): completions reach the chart in the order the
 * journal recorded them, so a replay makes the same decisions in the same order.
 */

/**
 * A step's journaled outcome: a failure is an outcome too (it is the run's to decide), never
 * retried by Restate. `at` is when it finished: the agent's clock moves with the journal.
 */
export type StepOutcome = ({ ok: true; value: unknown } | { ok: false; error: { name: string; message: string } }) & { at: number };

interface PendingStep {
  readonly key: string;
  readonly outcome: restate.RestatePromise<StepOutcome>;
  readonly deliver: (outcome: StepOutcome) => void;
}

const describe = (error: unknown): { ok: false; error: { name: string; message: string } } => {
  let name = 'Error';
  let message: string;
  try {
    if (error instanceof Error) name = error.name;
    message = error instanceof Error ? String(error.message) : String(error);
  } catch {
    message = 'an error whose message could not be read';
  }
  return { ok: false, error: { name, message } };
};

/** The steps one invocation has started and not yet handed back, in the order they started. */
export class StepJournal {
  readonly #ctx: restate.Context;
  readonly #pending = new Map<number, PendingStep>();
  #next = 0;

  constructor(ctx: restate.Context) {
    this.#ctx = ctx;
  }

  get size(): number {
    return this.#pending.size;
  }

  /** Wraps the agent's own executor: the work runs inside the step, where its effects happen once. */
  executor(inner: Executor): Executor {
    return (<K extends SideEffectKind>(effect: SideEffect<K>, perform: () => Promise<SideEffectOutputs[K]>) => {
      const id = this.#next++;
      const outcome = this.#ctx.run(effect.key, async (): Promise<StepOutcome> => {
        try {
          return { ok: true, value: (await inner(effect, perform)) ?? null, at: Date.now() };
        } catch (error) {
          return { ...describe(error), at: Date.now() };
        }
      });
      return new Promise<SideEffectOutputs[K]>((resolve, reject) => {
        this.#pending.set(id, {
          key: effect.key,
          outcome,
          deliver: (result) => {
            if (result.ok) return resolve(result.value as SideEffectOutputs[K]);
            const error = new Error(result.error.message);
            error.name = result.error.name;
            reject(error);
          },
        });
      });
    }) as Executor;
  }

  /** Every pending step's outcome, tagged with its id, for the turn's race. */
  racers(): restate.RestatePromise<{ step: number; outcome: StepOutcome }>[] {
    return [...this.#pending].map(([step, pending]) => pending.outcome.map((outcome, failure) => {
      // A run closure never throws (failures are outcomes); a terminal failure here is Restate's own.
      if (failure) throw failure;
      return { step, outcome: outcome! };
    }));
  }

  /** Hands a finished step's outcome to the agent. */
  deliver(step: number, outcome: StepOutcome): void {
    const pending = this.#pending.get(step);
    if (!pending) return;
    this.#pending.delete(step);
    pending.deliver(outcome);
  }
}

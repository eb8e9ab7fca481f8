import * as restate from '@restatedev/restate-sdk';
import type { Executor, SideEffect, SideEffectKind, SideEffectOutputs } from '../agent/protocol/executor.js';
import { currentScope, extendScope } from '../agent/protocol/call-scope.js';
import { ModelError } from '../model.js';

/**
 * The executor seam as Restate steps: every side effect the agent hands to its executor becomes
 * one `ctx.run` named by the effect's idempotency key. A finished step is in the invocation's
 * journal and is replayed, never run again; a step in flight when a worker or the server died
 * runs again on retry, with the same key (the tools and the model see it as `idempotencyKey`).
 *
 * The step's outcome goes back to the agent only when the turn's loop picks it from a
 * `RestatePromise.race` (see `session-object.ts`): completions reach the chart in the order the
 * journal recorded them, so a replay makes the same decisions in the same order.
 *
 * An agent tool's call (`agentTool`) is the one effect not made a step: its child run goes on
 * inside the parent's invocation, with this journal as its executor and the turn's clock, so each
 * of the child's own side effects is a step keyed by the child's own keys (session
 * `<parent>/<call key>`). Why inline rather than the child as a virtual-object call of its own:
 * Restate allows no step inside a step, and a call to another object cannot be made from inside
 * the tool runner's work; inline, the child's steps race in the parent's loop and reach the child
 * in journal order, so a retry on another worker replays the finished ones (never run again) and
 * runs again only the one in flight; the parent's call stays in flight until the child ends, as
 * it is no step of its own; and what the parent's channel takes (approvals `<call>/<child call>`,
 * cancel, steer) reaches the child through the parent's IO as in one process. The price: the
 * child's state is no object of its own (its result and usage are the parent's), and the parent's
 * journal holds the child's steps.
 */

/**
 * A step's journaled outcome: a failure is an outcome too (it is the run's to decide), never
 * retried by Restate. `at` is when it finished: the agent's clock moves with the journal. `cut`:
 * the step stopped waiting for its work when the chart's timer of that id came due (see `cut`);
 * the turn's loop fires the timer, then drops the step or runs it on.
 */
export type StepOutcome = ({ ok: true; value: unknown } | { ok: false; error: JournaledError } | { ok: false; cut: number }) & { at: number };

/**
 * A failed step's error as the journal keeps it. The run decides on more than its message: a
 * fallback reads `status` and `code` down the causes (`fallbackTrigger`), a usage limit a
 * ModelError's `status` and `retryAfterMs`; the error handed back is rebuilt with them, so the
 * live run and a replay decide as one process would. (Older entries have the first two only.)
 */
export interface JournaledError {
  name: string;
  message: string;
  status?: number | undefined;
  code?: string | undefined;
  retryable?: boolean | undefined;
  retryAfterMs?: number | undefined;
  /** A `ModelError`: rebuilt as one. */
  model?: true | undefined;
  cause?: JournaledError | undefined;
}

/** As deep as `fallbackTrigger` reads causes. */
const MAX_CAUSE_DEPTH = 6;

interface PendingStep {
  readonly key: string;
  /** The step's `ctx.run` now in flight (a step run on after a cut has a second one). */
  outcome: restate.RestatePromise<StepOutcome>;
  /** Starts a `ctx.run` for the step: over its work in this process if that still goes, else the work afresh. */
  readonly run: () => restate.RestatePromise<StepOutcome>;
  readonly deliver: (outcome: StepOutcome) => void;
  /** Ends the running `ctx.run`'s wait with a cut outcome naming the timer (nothing once it returned). */
  readonly cut: (timer: number) => void;
}

/** What the journal keeps of a step's error (see `JournaledError`). */
function journaled(error: unknown, depth = 0): JournaledError {
  let name = 'Error';
  let message: string;
  try {
    if (error instanceof Error) name = error.name;
    message = error instanceof Error ? String(error.message) : String(error);
  } catch {
    message = 'an error whose message could not be read';
  }
  const kept: JournaledError = { name, message };
  try {
    if (typeof error !== 'object' || error === null) return kept;
    const { status, code, retryable, retryAfterMs, cause } = error as Record<string, unknown>;
    if (typeof status === 'number') kept.status = status;
    if (typeof code === 'string') kept.code = code;
    if (typeof retryable === 'boolean') kept.retryable = retryable;
    if (typeof retryAfterMs === 'number') kept.retryAfterMs = retryAfterMs;
    if (ModelError.isInstance(error)) kept.model = true;
    if (cause !== undefined && depth < MAX_CAUSE_DEPTH) kept.cause = journaled(cause, depth + 1);
  } catch {
    // A field that throws when read is left out: the error is still the step's outcome.
  }
  return kept;
}

/** The error a failed step hands back to the agent, from what the journal kept. */
function rebuilt({ name, message, status, code, retryable, retryAfterMs, model, cause: journaledCause }: JournaledError): Error {
  const cause = journaledCause && rebuilt(journaledCause);
  const error: Error & { status?: number | undefined; code?: string | undefined } = model
    ? new ModelError(message, { status, retryable: retryable ?? false, retryAfterMs, cause })
    : new Error(message, cause && { cause });
  if (!model && status !== undefined) error.status = status;
  if (!model && code !== undefined) error.code = code;
  error.name = name;
  return error;
}

/** The steps one invocation has started and not yet handed back, in the order they started. */
export class StepJournal {
  readonly #ctx: restate.Context;
  readonly #clock: () => number;
  readonly #pending = new Map<number, PendingStep>();
  #next = 0;

  /** `clock`: the turn's journal clock, which a child run inline reads too. */
  constructor(ctx: restate.Context, clock: () => number) {
    this.#ctx = ctx;
    this.#clock = clock;
  }

  get size(): number {
    return this.#pending.size;
  }

  /** Wraps the agent's own executor: the work runs inside the step, where its effects happen once. */
  executor(inner: Executor): Executor {
    return (<K extends SideEffectKind>(effect: SideEffect<K>, perform: () => Promise<SideEffectOutputs[K]>) => {
      if (effect.kind === 'tool' && currentScope()?.runsAgent) return this.#inlineChild(() => inner(effect, perform));
      const id = this.#next++;
      // The work, once started in this process: a `ctx.run` after a cut waits for the same work.
      let work: Promise<unknown> | undefined;
      // Ends the wait of the `ctx.run` running now, if one is.
      let cutWait: ((timer: number) => void) | undefined;
      const run = () =>
        this.#ctx.run(effect.key, async (): Promise<StepOutcome> => {
          const cut = new Promise<number>((resolveCut) => (cutWait = resolveCut));
          try {
            work ??= inner(effect, perform);
            const first = await Promise.race([work.then((value) => ({ value })), cut.then((timer) => ({ timer }))]);
            if ('timer' in first) return { ok: false, cut: first.timer, at: Date.now() };
            return { ok: true, value: first.value ?? null, at: Date.now() };
          } catch (error) {
            return { ok: false, error: journaled(error), at: Date.now() };
          } finally {
            cutWait = undefined;
          }
        });
      return new Promise<SideEffectOutputs[K]>((resolve, reject) => {
        this.#pending.set(id, {
          key: effect.key,
          outcome: run(),
          run,
          cut: (timer) => cutWait?.(timer),
          deliver: (result) => {
            if (result.ok) return resolve(result.value as SideEffectOutputs[K]);
            if ('error' in result) reject(rebuilt(result.error));
          },
        });
      });
    }) as Executor;
  }

  /**
   * An agent tool's call, not a step (see above): its child's machine gets this journal and clock.
   * Its result reaches the parent in the microtasks after the child's last step is delivered
   * (the turn's loop settles before it looks again), and the child's own steps keep the loop going.
   */
  #inlineChild<T>(work: () => Promise<T>): Promise<T> {
    return extendScope({ journal: (machine) => machine.withClock(this.#clock).withExecutor((inner) => this.executor(inner)) }, work);
  }

  /** Every pending step's outcome, tagged with its id, for the turn's race. */
  racers(): restate.RestatePromise<{ step: number; outcome: StepOutcome }>[] {
    return [...this.#pending].map(([step, pending]) => pending.outcome.map((outcome, failure) => {
      // A run closure never throws (failures are outcomes); a terminal failure here is Restate's own.
      if (failure) throw failure;
      return { step, outcome: outcome! };
    }));
  }

  /**
   * Ends the wait of every step in flight at the chart's timer `timer` come due: each `ctx.run`
   * returns a cut outcome at once (see `TimerJournal`). Why: a step in flight keeps the invocation
   * from suspending, and past its inactivity timeout Restate no longer delivers the timer's own
   * completion to it; the time budget's deadline on a call that never answers would then wait for
   * the attempt to be aborted (10 minutes by default). A cut is journaled like any outcome, so a
   * replay takes the same branch.
   */
  cut(timer: number): void {
    for (const pending of this.#pending.values()) pending.cut(timer);
  }

  /** A cut step the chart no longer waits for (its timer's transition aborted it): forgotten, its work left to its abort. */
  drop(step: number): void {
    this.#pending.delete(step);
  }

  /** A cut step the chart may still wait for (its timer's transition did not end it): a new `ctx.run` over the same work, or the work afresh in an attempt that never started it. */
  resume(step: number): void {
    const pending = this.#pending.get(step);
    if (pending) pending.outcome = pending.run();
  }

  /** Hands a finished step's outcome to the agent. */
  deliver(step: number, outcome: StepOutcome): void {
    const pending = this.#pending.get(step);
    if (!pending) return;
    this.#pending.delete(step);
    pending.deliver(outcome);
  }
}

import * as restate from '@restatedev/restate-sdk';
import type { ActorOptions, AnyActorLogic } from 'xstate';

/** XState's clock interface (not exported by name): how an actor system sets and clears its delayed events. */
type Clock = NonNullable<ActorOptions<AnyActorLogic>['clock']>;

interface PendingTimer {
  /** The journal clock's time when the timer is due: the agent reads it when the timer fires. */
  readonly due: number;
  readonly sleep: restate.RestatePromise<void>;
  readonly fire: () => void;
  /** This process's own timer for the same due time (see `onDue`). */
  readonly local: ReturnType<typeof setTimeout>;
}

/**
 * The chart's delayed events as durable timers: the clock given to the session's actor system (its
 * own chart and every child agent run inline in it), so each `after` the chart arms (the time
 * budget's deadline on the side effect in flight, the end of a usage-limit wait, a cancel's grace)
 * is a `ctx.sleep` in the invocation's journal instead of a worker's `setTimeout`.
 *
 * Why: the agent's clock on Restate is the journal's (see `session-object.ts`), which moves only
 * when a step ends or the channel answers. A worker's timer firing while a model call is in flight
 * would find that clock where it was when the call started: the deadline's guard would see no
 * time passed, and a call that never answers would hold the run for ever. Here the timer's
 * completion is one of the turn loop's racers; when it wins, the loop moves the clock to the
 * timer's due time and fires the chart's event, so the guard sees the time passed and the chart
 * decides as on every other host (the call aborted, the run sealed or paused). The sleep and the
 * order it completed in are journaled: a replay takes the same branch at the same point.
 */
export class TimerJournal {
  readonly #ctx: restate.Context;
  readonly #clock: () => number;
  readonly #pending = new Map<number, PendingTimer>();
  readonly #onDue: (timer: number, due: number) => void;
  #next = 0;

  /**
   * `clock`: the turn's journal clock, from which a timer's due time is counted. `onDue`: called
   * by a plain timer of this process when a timer comes due, beside the journal's sleep: a step in
   * flight keeps the invocation from suspending, and past its inactivity timeout Restate no longer
   * delivers the sleep's completion to it (see `StepJournal.cut`).
   */
  constructor(ctx: restate.Context, clock: () => number, onDue: (timer: number, due: number) => void) {
    this.#ctx = ctx;
    this.#clock = clock;
    this.#onDue = onDue;
  }

  /** The clock for `createActor(machine, { clock })`. */
  readonly clock: Clock = {
    setTimeout: (fire: () => void, timeout: number): number => {
      const id = this.#next++;
      const ms = Math.max(0, timeout);
      const due = this.#clock() + ms;
      const local = setTimeout(() => this.#onDue(id, due), ms);
      local.unref();
      this.#pending.set(id, { due, sleep: this.#ctx.sleep(ms, 'agent timer'), fire, local });
      return id;
    },
    // A cleared timer's sleep stays in the journal, unawaited: it no longer races.
    clearTimeout: (id: number): void => void this.#forget(id),
  };

  #forget(id: number): PendingTimer | undefined {
    const pending = this.#pending.get(id);
    if (pending) clearTimeout(pending.local);
    this.#pending.delete(id);
    return pending;
  }

  /** Every armed timer's completion, tagged with its id, for the turn's race. */
  racers(): restate.RestatePromise<{ timer: number }>[] {
    return [...this.#pending].map(([timer, pending]) => pending.sleep.map((_, failure) => {
      // A sleep fails only by Restate's own doing (the invocation cancelled).
      if (failure) throw failure;
      return { timer };
    }));
  }

  /**
   * Takes a timer that completed: its due time, to move the clock to, and the chart's delayed
   * event to fire then; undefined if the chart cleared it meanwhile (it left the state).
   */
  take(timer: number): { due: number; fire: () => void } | undefined {
    const pending = this.#forget(timer);
    return pending && { due: pending.due, fire: pending.fire };
  }
}

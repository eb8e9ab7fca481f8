/**
 * The agent's clock and the chart's timers in one Restate invocation (see `runTurn` in
 * session-object.ts): the clock reads the journal's times, and a timer come due is fired once,
 * whether its journaled sleep or a step it cut reaches the invocation's loop first.
 */
import { transition, type Actor } from 'xstate';
import type { AgentMachine } from '../../machines/agent.machine.js';
import type { TimerJournal } from './timers.js';

/**
 * The agent's clock in one invocation: the invocation's start, then each step's end (or a
 * timer's due time), so a replay reads the same times (a run's start, budgets) and decides the
 * same. It moves only forward.
 */
export class JournalClock {
  constructor(public now: number) {}

  /** Moves the clock to `to` if that is later. */
  advance(to: number): void {
    this.now = Math.max(this.now, to);
  }
}

/**
 * Whether the chart would take a delayed event of its current state at `due` (the clock moved
 * there for the question only) and leave that state, which ends the work it waited for: the
 * time budget's deadline seals or pauses a model call. A transition that stays (a pausing
 * budget holds a tool batch: no call of it starts past the limit, those in flight finish) must
 * not cut: past the inactivity timeout the attempt suspends as soon as its cut step returns, and
 * the step waited for again would run its tool a second time in the attempt that follows. Asked
 * of XState's pure `transition`, which runs guards and executes nothing.
 */
export function leavesStateAt(actor: Actor<AgentMachine>, clock: JournalClock, due: number): boolean {
  const saved = clock.now;
  clock.advance(due);
  try {
    const snapshot = actor.getSnapshot();
    return snapshot._nodes.some((node) =>
      node.after.some((after) => {
        const event = { type: after.eventType } as never;
        return snapshot.can(event) && !transition(actor.logic, snapshot, event)[0]._nodes.includes(node);
      }),
    );
  } finally {
    clock.now = saved;
  }
}

/** Fires each of the chart's timers once and remembers whether the chart took it. */
export class TimerFiring {
  /** Whether each timer fired so far changed the chart (its transition was taken), by timer. */
  readonly #taken = new Map<number, boolean>();

  constructor(
    private readonly actor: Actor<AgentMachine>,
    private readonly timers: TimerJournal,
    private readonly clock: JournalClock,
  ) {}

  /**
   * Fires timer `id`, from its journaled sleep or a step it cut, whichever the loop sees first:
   * the clock moves to its due time, so the chart's guard sees the time passed (the time
   * budget's deadline, say). Returns whether the chart took it, undefined for a timer cleared
   * before it fired (the chart left the state that armed it, or armed it again).
   */
  fire(id: number): boolean | undefined {
    const timer = this.timers.take(id);
    if (timer) {
      this.clock.advance(timer.due);
      const before = this.actor.getSnapshot();
      timer.fire();
      // XState hands back the same snapshot for an event no transition took.
      this.#taken.set(id, this.actor.getSnapshot() !== before);
    }
    return this.#taken.get(id);
  }
}

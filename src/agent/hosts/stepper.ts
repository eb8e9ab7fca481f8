import { createActor, type Snapshot } from 'xstate';
import type { AgentMachine } from '../../../machines/agent.machine.js';
import type { AgentEvent } from '../protocol/agent-event.js';
import type { AgentInput } from '../protocol/actor-types.js';
import { LoopchartError } from '../../errors.js';
import type { Executor, SideEffect } from '../protocol/executor.js';
import type { IoEvent } from '../core/io.js';
import { runInFlight } from '../protocol/actor-types.js';
import { inputRefusal } from '../core/actor-input.js';
import { checkKnownKeys } from '../../known-keys.js';
import type { BrainState } from '../core/brain-state.js';
import type { BudgetPause } from '../budget/budget-pause.js';
import { waitsForSomeone } from './waiting.js';

/**
 * The caller-driven API (seed 003's `step` / `apply` / `finalize`) for hosts that drive the
 * loop themselves: a queue worker, a request handler. The session is the agent actor's
 * persisted snapshot (plain JSON: store it anywhere). `step` performs the next step's side
 * effects (a model call, a tool batch, an operation point, a compaction) and returns what
 * came back, without changing the session; `apply` feeds those effects (or external events,
 * such as `operation.resume`) to the same statechart and returns the new session. The chart
 * decides both ways, so a stepped run gives the same transcript as the actor.
 */

/**
 * A session as the stepper carries it: the agent actor's persisted snapshot.
 *
 * @example
 * ```ts
 * const saved: string = JSON.stringify(stepper.session as SteppedSession); // store it anywhere: it is plain JSON
 * ```
 */
export type SteppedSession = Snapshot<unknown>;

/**
 * Where a run stands: more steps to take, waiting for the caller (a yield, an approval, a budget
 * pause: apply `budget.raise`), or finished.
 *
 * @example
 * ```ts
 * const status: StepStatus = stepper.status();
 * if (status === 'yielded') console.log('waiting for an operation.resume');
 * ```
 */
export type StepStatus = 'continues' | 'yielded' | 'finished';

/**
 * What `step` returns: where the run stands and the effects to `apply`.
 *
 * @example
 * ```ts
 * const { status, effects }: StepResult = await stepper.step();
 * if (status === 'continues') stepper.apply(effects);
 * ```
 */
export interface StepResult {
  status: StepStatus;
  /**
   * What the step's side effects returned, in order, for `apply`. They are the IO's own events,
   * trusted by identity: apply them in this process (a copy from elsewhere is refused), and the
   * chart's delayed events that passed during the step (the time budget's deadline, the end of a
   * provider's usage-limit wait).
   */
  effects: readonly StepEffect[];
}

/**
 * One effect of a step: an event of the IO, or a delayed event of the chart that passed while the
 * step ran: the time budget's deadline, or the end of a usage-limit wait (the chart decides again
 * what it means when it is applied: seal, pause, call again).
 *
 * @example
 * ```ts
 * const { effects }: { effects: readonly StepEffect[] } = await stepper.step();
 * const deadlinePassed = effects.some((effect) => effect.type.startsWith('xstate.after.'));
 * ```
 */
export type StepEffect = IoEvent | DeadlineEvent;

/** A delayed event of the chart's `after` transitions (XState names it `xstate.after.<delay>.<state id>`). */
type DeadlineEvent = { type: `xstate.after.${string}` };

/**
 * A step's side effects took longer than the stepper allows.
 *
 * @example
 * ```ts
 * try {
 *   await stepper.step();
 * } catch (error) {
 *   if (StepTimeoutError.isInstance(error)) stepper.finalize();
 * }
 * ```
 */
export class StepTimeoutError extends LoopchartError {
  constructor(ms: number) {
    super('StepTimeout', `the step's side effects did not finish within ${ms} ms`);
  }
}

/**
 * How long one step may take by default: its model call, tools and hooks have their own limits inside it.
 *
 * @example
 * ```ts
 * const stepper = new AgentStepper(machine, { input: { prompt: 'Hi' } }, { timeoutMs: DEFAULT_STEP_TIMEOUT_MS / 10 });
 * ```
 */
export const DEFAULT_STEP_TIMEOUT_MS = 600_000;

/**
 * Drives an agent one step at a time. `step(session)` → the next effects and whether the run
 * continues, yielded or finished; `apply(effects)` → the new session; `finalize()` closes an
 * interrupted run as cancellation does (unanswered tool calls get their interrupted results).
 *
 * @example
 * ```ts
 * import { AgentStepper, createAgentMachine } from 'loopchart';
 * import { scriptedModel } from 'loopchart/testing';
 *
 * const stepper = new AgentStepper(createAgentMachine({ model: scriptedModel([{ text: 'Hello!' }]) }), { input: { prompt: 'Hi' } });
 * for (;;) {
 *   const { status, effects } = await stepper.step();
 *   if (status !== 'continues') break;
 *   const session = stepper.apply(effects); // store `session` here: it is plain JSON
 * }
 * console.log(stepper.status(), stepper.session);
 * ```
 */
export class AgentStepper {
  readonly #machine: AgentMachine;
  readonly #parked: AgentMachine;
  readonly #timeoutMs: number;
  #session: SteppedSession;

  constructor(machine: AgentMachine, from: { input: AgentInput } | { session: SteppedSession }, options: { timeoutMs?: number | undefined } = {}) {
    // Strict, as every options object: `{ inputs }` or `{ timeout }` is named, not ignored.
    checkKnownKeys(from, 'session' in from ? ['session'] : ['input'], 'AgentStepper');
    checkKnownKeys(options, ['timeoutMs'], 'AgentStepper options');
    this.#machine = machine;
    // The chart with an executor that never performs: applying effects runs no side effect.
    this.#parked = machine.withExecutor(() => park);
    this.#timeoutMs = options.timeoutMs ?? DEFAULT_STEP_TIMEOUT_MS;
    this.#session = 'session' in from ? from.session : this.#settle(createActor(this.#parked, { input: from.input }));
  }

  /** The current session: the persisted snapshot to store. */
  get session(): SteppedSession {
    return this.#session;
  }

  /** Where the current session stands. */
  status(session: SteppedSession = this.#session): StepStatus {
    return statusOf(session);
  }

  /**
   * Performs the next step's side effects and returns them; the session is unchanged until
   * `apply`. A session that yielded or finished has no step to take (no effects).
   */
  async step(session: SteppedSession = this.#session): Promise<StepResult> {
    // A stored session at rest with a run in flight continues as the actor does on `resume`.
    if ((session as { value?: unknown }).value === 'Idle' && statusOf(session) === 'continues') session = this.apply([{ type: 'resume' }], session);
    this.#session = session;
    const status = statusOf(session);
    if (status !== 'continues') return { status, effects: [] };
    const effects: StepEffect[] = [];
    // One step, one side effect: the first effect names the step; effects of any other step the
    // chart asks for meanwhile (a steer sends it back to the model at once) are parked, never
    // performed, and so is everything once the step's work is done.
    let closed = false;
    let step: string | undefined;
    let inFlight = 0;
    let performed = 0;
    const gated = this.#machine.withExecutor((inner): Executor => async (effect, perform) => {
      const id = stepOf(effect);
      step ??= id;
      if (closed || id !== step) return park(effect, perform);
      inFlight++;
      try {
        return await inner(effect, perform);
      } finally {
        inFlight--;
        performed++;
      }
    });
    // A delayed event of the chart being taken, with the snapshot it met (see below).
    let delayed: { type: DeadlineEvent['type']; before: Snapshot<unknown> } | undefined;
    const actor = createActor(gated, {
      snapshot: session,
      inspect: (event) => {
        // Only while a delayed event is taken: the actor is inspected before `createActor` returns it.
        if (event.type === '@xstate.snapshot' && delayed) {
          if (event.actorRef !== actor) return;
          // Only a delayed event the chart acted on is an effect. One whose timer fired before the
          // run's clock said its time had come (a timer counts on the monotonic clock, the run on
          // `clock`) only arms the timer again: handed to `apply`, later by that clock, it would
          // seal the run whose reply this step took.
          if (event.event.type === delayed.type && changedBy(delayed.before, event.snapshot)) effects.push({ type: delayed.type });
          delayed = undefined;
          return;
        }
        if (event.type !== '@xstate.event' || event.actorRef !== actor) return;
        const { type } = event.event;
        if (type.startsWith('io.') && type !== 'io.attached') effects.push(event.event as IoEvent);
        // The chart's delayed events (the time budget's deadline on the side effect in flight, see
        // deadline.ts; the end of a provider's usage-limit wait), which the restored chart arms
        // again for the time left as its IO attaches: one that passes during the step goes to the
        // actor (which aborts the effect and seals or pauses the run, or makes the call again) and
        // to the effects, so `apply` takes the same decision. Only the chart's own timer sends it.
        else if (!closed && event.sourceRef === actor && isDelayedEvent(type)) delayed = { type, before: actor.getSnapshot() };
      },
    });
    const before = JSON.stringify(actor.getSnapshot().value);
    let timer: ReturnType<typeof setTimeout> | undefined;
    try {
      await new Promise<void>((resolve, reject) => {
        timer = setTimeout(() => reject(new StepTimeoutError(this.#timeoutMs)), this.#timeoutMs);
        actor.subscribe({
          next: (snapshot) => {
            if (JSON.stringify(snapshot.value) !== before || snapshot.status !== 'active' || (performed > 0 && inFlight === 0)) {
              closed = true;
              resolve();
            }
          },
          error: reject,
        });
        actor.start();
      });
    } finally {
      clearTimeout(timer);
      closed = true;
      actor.stop();
    }
    return { status: 'continues', effects };
  }

  /**
   * Applies a step's effects (and any external events, such as an `operation.resume` or an
   * `approve`) to the session through the statechart; returns the new session. A refused event
   * changes nothing, as with the actor.
   */
  apply(effects: readonly (AgentEvent | StepEffect)[], session: SteppedSession = this.#session): SteppedSession {
    const actor = createActor(this.#parked, { snapshot: session });
    return (this.#session = this.#settle(actor, effects as readonly AgentEvent[]));
  }

  /** Closes an interrupted run the way cancellation does: unanswered calls get their interrupted results. */
  finalize(session: SteppedSession = this.#session): SteppedSession {
    if (statusOf(session) === 'finished') return (this.#session = session);
    // Nothing of a stepped run is in flight here: the cancel does not wait for it.
    return this.apply([{ type: 'cancel', graceMs: 0 }], session);
  }

  #settle(actor: ReturnType<typeof createActor<AgentMachine>>, events: readonly AgentEvent[] = []): SteppedSession {
    const failure = (actor.getSnapshot() as { error?: unknown }).error;
    if (actor.getSnapshot().status === 'error') throw failure;
    // Input the actor refused (it ended at once, Failed(InvalidInput)): thrown here, as `DurableSession.open` does.
    const refused = inputRefusal(actor.getSnapshot().context);
    if (refused) throw refused;
    actor.start();
    try {
      for (const event of events) actor.send(event);
      return actor.getPersistedSnapshot() as SteppedSession;
    } finally {
      actor.stop();
    }
  }
}

/**
 * The step an effect belongs to: a model call, a compaction, one tool batch (its calls and their
 * approval checks), one hook point (its operations).
 */
function stepOf(effect: SideEffect): string {
  switch (effect.kind) {
    case 'tool':
    case 'toolStart':
      return `tools ${(effect as SideEffect<'tool'>).input.batchKey}`;
    // A batch's approval check asks each call's policy verdict, then its approval rule: one step.
    case 'approval':
    case 'policy':
      return `approvals ${(effect as SideEffect<'approval'>).input.turn}`;
    case 'operation':
      return `point ${(effect as SideEffect<'operation'>).input.pointKey}`;
    default:
      return `${effect.kind} ${effect.key}`;
  }
}

/**
 * The chart's delays whose events a step takes as effects: those a restored chart arms again as
 * its IO attaches (a cancel's grace never spans a step: `finalize` cancels without one).
 */
const STEPPED_DELAYS = ['budgetDeadline', 'usageLimitWait'] as const;

/** Whether `type` is the event of one of those delays (`xstate.after.<delay>.<state id>`). */
const isDelayedEvent = (type: string): type is DeadlineEvent['type'] => STEPPED_DELAYS.some((delay) => type.startsWith(`xstate.after.${delay}.`));

/** Whether an event moved the chart: its state, its context (an assign) or its status; a transition that only arms a timer again does none. */
function changedBy(before: Snapshot<unknown>, after: Snapshot<unknown>): boolean {
  const read = (snapshot: Snapshot<unknown>) => snapshot as unknown as { value: unknown; context: unknown };
  return after.status !== before.status || read(after).context !== read(before).context || JSON.stringify(read(after).value) !== JSON.stringify(read(before).value);
}

/** An executor that never performs: the effect waits until the actor is stopped. */
const park: Executor = () => new Promise<never>(() => {});

function statusOf(session: SteppedSession): StepStatus {
  const { status, value, context } = session as unknown as { status: string; value: unknown; context: { brain: BrainState; budgetPause?: BudgetPause | undefined } };
  if (status !== 'active') return 'finished';
  if (value === 'Idle') return runInFlight(context.brain) ? 'continues' : 'finished';
  return waitsForSomeone({ value, context }) ? 'yielded' : 'continues';
}

import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { z } from 'zod';
import { checkKnownKeys, parseOptions } from '../known-keys.js';
import { type AgentMachine } from '../../machines/agent.machine.js';
import { runInFlight, type AgentOutput } from '../agent/protocol/actor-types.js';
import { isRewirableMachine } from '../agent/protocol/executor.js';
import { LoopchartError } from '../errors.js';
import { DurableSession, SessionScopeError } from '../sessions/durable-session.js';
import { SessionRowError } from '../sessions/session-row.js';
import { CorruptSessionError, SessionBusyError, type StoreError } from '../stores/errors.js';
import type { SessionStore } from '../stores/session-store.js';
import type { Claim, ScheduleBackend, ScheduleRow, TickEnd } from './row.js';
import { InvalidScheduleError, nextAfter, otherSurfaceProblem, scheduleBackend } from './schedules.js';
import { RunWatch } from './run-wait.js';
import { tickInputSent } from './tick-evidence.js';
import { MAX_TIMER_MS } from '../timer-bound.js';

/**
 * A schedule names an agent this scheduler was not given: it leaves the schedule to a scheduler
 * that has it (it is reported once, to `onError`).
 *
 * @example
 * ```ts
 * import { startScheduler, UnknownScheduleAgentError } from 'loopchart/schedules';
 *
 * const scheduler = await startScheduler({
 *   store,
 *   agents: { reporter: machine },
 *   onError: (error) => UnknownScheduleAgentError.isInstance(error) && console.warn(error.message),
 * });
 * ```
 */
export class UnknownScheduleAgentError extends LoopchartError {
  readonly scheduleId: string;
  readonly agent: string;
  constructor(scheduleId: string, agent: string, known: readonly string[]) {
    super('UnknownScheduleAgent', `schedule '${scheduleId}' runs the agent '${agent}', which this scheduler was not given (it has ${known.join(', ') || 'none'})`);
    this.scheduleId = scheduleId;
    this.agent = agent;
  }
}

/**
 * `startScheduler` was given options out of range (no agents, a lease shorter than a second).
 *
 * @example
 * ```ts
 * import { InvalidSchedulerOptionsError, startScheduler } from 'loopchart/schedules';
 * try {
 *   await startScheduler({ store, agents: {} });
 * } catch (error) {
 *   if (InvalidSchedulerOptionsError.isInstance(error)) console.error(error.message);
 * }
 * ```
 */
export class InvalidSchedulerOptionsError extends LoopchartError {
  constructor(problem: string) {
    super('InvalidSchedulerOptions', `invalid scheduler options: ${problem}`);
  }
}

const SchedulerSettingsSchema = z.strictObject({
  /**
   * How long a claimed tick is this scheduler's without a renewal, in ms (renewed every third of
   * it while the run goes). A scheduler killed mid-tick leaves it to another one after this. Default 30 s.
   */
  leaseMs: z.number().int().min(200).max(3_600_000).default(30_000),
  /** Longest the idle loop sleeps before it looks again (schedules other processes add), in ms. Default 60 s. */
  maxIdleMs: z.number().int().min(50).max(3_600_000).default(60_000),
  /** A tick found this much later than due is missed (its schedule's `missed` policy applies), in ms. Default 60 s. */
  missedAfterMs: z.number().int().min(0).max(366 * 86_400_000).default(60_000),
  /** Longest one tick's run may take, in ms; then it is cancelled. Default 30 minutes. */
  runTimeoutMs: z.number().int().positive().max(MAX_TIMER_MS).default(30 * 60_000),
  /** Ticks this scheduler runs at once. Default 4. */
  maxConcurrentRuns: z.number().int().min(1).max(1_000).default(4),
  /** This scheduler's name in the leases it takes (default host, pid and a random part). */
  owner: z.string().min(1).max(200).optional(),
  /** Told of what went wrong without stopping the scheduler (a store that failed, an unknown agent, a run that failed). */
  onError: z.custom<(error: Error) => void>((value) => typeof value === 'function', { error: 'onError must be a function' }).optional(),
  /** Told of each tick this scheduler is done with: run, skipped, missed, or let go at `stop`. */
  onTick: z.custom<(tick: ScheduleTick) => void>((value) => typeof value === 'function', { error: 'onTick must be a function' }).optional(),
});

/**
 * A tick a scheduler is done with, as `onTick` tells it.
 *
 * @example
 * ```ts
 * import { startScheduler, type ScheduleTick } from 'loopchart/schedules';
 *
 * const log = (tick: ScheduleTick) => console.log(`${tick.scheduleId} -> ${tick.session}: ${tick.outcome}, next ${tick.nextAt?.toISOString() ?? '-'}`);
 * const scheduler = await startScheduler({ store, agents: { reporter: machine }, onTick: log });
 * ```
 */
export interface ScheduleTick {
  scheduleId: string;
  session: string;
  agent: string;
  /** When the tick was due. */
  due: Date;
  /**
   * How its run ended (`Completed`, `Failed`, `Cancelled`...), `Waiting` (the run waits for
   * someone: an approval, a budget raise...; `error` says what for), `Skipped` (overlap) or `Missed`;
   * or `Released`: the scheduler stopped before the run ended and gave its lease back, and the
   * next scheduler to claim it continues the run.
   */
  outcome: string;
  error: string | null;
  /** When the schedule fires next (null when it will not, or for a released tick: unchanged). */
  nextAt: Date | null;
}

const StopOptionsSchema = z.strictObject({
  /**
   * How long the ticks in flight may take to end, in ms; past it each is let go: its session
   * closed where it is (stored), its lease given back, so another scheduler continues it at once.
   * Default: wait for them (each bounded by `runTimeoutMs`).
   */
  graceMs: z.number().int().min(0).max(MAX_TIMER_MS).optional(),
});

/**
 * What `Scheduler.stop` takes.
 *
 * @example
 * ```ts
 * import { startScheduler, type SchedulerStopOptions } from 'loopchart/schedules';
 *
 * const scheduler = await startScheduler({ store, agents: { reporter: machine } });
 * const deploy: SchedulerStopOptions = { graceMs: 10_000 }; // runs still going after 10 s are left to another scheduler
 * process.once('SIGTERM', () => void scheduler.stop(deploy));
 * ```
 */
export type SchedulerStopOptions = z.input<typeof StopOptionsSchema>;

/**
 * What `startScheduler` takes: the store whose schedules it fires, the agents by name, and its limits.
 *
 * @example
 * ```ts
 * import type { SchedulerOptions } from 'loopchart/schedules';
 *
 * const options: SchedulerOptions = { store, agents: { reporter: machine }, leaseMs: 30_000 };
 * ```
 */
export interface SchedulerOptions extends z.input<typeof SchedulerSettingsSchema> {
  store: SessionStore;
  agents: Readonly<Record<string, AgentMachine>> | ReadonlyMap<string, AgentMachine>;
}

/**
 * A running scheduler.
 *
 * @example
 * ```ts
 * import { startScheduler, type Scheduler } from 'loopchart/schedules';
 *
 * const scheduler: Scheduler = await startScheduler({ store, agents: { reporter: machine } });
 * process.once('SIGTERM', () => void scheduler.stop());
 * ```
 */
export interface Scheduler {
  readonly owner: string;
  /** Ticks running now. */
  running(): number;
  /** Looks for due schedules now (after `schedule` in this process, say) instead of at the next wake. */
  wake(): void;
  /**
   * Stops claiming; waits for the ticks in flight to end (their runs go on to their end or
   * timeout), or, past `graceMs`, lets them go: each session closed where it is, each lease given
   * back for another scheduler to continue the run. A second call may shorten the grace.
   */
  stop(options?: SchedulerStopOptions): Promise<void>;
}

/** What a tick's wait for its run gives when `stop`'s grace is over. */
const LET_GO = Symbol('let go');

/** What a tick's wait for its run gives when the run stops to wait for someone outside it: what for. */
interface RunWaits {
  waits: string;
}

/** What the loop sleeps at least between looks that found nothing: never a busy loop. */
const MIN_SLEEP_MS = 25;
/** After a store error, the loop waits this long before it tries again. */
const ERROR_BACKOFF_MS = 1_000;
/**
 * A due schedule whose session another schedule's tick holds is looked at again this often (a
 * tick of this scheduler that ends wakes the loop at once; one of another scheduler does not).
 */
const SESSION_WAIT_MS = 1_000;
/** A tick whose session another writer moved is given back, to be taken over this soon (its lease would hold it for `leaseMs`). */
const CONFLICT_RETRY_MS = 1_000;
const NO_CLAIM: Claim = { claimed: [], unreadable: [], waiting: 0 };

/**
 * Fires the schedules of `store` (see `schedule`) in this process: each due tick is claimed under a
 * lease in the store, so with several schedulers on one store each tick starts or continues its
 * session once; the session's run is driven to its end (bounded by `runTimeoutMs`) while the lease
 * is renewed. Ticks of schedules on one session take turns (one waits while another holds the
 * session). A scheduler killed mid-tick leaves the lease to expire; the next one to claim the
 * tick continues its run and sends the input only if it was not sent (the session's trace shows
 * whether the run the tick started is there). A tick whose session another writer moved on
 * (`SessionBusyError`, reported) is given back and taken over a second later the same way.
 * Between ticks the loop sleeps until the next due time (at most `maxIdleMs`). Errors go to
 * `onError`, a stored schedule this version does not read once per scheduler (a `StoreError`
 * naming it; the others fire); the loop goes on.
 *
 * @example
 * ```ts
 * import { createAgentMachine, openSessionStore } from 'loopchart';
 * import { schedule, startScheduler } from 'loopchart/schedules';
 * import { scriptedModel } from 'loopchart/testing';
 *
 * const store = await openSessionStore('.loopchart/loopchart.db');
 * const reporter = createAgentMachine({ model: scriptedModel([{ text: 'All quiet.' }]) });
 * await schedule(store, { session: 'reports', agent: 'reporter', input: 'Report.', every: 3_600_000 });
 * const scheduler = await startScheduler({ store, agents: { reporter } });
 * // ... later
 * await scheduler.stop();
 * ```
 */
export async function startScheduler(options: SchedulerOptions): Promise<Scheduler> {
  if (typeof options !== 'object' || options === null) throw new InvalidSchedulerOptionsError('options must be an object');
  const refuse = (message: string) => new InvalidSchedulerOptionsError(message);
  // Strict over every key it takes (a misspelt one names the closest), then the settings' own checks.
  checkKnownKeys(options, [...Object.keys(SchedulerSettingsSchema.shape), 'store', 'agents'], '', refuse);
  const { store, agents, ...rest } = options;
  const settings = parseOptions(SchedulerSettingsSchema, rest, '', refuse);
  const machines = agentsByName(agents);
  if (typeof store !== 'object' || store === null || typeof store.apply !== 'function') throw new InvalidSchedulerOptionsError('store must be a SessionStore');
  const backend = scheduleBackend(store);
  const loop = new SchedulerLoop(store, backend, machines, { ...settings, owner: settings.owner ?? `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}` });
  await loop.reportUnknownAgents();
  loop.start();
  return loop;
}

/**
 * The agents option as a Map by name, checked: before, a list was read as agents named '0', '1'…,
 * a string as its characters, and a Map key that is no string (or an empty name) matched no
 * schedule; a machine that was no agent passed ('transition' in it) and every tick then failed.
 */
function agentsByName(agents: unknown): Map<string, AgentMachine> {
  const isMap = agents instanceof Map;
  if (!isMap && (typeof agents !== 'object' || agents === null || Array.isArray(agents))) {
    throw new InvalidSchedulerOptionsError('agents must be an object of agent machines by name, or a Map');
  }
  const machines = new Map<unknown, unknown>(isMap ? (agents as Map<unknown, unknown>) : Object.entries(agents as object));
  if (machines.size === 0) throw new InvalidSchedulerOptionsError('agents must name at least one agent');
  for (const [name, machine] of machines) {
    if (typeof name !== 'string' || name === '') throw new InvalidSchedulerOptionsError(`agents: a name must be a non-empty string, got ${typeof name === 'string' ? 'an empty one' : typeof name}`);
    if (!isRewirableMachine(machine)) throw new InvalidSchedulerOptionsError(`agents.${name} is not an agent machine (createAgentMachine)`);
  }
  return machines as Map<string, AgentMachine>;
}

type Settings = z.output<typeof SchedulerSettingsSchema> & { owner: string };

class SchedulerLoop implements Scheduler {
  readonly owner: string;
  readonly #store: SessionStore;
  readonly #backend: ScheduleBackend;
  readonly #agents: Map<string, AgentMachine>;
  readonly #names: string[];
  readonly #settings: Settings;
  readonly #ticks = new Set<Promise<void>>();
  #stopped = false;
  #done: Promise<void> = Promise.resolve();
  #wakeUp: (() => void) | undefined;
  #closing: Promise<void> | undefined;
  /** The unreadable rows already reported, by message: a bad row is met on every pass, and told once. */
  readonly #toldUnreadable = new Set<string>();
  /** Resolves when `stop`'s grace is over: the ticks still running are let go. */
  readonly #letGo: Promise<typeof LET_GO>;
  #graceOver!: () => void;

  constructor(store: SessionStore, backend: ScheduleBackend, agents: Map<string, AgentMachine>, settings: Settings) {
    this.owner = settings.owner;
    this.#store = store;
    this.#backend = backend;
    this.#agents = agents;
    this.#names = [...agents.keys()];
    this.#settings = settings;
    this.#letGo = new Promise((resolve) => (this.#graceOver = () => resolve(LET_GO)));
  }

  running(): number {
    return this.#ticks.size;
  }

  wake(): void {
    this.#wakeUp?.();
  }

  start(): void {
    this.#done = this.#run();
  }

  async stop(options: SchedulerStopOptions = {}): Promise<void> {
    const { graceMs } = parseOptions(StopOptionsSchema, options, 'stop', (message) => new InvalidSchedulerOptionsError(message));
    this.#stopped = true;
    this.wake();
    const grace = graceMs === undefined ? undefined : setTimeout(this.#graceOver, graceMs);
    try {
      await this.#done;
      await Promise.allSettled([...this.#ticks]);
    } finally {
      clearTimeout(grace);
    }
    this.#closing ??= this.#backend.close();
    await this.#closing;
  }

  #report(error: unknown): void {
    try {
      this.#settings.onError?.(error instanceof Error ? error : new Error(String(error)));
    } catch {
      // A reporter that throws must not stop the scheduler.
    }
  }

  async reportUnknownAgents(): Promise<void> {
    for (const { id, agent } of await this.#backend.foreignAgents(this.#names)) this.#report(new UnknownScheduleAgentError(id, agent, this.#names));
  }

  async #run(): Promise<void> {
    while (!this.#stopped) {
      let sleepMs: number;
      try {
        const free = this.#settings.maxConcurrentRuns - this.#ticks.size;
        // One instant for the claim and the wake: a row due between two clocks is one or the other's.
        const now = Date.now();
        const { claimed, unreadable, waiting } = free > 0 ? await this.#backend.claim(this.owner, now, this.#settings.leaseMs, this.#names, free) : NO_CLAIM;
        this.#reportUnreadable(unreadable);
        for (const row of claimed) this.#fire(row);
        if (claimed.length > 0 && claimed.length === free) continue;
        const wake = await this.#backend.nextWake(this.#names, now);
        sleepMs = Math.min(this.#settings.maxIdleMs, wake === null ? Infinity : wake - Date.now(), waiting > 0 ? SESSION_WAIT_MS : Infinity);
      } catch (error) {
        this.#report(error);
        sleepMs = ERROR_BACKOFF_MS;
      }
      await this.#sleep(Math.max(MIN_SLEEP_MS, sleepMs));
    }
  }

  #reportUnreadable(unreadable: readonly StoreError[]): void {
    for (const error of unreadable) {
      if (this.#toldUnreadable.has(error.message)) continue;
      this.#toldUnreadable.add(error.message);
      this.#report(error);
    }
  }

  /** Sleeps `ms`, or until `wake()`, `stop()` or a tick that ends frees a slot. */
  #sleep(ms: number): Promise<void> {
    if (this.#stopped) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.#wakeUp = done;
    });
  }

  #fire(row: ScheduleRow): void {
    const tick = this.#tick(row).catch((error: unknown) => this.#report(error));
    this.#ticks.add(tick);
    void tick.finally(() => {
      this.#ticks.delete(tick);
      this.wake();
    });
  }

  /** One claimed tick: fired (or skipped by policy), its run driven to its end, the schedule moved on. */
  async #tick(row: ScheduleRow): Promise<void> {
    const { leaseMs, missedAfterMs } = this.#settings;
    let lost = false;
    const renewal = setInterval(() => {
      this.#backend.renew(row.id, this.owner, Date.now() + leaseMs).then(
        (held) => (lost ||= !held),
        (error: unknown) => this.#report(error),
      );
    }, Math.max(50, Math.floor(leaseMs / 3)));
    try {
      const started = Date.now();
      const takenOver = row.tickDue !== null;
      const due = row.tickDue ?? row.nextAt!;
      const late = !takenOver && started - due > missedAfterMs;
      if (late && row.missed === 'skip') {
        await this.#end(row, due, { nextAt: nextAfter(row.timing, row.timezone, started), lastFiredAt: row.lastFiredAt, lastOutcome: 'Missed', lastError: null, ran: 0 });
        return;
      }
      // A row stored before schedule() refused another surface's session (or written by hand):
      // a tick would run this agent inside a subagent's or a served tool's conversation.
      const foreign = otherSurfaceProblem(row.sessionId);
      if (foreign) {
        const refused = new InvalidScheduleError(`session: ${foreign}`);
        this.#report(refused);
        await this.#endWithoutRun(row, due, 'Failed', refused.message);
        return;
      }
      const watch = new RunWatch(row.sessionId);
      let session: DurableSession;
      try {
        // Under the schedule's scope: a new session is made with it, a stored one of another scope refused.
        session = await DurableSession.open({ machine: this.#agents.get(row.agent)!, store: this.#store, sessionId: row.sessionId, scope: row.scope, attach: watch.attach });
      } catch (error) {
        if (!SessionRowError.isInstance(error) && !CorruptSessionError.isInstance(error) && !SessionScopeError.isInstance(error)) throw error;
        // Its stored session is one this version does not read, or another scope's (its
        // conversation is not this schedule's to continue): no retry changes that. Left to its
        // lease, the tick would be claimed again every leaseMs for ever, nothing recorded.
        this.#report(error);
        await this.#endWithoutRun(row, due, 'Failed', `the session could not be opened: ${error.message}`);
        return;
      }
      try {
        let ran = 0;
        // A tick taken over (its scheduler died, or gave it back): its input was sent if the run it started is in the session.
        const sent = takenOver && row.tickBaseRun !== null && (await tickInputSent(this.#store, row.sessionId, row.tickBaseRun, row.input));
        if (!sent) {
          if (runInFlight(session.actor.getSnapshot().context.brain)) {
            // The session's last run still goes (resumed here): this tick overlaps it. A run that
            // waits for someone ends only when they answer: a queued tick is skipped too, its
            // input not put behind a question no one here answers.
            const before = row.overlap === 'skip' ? { waits: watch.waits() ?? 'the last run was still going' } : await this.#settle(session, watch);
            if (before !== null && 'waits' in before) {
              await this.#endWithoutRun(row, due, 'Skipped', before.waits);
              return;
            }
          }
          if (!(await this.#backend.startTick(row.id, this.owner, due, session.actor.getSnapshot().context.runIndex))) return;
          session.send({ type: 'input', message: row.input });
          ran = 1;
        }
        // Told whether the run was cancelled here past runTimeoutMs, not by someone else.
        const timeout = { fired: false };
        const settled = await this.#settle(session, watch, timeout);
        if (lost) return;
        const ended = Date.now();
        const waits = settled !== null && 'waits' in settled ? settled.waits : null;
        const outcome = waits === null ? (settled as AgentOutput | null)?.outcome : undefined;
        const base = late ? started : row.overlap === 'skip' ? Math.max(due, ended) : due;
        let nextAt = nextAfter(row.timing, row.timezone, base);
        // A queued tick (due while the run went) fires once, now, not once per tick it missed.
        if (row.overlap === 'queue' && nextAt !== null && nextAt < ended) nextAt = ended;
        const cancelled = outcome?.type === 'Cancelled' && timeout.fired ? `the scheduler cancelled the run past runTimeoutMs (${this.#settings.runTimeoutMs} ms)` : null;
        const lastError = waits ?? (outcome?.type === 'Failed' ? `${outcome.error.type}: ${outcome.error.message}` : outcome?.type === 'Sealed' ? outcome.reason : cancelled);
        await this.#end(row, due, { nextAt, lastFiredAt: started, lastOutcome: waits !== null ? 'Waiting' : (outcome?.type ?? 'None'), lastError, ran: sent ? 1 : ran });
      } finally {
        watch.stop();
        await session.close();
      }
    } catch (error) {
      clearInterval(renewal);
      if (SessionBusyError.isInstance(error)) {
        // Another writer moved the session on (nothing of this tick's last step was stored): given
        // back, not left to its lease, the tick is taken over in a second, its input sent only if
        // the run it started is stored.
        this.#report(error);
        const now = Date.now();
        await this.#backend.release(row.id, this.owner, now, now + CONFLICT_RETRY_MS);
        return;
      }
      if (error !== LET_GO) throw error;
      // The session is closed (its run stored where it was): the next claim takes the tick over at once.
      const now = Date.now();
      if (await this.#backend.release(row.id, this.owner, now, now)) {
        this.#told({ scheduleId: row.id, session: row.sessionId, agent: row.agent, due: new Date(row.tickDue ?? row.nextAt!), outcome: 'Released', error: null, nextAt: row.nextAt === null ? null : new Date(row.nextAt) });
      }
    } finally {
      clearInterval(renewal);
    }
  }

  /**
   * The run in flight to its end, cancelled past `runTimeoutMs`, or to the moment it waits for
   * someone outside it, itself or the subagents its calls wait on (an approval, a call in doubt,
   * a budget raise, an operation's resume):
   * no one here answers, so the tick ends there and the run stays stored, waiting, for whoever
   * answers through the session. Throws `LET_GO` when `stop`'s grace is over first.
   */
  async #settle(session: DurableSession, watch: RunWatch, timeout: { fired: boolean } = { fired: false }): Promise<AgentOutput | null | RunWaits> {
    const timer = setTimeout(() => {
      timeout.fired = true;
      session.send({ type: 'cancel' });
    }, this.#settings.runTimeoutMs);
    const waiting = watch.until();
    try {
      const ended = await Promise.race([session.whenIdle(), waiting.waiting.then((waits) => ({ waits })), this.#letGo]);
      if (ended === LET_GO) throw LET_GO;
      // Stored where it waits before the lease is given back: the next holder reads it so.
      if (ended !== null && 'waits' in ended) await session.flush();
      return ended;
    } finally {
      clearTimeout(timer);
      waiting.stop();
    }
  }

  /**
   * Ends a tick that runs nothing (refused, or skipped): the schedule moves to its next time after
   * the tick's due time, or after now when that is later, and its last fire stays as it was.
   */
  #endWithoutRun(row: ScheduleRow, due: number, lastOutcome: 'Failed' | 'Skipped', lastError: string): Promise<void> {
    return this.#end(row, due, { nextAt: nextAfter(row.timing, row.timezone, Math.max(due, Date.now())), lastFiredAt: row.lastFiredAt, lastOutcome, lastError, ran: 0 });
  }

  async #end(row: ScheduleRow, due: number, end: TickEnd): Promise<void> {
    if (!(await this.#backend.endTick(row.id, this.owner, end, Date.now()))) {
      this.#report(new Error(`schedule '${row.id}': the lease was lost before the tick ended (another scheduler took it over)`));
      return;
    }
    const nextAt = end.nextAt === null ? null : new Date(end.nextAt);
    this.#told({ scheduleId: row.id, session: row.sessionId, agent: row.agent, due: new Date(due), outcome: end.lastOutcome, error: end.lastError, nextAt });
  }

  #told(tick: ScheduleTick): void {
    try {
      this.#settings.onTick?.(tick);
    } catch (error) {
      // A listener that throws must not stop the scheduler; it is an error like any other.
      this.#report(error);
    }
  }
}

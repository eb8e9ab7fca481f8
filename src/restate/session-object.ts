import * as restate from '@restatedev/restate-sdk';
import { createActor, transition } from 'xstate';
import { z } from 'zod';
import { type AgentMachine } from '../../machines/agent.machine.js';
import { runInFlight, type AgentEmitted } from '../agent/protocol/actor-types.js';
import { type AgentContext } from '../agent/core/context.js';
import { logOf } from '../brain/message-log.js';
import { externalEventProblem, type ExternalEvent } from '../agent/protocol/events.js';
import { LoopchartError } from '../errors.js';
import { parseOptions } from '../known-keys.js';
import { isRewirableMachine } from '../agent/protocol/executor.js';
import type { Message, Outcome } from '../schemas.js';
import type { Usage } from '../model.js';
import { channelObject, type ChannelTake, type StreamedEvent } from './channel.js';
import { loadLog, loadSession, persistSession, writtenOf, type KvWritten } from './kv-state.js';
import { SessionScopeError } from '../sessions/durable-session.js';
import { runWaitsFor } from '../schedules/run-wait.js';
import { checkPayload, checkSessionKey, type HandlerName } from './payloads.js';
import { StepJournal, type StepOutcome } from './steps.js';
import { TimerJournal } from './timers.js';
import { JournalClock, leavesStateAt, TimerFiring } from './turn-clock.js';
import { liveDeltas, type LiveDeltas } from './live-deltas.js';
import { ingressUrlProblem, ObjectNameSchema } from './ingress-url.js';
import { boundedRetry, failedRun, isRestateOwn, UNEXPECTED_ERROR_TYPE } from './unexpected.js';

export interface RestateSessionOptions {
  /** The agent every session of this object runs (built with `createAgentMachine`). */
  machine: AgentMachine;
  /**
   * The virtual object's name (default `loopchartSession`); its channel is `<name>Channel`. A name
   * Restate registers (a letter, or `_` and a letter or digit, then letters, digits, `.`, `_` or
   * `-`; none starting `restate`, nor `openapi`): another is an `InvalidConfigError`.
   */
  name?: string | undefined;
  /**
   * Restate's ingress URL as this worker reaches it (say `http://127.0.0.1:8080`). When given,
   * text deltas are published to the session's event stream while the model streams them; without
   * it a client sees each turn's text when the turn ends (`turn.finished`).
   */
  ingressUrl?: string | undefined;
  /**
   * How long a turn waiting for an approval stays on its worker before Restate suspends it
   * (default 60 s, Restate's own default): a suspended turn costs no worker. Also how long a
   * step may run before a `cancel` (or any control event) posted during it waits for the step's
   * end: past this timeout Restate no longer delivers the channel's wake-up to the attempt (see
   * docs/integrations/restate.md, Timers).
   */
  inactivityTimeoutMs?: number | undefined;
}

/**
 * The options, checked when the objects are made: before, none was (a machine that is none failed
 * each turn, a bad ingressUrl lost every live delta silently, a misspelt key was ignored).
 */
const RestateSessionOptionsSchema = z.strictObject({
  machine: z.custom<AgentMachine>(isRewirableMachine, { error: 'must be an agent machine (createAgentMachine)' }),
  name: ObjectNameSchema.optional(),
  ingressUrl: z.custom<string>((value) => value === undefined || ingressUrlProblem(value) === null, { error: (issue) => ingressUrlProblem(issue.input) ?? 'must be an ingress URL' }).optional(),
  inactivityTimeoutMs: z.number().int().positive().optional(),
} satisfies Record<keyof RestateSessionOptions, z.ZodType>);

/** What `send` returns once the turn is over, and `state` reports at any time. */
export interface SessionSummaryReply {
  sessionId: string;
  /** The brain's state: `Start` before the first run, `Terminal` after a finished one, another while a run goes. */
  state: string;
  /** Whether a run is in flight: its turn is running or waits for an approval. */
  running: boolean;
  turnsTaken: number;
  messageCount: number;
  /** The last run's outcome, or null before the first run ended. */
  outcome: Outcome | null;
  usage: Usage | null;
  /** The session's memory scope (see `send`), or null. */
  scope: string | null;
  /**
   * What the run in flight waits for from someone outside it (an approval, a decision on a call
   * in doubt, a budget raise, an operation's resume), as a scheduler reads it; null when it does
   * not wait (no run, or one that goes on by itself). A schedule's tick skips such a run.
   */
  waits: string | null;
}

/** The events published to clients: text deltas and retries are live-only (see `ingressUrl`). */
const LIVE_ONLY = new Set(['text.delta', 'text.retracted', 'model.retry']);

/**
 * What a stored run waits for, or null: the agent's snapshot of it (an actor made, never started)
 * taken through its `resume` by the pure `transition`, which runs nothing (its actions are
 * returned, not executed), to the state the run stands in, read as the scheduler reads a live one
 * (`runWaitsFor`). A state the agent does not restore waits for no one here.
 */
function waitsOf(machine: AgentMachine, context: AgentContext): string | null {
  try {
    const [resumed] = transition(machine, createActor(machine, { input: { stored: context } }).getSnapshot(), { type: 'resume' });
    return resumed.status === 'active' ? runWaitsFor(resumed) : null;
  } catch {
    return null;
  }
}

function summary(sessionId: string, context: AgentContext | undefined, running: boolean, waits: string | null = null): SessionSummaryReply {
  return {
    sessionId,
    state: context?.brain.value ?? 'Start',
    running,
    turnsTaken: context?.brain.context.turnsTaken ?? 0,
    messageCount: context ? logOf(context.brain.context).length : 0,
    outcome: context?.lastRun?.outcome ?? null,
    usage: context?.lastRun?.usage ?? null,
    scope: context?.scope ?? null,
    waits,
  };
}

/** An event as clients get it: JSON, without the conversation (a run's output carries the history); its delivery id kept. */
function publishable(event: AgentEmitted): StreamedEvent['event'] {
  if (event.type === 'run.finished') {
    const { output: { messages: _messages, ...output }, ...rest } = event;
    return JSON.parse(JSON.stringify({ ...rest, output })) as StreamedEvent['event'];
  }
  return JSON.parse(JSON.stringify(event)) as StreamedEvent['event'];
}

/** A stored row this build cannot read, a broken actor: terminal, so Restate does not retry it forever. */
function terminal(error: unknown): never {
  if (error instanceof restate.TerminalError) throw error;
  if (LoopchartError.isInstance(error)) throw new restate.TerminalError(`${error.code}: ${error.message}`, { errorCode: 500 });
  throw error;
}

/**
 * Runs a handler's work; an unexpected error in it is retried a bounded number of times (see
 * unexpected.ts), then `spent` runs (the send handler fails the run in flight there) and the
 * client gets a TerminalError (500) whose message starts with `<handler>: TurnFailed:`.
 */
async function bounded<T>(
  ctx: restate.ObjectSharedContext,
  handler: string,
  work: () => Promise<T>,
  spent?: (reason: string) => Promise<void>,
): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (isRestateOwn(error)) throw error;
    const reason = await boundedRetry(ctx, error);
    await spent?.(reason);
    throw new restate.TerminalError(`${handler}: ${UNEXPECTED_ERROR_TYPE}: ${reason}`, { errorCode: 500 });
  }
}

/** The stored run in flight, if any, ended Failed: the next send starts a new run. */
async function failStoredRun(ctx: restate.ObjectContext, sessionId: string, reason: string): Promise<void> {
  const stored = await loadSession(ctx, sessionId).catch(terminal);
  if (!stored) return;
  const failed = failedRun(stored, reason);
  if (failed !== stored) persistSession(ctx, failed, writtenOf(stored, true));
}

/** Lets the agent react to what was just handed to it: its IO works in microtasks only. */
const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

/** The shared handlers that post an event to the running turn, and the agent event each posts. */
const CONTROL_EVENTS = {
  approve: 'approve',
  deny: 'deny',
  steer: 'steer',
  cancel: 'cancel',
  seal: 'seal',
  raise: 'budget.raise',
  resumeOperation: 'operation.resume',
  decideDoubt: 'doubt.decide',
} as const satisfies Partial<Record<HandlerName, ExternalEvent['type']>>;

/**
 * Agent sessions as Restate virtual objects, one per session id (the object key). Returns the
 * session object and its channel; bind both to an endpoint.
 *
 * Handlers of the session object:
 * - `send({ message })` (exclusive): runs one run to its end, or until it waits for an approval,
 *   which it awaits durably (the invocation suspends: no worker is held). Two clients sending to
 *   one session are queued by Restate, one run after the other.
 * - `approve`, `deny`, `steer`, `cancel`, `seal` (shared): delivered to the running turn through
 *   the channel; the brain takes them at its next coherent point, as in-process. With no run in
 *   flight they have nothing to act on and are dropped when the next run starts. A body holds the
 *   agent event's own fields (payloads.ts): `target` on a steer, seal, raise or resume goes to that child run.
 * - `raise({ budget })` (shared): `budget.raise`, the limits it names holding for the rest of the
 *   run: a run paused by its budget goes on, and a side effect in flight gets the new deadline.
 * - `resumeOperation({ operation, payload })` (shared): resumes a run that an operation yielded
 *   (`operation.yielded` on the event stream), as `operation.resume` does in-process; the
 *   operation's own schema checks the payload (a refused one shows as `event.rejected`).
 * - `decideDoubt({ toolCallId, action, result?, digest?, run? })` (shared): decides a call found in
 *   doubt after a worker died during it (`tool.inDoubt` on the event stream, for tools whose
 *   `inDoubt` policy asks): run it again, give its result, or fail it.
 * - `state()` (shared): the brain's state and the last outcome; `transcript()` (shared): the
 *   committed conversation; `events({ cursor, limit })` (shared): the event stream from a cursor.
 *
 * @example
 * ```ts
 * import * as restate from '@restatedev/restate-sdk';
 * import { createAgentMachine } from 'loopchart';
 * import { restateSession } from 'loopchart/restate';
 * import { scriptedModel } from 'loopchart/testing';
 *
 * const machine = createAgentMachine({ model: scriptedModel([{ text: 'Hello!' }]) });
 * const { session, channel } = restateSession({ machine });
 * await restate.endpoint().bind(session).bind(channel).listen(9080);
 * // then: curl 127.0.0.1:8080/loopchartSession/support-42/send --json '{"message":"Hi"}'
 * ```
 */
export function restateSession(given: RestateSessionOptions) {
  const options = parseOptions(RestateSessionOptionsSchema, given, 'restateSession');
  const name = options.name ?? 'loopchartSession';
  const channel = channelObject(`${name}Channel`);
  const channelApi = { name: channel.name } as typeof channel;
  const controlHandler = (handler: keyof typeof CONTROL_EVENTS) =>
    restate.handlers.object.shared(async (ctx: restate.ObjectSharedContext, payload: unknown): Promise<{ posted: number }> => {
      checkSessionKey(ctx.key);
      const body = checkPayload(handler, payload);
      const event = { ...body, type: CONTROL_EVENTS[handler] } as ExternalEvent;
      return bounded(ctx, handler, async () => ({ posted: (await ctx.objectClient(channelApi, ctx.key).post(event)).index }));
    });

  const session = restate.object({
    name,
    description: 'A loopchart agent session (see loopchart/restate).',
    handlers: {
      send: restate.handlers.object.exclusive(
        { ...(options.inactivityTimeoutMs !== undefined && { inactivityTimeout: options.inactivityTimeoutMs }) },
        async (ctx: restate.ObjectContext, payload: unknown): Promise<SessionSummaryReply> => {
          const sessionId = checkSessionKey(ctx.key);
          const { message, scope } = checkPayload('send', payload);
          return bounded(
            ctx,
            'send',
            async () => {
              const stored = await loadSession(ctx, sessionId).catch(terminal);
              // As DurableSession.open: a session's scope is given when it is made; another one is
              // refused (the conversation is not that scope's), and the message names no scope.
              if (stored && scope !== undefined && stored.scope !== scope) {
                throw new restate.TerminalError(`send: ${new SessionScopeError(sessionId).message}`, { errorCode: 403 });
              }
              return runTurn(ctx, options, channelApi, { sessionId, scope }, stored, { type: 'input', message });
            },
            (reason) => failStoredRun(ctx, sessionId, reason),
          );
        },
      ),
      approve: controlHandler('approve'),
      deny: controlHandler('deny'),
      steer: controlHandler('steer'),
      cancel: controlHandler('cancel'),
      seal: controlHandler('seal'),
      raise: controlHandler('raise'),
      resumeOperation: controlHandler('resumeOperation'),
      decideDoubt: controlHandler('decideDoubt'),
      state: restate.handlers.object.shared(async (ctx: restate.ObjectSharedContext): Promise<SessionSummaryReply> => {
        const sessionId = checkSessionKey(ctx.key);
        return bounded(ctx, 'state', async () => {
          const context = await loadSession(ctx, sessionId).catch(terminal);
          const running = context !== undefined && runInFlight(context.brain);
          return summary(sessionId, context, running, running ? waitsOf(options.machine, context) : null);
        });
      }),
      transcript: restate.handlers.object.shared(async (ctx: restate.ObjectSharedContext): Promise<Message[]> => {
        checkSessionKey(ctx.key);
        return bounded(ctx, 'transcript', () => loadLog(ctx));
      }),
      events: restate.handlers.object.shared(
        async (ctx: restate.ObjectSharedContext, payload: unknown): Promise<{ events: StreamedEvent[]; next: number }> => {
          checkSessionKey(ctx.key);
          const request = checkPayload('events', payload);
          return bounded(ctx, 'events', () => ctx.objectClient(channelApi, ctx.key).read({ cursor: request.cursor ?? 0, limit: request.limit ?? 100 }));
        },
      ),
    },
  });
  return { session, channel };
}

/**
 * One run, as one invocation: the agent starts from the stored state; each side effect is a
 * journaled step; after every step the K/V gets what changed and clients get the events. The
 * loop races the steps in flight and the chart's timers against the channel's wake-up, so a cancel
 * or an approval is taken while a step runs (or while nothing runs but a human is awaited), and a
 * time budget ends a step that never does.
 */
async function runTurn(
  ctx: restate.ObjectContext,
  options: RestateSessionOptions,
  channelApi: ReturnType<typeof channelObject>,
  { sessionId, scope }: { sessionId: string; scope: string | undefined },
  stored: AgentContext | undefined,
  start: ExternalEvent,
): Promise<SessionSummaryReply> {
  const clock = new JournalClock(await ctx.date.now());
  const steps = new StepJournal(ctx, () => clock.now);
  // The chart's delayed events are durable timers raced in the loop below (see timers.ts).
  // A timer come due whose transition leaves the state cuts the steps in flight (see StepJournal.cut); the loop below fires it.
  const timers = new TimerJournal(ctx, () => clock.now, (timer, due) => {
    if (steps.size > 0 && leavesStateAt(actor, clock, due)) steps.cut(timer);
  });
  const machine = options.machine.withClock(() => clock.now).withExecutor((inner) => steps.executor(inner));
  const actor = createActor(machine, { input: stored ? { stored } : { sessionId, ...(scope !== undefined && { scope }) }, clock: timers.clock });
  // The loop reads a chart error from the snapshot; unobserved, XState would rethrow it
  // asynchronously and take the whole worker down with it.
  actor.subscribe({ error: () => {} });
  const channel = ctx.objectClient(channelApi, sessionId);
  const publish = ctx.objectSendClient(channelApi, sessionId);
  const live: LiveDeltas | undefined = options.ingressUrl ? liveDeltas(options.ingressUrl, channelApi.name, sessionId) : undefined;
  let outbox: StreamedEvent['event'][] = [];
  actor.on('*', (event) => {
    if (LIVE_ONLY.has(event.type)) live?.push(publishable(event));
    else outbox.push(publishable(event));
  });
  let written: KvWritten = writtenOf(actor.getSnapshot().context, stored !== undefined);
  const flush = () => {
    written = persistSession(ctx, actor.getSnapshot().context, written);
    if (outbox.length > 0) {
      publish.publish(outbox);
      outbox = [];
    }
  };
  let cursor: number | null = null;
  /** Arms a fresh wake-up with the channel and takes the control events posted since the cursor. */
  const arm = async () => {
    const wake = ctx.awakeable<number>();
    const taken: ChannelTake = await channel.take({ cursor, arm: wake.id });
    cursor = taken.next;
    clock.advance(taken.at);
    for (const event of taken.events) {
      // Posted through our own handlers, checked there; checked again, it came back from storage.
      if (externalEventProblem(event) === null) actor.send(event);
    }
    // Wrapped: an async function would adopt (await) a returned promise.
    return { promise: wake.promise };
  };

  const firing = new TimerFiring(actor, timers, clock);
  try {
    actor.start();
    let wake = await arm();
    actor.send({ type: 'resume' });
    actor.send(start);
    for (;;) {
      await settle();
      live?.flush();
      const snapshot = actor.getSnapshot();
      // Not terminal: retried a bounded number of times, then the run in flight is failed (see `bounded`).
      if (snapshot.status === 'error') throw new Error(`session '${sessionId}': the agent stopped: ${String(snapshot.error)}`);
      flush();
      if (snapshot.matches('Idle') && steps.size === 0) break;
      const next: { step: number; outcome: StepOutcome } | { timer: number } | { wake: true } = await restate.RestatePromise.race([
        ...steps.racers(),
        ...timers.racers(),
        wake.promise.map(() => ({ wake: true as const })),
      ]);
      if ('wake' in next) wake = await arm();
      else if ('timer' in next) firing.fire(next.timer);
      else if ('cut' in next.outcome) {
        // A step cut when a timer came due: the timer first, then the step is forgotten if the
        // chart's transition ended it (its work was aborted with it); else it is waited for again
        // (the chart changed since the cut: a raise, say, cleared that timer for a later one).
        if (firing.fire(next.outcome.cut) === true) steps.drop(next.step);
        else steps.resume(next.step);
      } else {
        clock.advance(next.outcome.at);
        steps.deliver(next.step, next.outcome);
      }
    }
    return summary(sessionId, actor.getSnapshot().context, false);
  } finally {
    live?.close();
    actor.stop();
  }
}

import { createActor, type AnyActorRef, type InspectionEvent, type Observer, type Subscription } from 'xstate';
import { type AgentActor, type AgentMachine } from '../../machines/agent.machine.js';
import { outputOf, runInFlight, type AgentOutput } from '../agent/protocol/actor-types.js';
import { type AgentContext } from '../agent/core/context.js';
import { inputRefusal } from '../agent/core/actor-input.js';
import { type AgentEvent } from '../agent/protocol/agent-event.js';
import { EFFECT_SPECIFICATION_VERSION, isRewirableMachine, type Executor, type SideEffect, type SideEffectOutputs } from '../agent/protocol/executor.js';
import { innerKey, keyOf, markerBatch, parseKey, serviceKey, turnOf } from '../agent/protocol/keys.js';
import { pendingCalls } from '../agent/core/brain-state.js';
import { InvalidConfigError, InvalidFeedError, LoopchartError } from '../errors.js';
import { checkKnownKeys, optionKeys } from '../known-keys.js';
import { feedProblem } from '../brain/feed-problems.js';
import type { Message, ToolMessage } from '../schemas.js';
import { isSessionStore, type SessionStore } from '../stores/session-store.js';
import { InvalidSessionIdError, SessionBusyError } from '../stores/errors.js';
import { checkedExternal, externalEventProblem } from '../agent/protocol/events.js';
import { extendScope, stopActor, type ChildSession, type OpenChildOptions } from '../agent/protocol/call-scope.js';
import { EMPTY_LOG, logEffect } from './log-delta.js';
import { logOf, type MessageLog } from '../brain/message-log.js';
import { decodeRow, encodeRow } from './session-row.js';
import { ApprovalRefusedError, type Verdict } from './stored-decision.js';
import { decisionEvent, type ApprovalRequest } from '../agent/approvals/approval-binding.js';
import type { Refusal } from '../agent/approvals/approvals.js';
import { policyDecidedBy, ToolPolicyVerdictSchema } from '../agent/approvals/tool-policy.js';
import { PromptDelta, errorRecord, statePath, type TraceEntry } from './trace.js';
import { sameJson } from '../json-value.js';
import { planWrites, type PlannedWrite, type QueuedWrite } from './write-plan.js';

export interface OpenSessionOptions {
  machine: AgentMachine;
  store: SessionStore;
  sessionId: string;
  /** Conversation to start a new session from (ignored when the session exists). */
  history?: Message[] | undefined;
  /**
   * Only make a new session (default false): a stored one is refused with `SessionBusyError`
   * (as the store refuses a second create), nothing written. Decided by the open's own read and
   * by its creating write, which fails if another writer made the session meanwhile: never by a
   * look at the store before the open, which another writer can overtake.
   */
  create?: boolean | undefined;
  /**
   * Whose session this is (a user, a resource, a team): its memory scope, stored with the session
   * when it is created, told to every operation and tool of its runs and inherited by its child
   * runs (see `agentMemory`, `loopchart/memory`). Opening a stored session with another scope is
   * refused (`SessionScopeError`); leaving it out keeps the stored one.
   */
  scope?: string | undefined;
  inspect?: Observer<InspectionEvent> | ((event: InspectionEvent) => void) | undefined;
  /**
   * Continue a run that was in flight when the session was stored (default true). With false the
   * session opens at rest whatever it holds, for maintenance (a rewind refuses a run in flight
   * instead of driving it); send `{ type: 'resume' }` to continue the run later.
   */
  resume?: boolean | undefined;
  /**
   * Wraps the session's durable executor, for what must see every effect as the run sees it,
   * replayed ones included (a tracer): `(durable) => traced(durable)`. The machine's own executor
   * runs inside the durability layer.
   */
  wrapExecutor?: ((durable: Executor) => Executor) | undefined;
  /**
   * Called with the actor before it starts, so listeners (`actor.on(...)`) hear what a resumed
   * run emits at once, such as the `approval.requested` of calls that were already waiting.
   */
  attach?: ((actor: AgentActor) => void) | undefined;
  /** The actor this session's actor belongs to (a parent run, for a child an agent tool opened): it joins that actor's system and inspector. */
  parent?: AnyActorRef | undefined;
}

/**
 * A step that needs the session at rest (say a rewind) was asked for while a run is in flight,
 * or `whenIdle()` was asked of a session that holds a stored run it has not resumed (opened with
 * `resume: false`): that run would never end by itself. Nothing was sent or stored.
 *
 * @example
 * ```ts
 * const session = await DurableSession.open({ machine, store, sessionId: 'ticket-42', resume: false });
 * try {
 *   await session.rewindTo(4);
 * } catch (error) {
 *   if (SessionNotIdleError.isInstance(error)) session.send({ type: 'resume' }); // let the run finish first
 * }
 * ```
 */
export class SessionNotIdleError extends LoopchartError {
  readonly sessionId: string;
  constructor(sessionId: string, what: string, remedy = 'let it finish (resume it) or cancel it first') {
    super('SessionNotIdle', `session '${sessionId}': cannot ${what} while a run is in flight; ${remedy}`);
    this.sessionId = sessionId;
  }
}

/**
 * A `DurableSession` was asked to act after its `close()`: to send an event, decide a call,
 * rewind, or wait for its run to end (a `whenIdle()` still waiting when the session closes is
 * rejected with it too). Nothing was sent or stored: what the session holds is what it held at
 * close. Open the session again to go on; reads (`session.actor.getSnapshot()`) still work.
 *
 * @example
 * ```ts
 * await session.close();
 * try {
 *   session.send({ type: 'cancel' });
 * } catch (error) {
 *   // session 'support-42' is closed: cannot send an event; nothing was sent or stored (open the session again to go on)
 *   if (SessionClosedError.isInstance(error)) console.error(error.message);
 * }
 * ```
 */
export class SessionClosedError extends LoopchartError {
  readonly sessionId: string;
  constructor(sessionId: string, what: string) {
    super('SessionClosed', `session '${sessionId}' is closed: cannot ${what}; nothing was sent or stored (open the session again to go on)`);
    this.sessionId = sessionId;
  }
}

/**
 * A stored session was opened with a memory scope other than the one it was created with: its
 * conversation is not that scope's to read or to continue. The message does not say whose it is.
 *
 * @example
 * ```ts
 * try {
 *   await DurableSession.open({ machine, store, sessionId: 'trip', scope: 'user:bob' });
 * } catch (error) {
 *   if (SessionScopeError.isInstance(error)) console.error(error.message); // session 'trip' belongs to another scope
 * }
 * ```
 */
export class SessionScopeError extends LoopchartError {
  readonly sessionId: string;
  constructor(sessionId: string) {
    super('SessionScope', `session '${sessionId.slice(0, 200)}' belongs to another scope`);
    this.sessionId = sessionId;
  }
}

const OPEN_OPTION_KEYS = optionKeys<OpenSessionOptions>()({
  scope: true,
  create: true,
  machine: true,
  store: true,
  sessionId: true,
  history: true,
  inspect: true,
  resume: true,
  wrapExecutor: true,
  attach: true,
  parent: true,
});

/**
 * The options' values, checked before anything is read: a store, machine or hook of the wrong
 * type threw a raw TypeError from inside open ('options.store.load is not a function', 'outer is
 * not a function'), and a switch given as anything but a boolean ('yes', 1) was read as its default.
 */
function checkOpenOptions(options: OpenSessionOptions): void {
  const bad = (message: string) => new InvalidConfigError(`DurableSession.open: ${message}`);
  const { store, machine, inspect, wrapExecutor, attach, parent, sessionId }: Record<string, unknown> = { ...options };
  // A missing id is a missing option, not a bad id: the store's own check would say only
  // 'a session id must be a string'. Any other id is left to that check (the one rule of every store).
  if (sessionId === undefined) {
    throw new InvalidSessionIdError(sessionId, "DurableSession.open: sessionId is required: a string naming the conversation (say sessionId: 'ticket-42'); the same id opens it again");
  }
  for (const name of ['create', 'resume'] as const) {
    const value: unknown = options[name];
    if (value !== undefined && typeof value !== 'boolean') throw bad(`${name} must be true or false, not ${JSON.stringify(value)?.slice(0, 40) ?? typeof value}`);
  }
  if (!isSessionStore(store)) throw bad('store must be a session store (openSessionStore)');
  if (!isRewirableMachine(machine)) throw bad('machine must be an agent (createAgentMachine)');
  if (inspect !== undefined && typeof inspect !== 'function' && (typeof inspect !== 'object' || inspect === null)) throw bad('inspect must be a function or an observer');
  for (const [name, value] of [['wrapExecutor', wrapExecutor], ['attach', attach]] as const) {
    if (value !== undefined && typeof value !== 'function') throw bad(`${name} must be a function, not ${typeof value}`);
  }
  if (parent !== undefined && (typeof parent !== 'object' || parent === null)) throw bad('parent must be an actor');
}

/**
 * An agent session persisted step by step (seed 003: the application owns the state; the
 * store is its session loader and effect handler). Every change of the driver's context is one
 * transaction with an optimistic version check. Its guarantees go through the agent's executor
 * seam: before any side effect runs, every step decided so far is stored; each tool result is
 * stored the moment it exists (journaled, or with the step that logs it when it ends its batch);
 * on resume, stored results are replayed instead of run again. A process killed anywhere reopens
 * the session and continues from the brain's last decision.
 *
 * @example
 * ```ts
 * import { DurableSession, createAgentMachine, openSessionStore } from 'loopchart';
 * import { scriptedModel } from 'loopchart/testing';
 *
 * const store = await openSessionStore('.loopchart/loopchart.db');
 * const machine = createAgentMachine({ model: scriptedModel([{ text: 'Hello again.' }]) });
 * const session = await DurableSession.open({ machine, store, sessionId: 'support-42' });
 * session.send({ type: 'input', message: 'Hello?' });
 * console.log((await session.whenIdle())?.outcome);
 * await session.close();
 * ```
 */
export class DurableSession {
  readonly actor: AgentActor;
  readonly sessionId: string;
  readonly #store: SessionStore;
  #version: number;
  /** What the last step queued holds: its log, its row (undefined before the first), the batch and point it waits on. */
  #written: { log: MessageLog; row: unknown; awaitingToolsKey: string | null; pointKey: string | null };
  #queue: Promise<void> = Promise.resolve();
  /** Writes decided and not yet handed to the chain (`#drain`). */
  #queued: QueuedWrite[] = [];
  #traceWanted = false;
  /** Steps queued whose write has not started: a write of the trace alone leaves its entries to them. */
  #stepsAhead = 0;
  /** The drain that runs once the moment's work is done, unless a flush drains first (and cancels it). */
  #drainTimer: NodeJS.Immediate | undefined;
  #failure: Error | undefined;
  /** The last context `#persist` looked at. */
  #seen: AgentContext | undefined;
  #failed: Promise<never>;
  #fail!: (error: Error) => void;
  /** The first `close()`: from its call on, the session refuses to act (`SessionClosedError`). */
  #closing: Promise<void> | undefined;
  /** Rejects once `close()` has stopped the actor: a `whenIdle()` still waiting then ends with it. */
  #closed: Promise<never>;
  #endWaiters!: (error: Error) => void;
  /**
   * Tool results journaled before the session was opened, by batch key and call id, and the
   * effects of the operations of the point in progress, by point key and operation name:
   * replayed, not run again.
   */
  readonly #replay: Map<string, Map<string, ToolMessage>>;
  /** The user's `wrapExecutor` (see `#replayRestored`). */
  readonly #wrapExecutor: ((durable: Executor) => Executor) | undefined;
  /**
   * Trace entries recorded and not yet handed to a write, in order. The next write to run takes
   * them all: a step's own write (so a step and its entries are one transaction), or, for what
   * happens between steps, a write of the trace alone (`#writeTrace`).
   */
  #trace: TraceEntry[] = [];
  readonly #prompts = new PromptDelta();
  /** Child sessions its agent tools opened on this store (closed with this one). */
  readonly #children = new Set<DurableSession>();
  #ioState = '';

  private constructor(
    options: OpenSessionOptions,
    context: AgentContext | undefined,
    version: number,
    replay: Map<string, Map<string, ToolMessage>>,
  ) {
    this.sessionId = options.sessionId;
    this.#store = options.store;
    this.#version = version;
    this.#failed = new Promise<never>((_, reject) => (this.#fail = reject));
    this.#failed.catch(() => {});
    this.#closed = new Promise<never>((_, reject) => (this.#endWaiters = reject));
    this.#closed.catch(() => {});
    this.#replay = replay;
    this.#wrapExecutor = options.wrapExecutor;
    const outer = options.wrapExecutor;
    const machine = options.machine.withExecutor((inner) => (outer ? outer(this.#durable(inner)) : this.#durable(inner)));
    this.actor = createActor(machine, {
      input: context ? { stored: context } : { sessionId: options.sessionId, scope: options.scope, history: options.history ?? [] },
      ...(options.inspect && { inspect: options.inspect }),
      ...(options.parent && { parent: options.parent }),
    });
    // A stored state this agent refuses (say an operation's slice its schema rejects): nothing starts, nothing is written.
    const initial = this.actor.getSnapshot();
    if (initial.status === 'error') throw (initial as { error?: unknown }).error;
    // A starting history the actor refused (it ended at once, Failed(InvalidInput)): no session is made.
    const refused = inputRefusal(initial.context);
    if (refused) throw refused;
    // What is stored is what the actor starts from (its own checked copy of the stored state).
    const start = initial.context;
    this.#written = context
      ? { log: logOf(start.brain.context), row: encodeRow(start), awaitingToolsKey: toolsKey(start), pointKey: start.operations.point?.key ?? null }
      : { log: EMPTY_LOG, row: undefined, awaitingToolsKey: null, pointKey: null };
    this.actor.subscribe({
      next: (snapshot) => {
        this.#ioState = statePath(snapshot.value);
        this.#persist(snapshot.context);
      },
      error: (error) => this.#stop(error as Error),
    });
    this.#listen();
  }

  /** The emitted events the trace records (retries, prunes, approvals asked for, finished runs). */
  #listen(): void {
    const run = () => this.actor.getSnapshot().context.runIndex;
    // Recorded as the run starts, ahead of its steps (replay needs it first), with the input that
    // started it: a run that fails at once still has it in the trace.
    this.actor.on('run.started', (e) =>
      this.#record({ type: 'run', at: Date.now(), run: e.run, prompt: e.message.content, policy: this.actor.getSnapshot().context.policy }),
    );
    // A retry waits inside a model call, with no step to come until it ends: written at once,
    // after the step that stores the new attempt is queued (it takes the entry, one transaction).
    this.actor.on('model.retry', (e) => {
      this.#record({ type: 'retry', at: Date.now(), run: run(), turn: e.turn, retry: e.retry, delayMs: e.delayMs, error: errorRecord(e.error).message });
      queueMicrotask(() => this.#writeTrace());
    });
    this.actor.on('repetition.noted', (e) => this.#record({ type: 'repetition', at: Date.now(), run: run(), turn: e.turn, times: e.times, calls: e.calls }));
    this.actor.on('model.fallback', (e) =>
      this.#record({ type: 'fallback', at: Date.now(), run: run(), turn: e.turn, from: e.from, to: e.to, trigger: e.trigger, error: errorRecord(e.error).message }),
    );
    this.actor.on('agent.handoff', (e) => this.#record({ type: 'handoff', at: Date.now(), run: e.run, turn: e.turn, from: e.from, to: e.name }));
    this.actor.on('prune.finished', (e) => this.#record({ type: 'prune', at: Date.now(), run: run(), pruned: e.pruned, before: e.before, after: e.after }));
    this.actor.on('approval.requested', (e) =>
      this.#record({
        type: 'approval.requested',
        at: Date.now(),
        run: run(),
        calls: e.calls.map((call) => call.id),
        requests: e.requests.map(({ toolCallId, digest }) => ({ toolCallId, digest })),
      }),
    );
    // What the chart did with a decision, never what was sent: a refused one is recorded as refused.
    this.actor.on('approval.decided', ({ type: _, ...decided }) => this.#record({ type: 'approval', at: Date.now(), ...decided }));
    this.actor.on('approval.refused', ({ type: _, ...refused }) => this.#record({ type: 'approval.refused', at: Date.now(), ...refused }));
    this.actor.on('tool.inDoubt', (e) =>
      this.#record({ type: 'doubt.requested', at: Date.now(), run: run(), calls: e.calls.map((call) => call.id), requests: e.requests.map(({ toolCallId, digest }) => ({ toolCallId, digest })) }),
    );
    this.actor.on('doubt.decided', ({ type: _, ...decided }) => this.#record({ type: 'doubt', at: Date.now(), ...decided }));
    this.actor.on('doubt.refused', ({ type: _, ...refused }) => this.#record({ type: 'doubt.refused', at: Date.now(), ...refused }));
    this.actor.on('run.finished', (e) =>
      this.#record({
        type: 'finished',
        at: Date.now(),
        run: run(),
        outcome: e.output.outcome,
        usage: e.output.usage,
        ...(e.output.costUsd !== undefined && { costUsd: e.output.costUsd }),
      }),
    );
  }

  /** Loads the session, or creates it, and starts its actor; a run in flight continues at once (unless `resume: false`). */
  static async open(options: OpenSessionOptions): Promise<DurableSession> {
    checkKnownKeys(options, OPEN_OPTION_KEYS, 'DurableSession.open');
    checkOpenOptions(options);
    const stored = await options.store.load(options.sessionId);
    let context: AgentContext | undefined;
    const replay = new Map<string, Map<string, ToolMessage>>();
    if (stored && options.create === true) throw new SessionBusyError(options.sessionId, 0, stored.version);
    if (stored) {
      context = decodeRow(options.sessionId, stored.state, stored.messages);
      // A session made without a scope stays without one: a scope is given when a session is made.
      if (options.scope !== undefined && context.scope !== options.scope) throw new SessionScopeError(options.sessionId);
      const key = toolsKey(context);
      if (key) {
        const journaled = await options.store.journaledToolResults(options.sessionId, key);
        replay.set(key, new Map(journaled.map((result) => [result.toolCallId, result])));
        // The batch's finished calls are answered from the first step on (the actor keeps those of
        // its batch, see restoredContext), not once the IO has replayed them: a cancel or a seal
        // arriving first would answer them interrupted (and store that in the conversation).
        context = { ...context, toolJournal: journaled };
        // The batch's start markers, by marker key: a call that has one and no result is in doubt.
        const markers = await options.store.journaledToolResults(options.sessionId, markerBatch(key));
        replay.set(markerBatch(key), new Map(markers.map((marker) => [marker.toolCallId, marker])));
      }
      const point = context.operations.point?.key;
      if (point) {
        const journaled = await options.store.journaledToolResults(options.sessionId, point);
        replay.set(point, new Map(journaled.map((entry) => [entry.toolCallId, entry])));
      }
    }
    const session = new DurableSession(options, context, stored?.version ?? 0, replay);
    if (stored && context && options.resume !== false && runInFlight(context.brain)) {
      const { value, context: brain } = context.brain;
      session.#record({ type: 'resumed', at: Date.now(), v: stored.version, run: context.runIndex, state: value, turns: brain.turnsTaken, tokens: brain.contextTokens });
    }
    options.attach?.(session.actor);
    session.actor.start();
    if (!stored) session.#persist(session.actor.getSnapshot().context);
    if (options.resume !== false) session.actor.send({ type: 'resume' });
    if (context && options.resume !== false) session.#replayRestored(context);
    await session.flush();
    return session;
  }

  /**
   * The results a reopened batch starts with (its journal's, given to the actor as answers: see
   * `open`) pass through `wrapExecutor` as the replays they are, as the IO's would if it ran them
   * again: the durable layer answers each from the journal, nothing runs, and a tracer outside
   * durability sees every effect the run has, replayed ones included. What it returns is the
   * actor's already; a wrapper that throws changes nothing.
   */
  #replayRestored(context: AgentContext): void {
    const outer = this.#wrapExecutor;
    const key = toolsKey(context);
    const journaled = key === null ? undefined : this.#replay.get(key);
    if (!outer || key === null || !journaled || journaled.size === 0) return;
    const replayed = outer(this.#durable(async () => {
      throw new LoopchartError('ReplayUnavailable', 'a restored result is answered by the journal, never run again');
    }));
    const turn = context.brain.context.turnsTaken;
    const signal = new AbortController().signal;
    for (const { call } of pendingCalls(context.brain)) {
      const result = journaled.get(call.id);
      if (!result) continue;
      const effect: SideEffect<'tool'> = {
        specificationVersion: EFFECT_SPECIFICATION_VERSION,
        key: innerKey(key, { kind: 'tool', call: call.id, rerun: 0 }),
        kind: 'tool',
        input: { turn, call, batchKey: key },
        signal,
      };
      void Promise.resolve()
        .then(() => replayed(effect, async () => result))
        .catch(() => {});
    }
  }

  /**
   * Sends an event to the session's actor (an input, a cancel, a steer, a raise...); the step it
   * causes is stored like any other. Throws the write error once a step could not be stored, and
   * `SessionClosedError` once `close()` was called: an event sent then would change nothing stored
   * and be lost, so it is refused instead.
   *
   * @example
   * ```ts
   * session.send({ type: 'input', message: 'Where is my parcel?' });
   * session.send({ type: 'steer', message: 'Answer in French.' }); // delivered at the next coherent point
   * ```
   */
  send(sent: AgentEvent): void {
    this.#refuseClosed('send an event');
    if (this.#failure) throw this.#failure;
    // Read once, as data, and checked against its type: a getter that throws or a payload that does
    // not fit is refused by the chart (as a stand-in event), not thrown at the caller.
    const event = checkedExternal(sent) as AgentEvent;
    this.#recordSent(event);
    this.actor.send(event);
    // The step the event caused (if any) takes the entry; an event that changed nothing gets a write of its own.
    this.#writeTrace();
  }

  /** Events from the host that move the brain, for the timeline and replay (decisions are recorded as the chart takes or refuses them). */
  #recordSent(event: AgentEvent): void {
    // A refused event arrives as its stand-in (`event.malformed`, `event.unreadable`): never one of these types.
    const now = Date.now();
    const run = this.actor.getSnapshot().context.runIndex;
    if (['cancel', 'seal', 'steer', 'policy', 'rewind', 'budget.raise'].includes(event.type)) {
      this.#record({ type: 'event', at: now, run, event: structuredClone(event) as Record<string, unknown> });
    }
  }

  /**
   * Decides a call this session asked about, by the request it showed (`approval.requested`):
   * bound to that call id, digest and run. Resolves once the decision is stored; throws
   * `ApprovalRefusedError` (and records the refusal) when it does not apply, and
   * `SessionClosedError` (nothing stored: the call still waits, and the next open asks again)
   * once `close()` was called.
   *
   * @example
   * ```ts
   * session.actor.on('approval.requested', ({ requests }) => {
   *   for (const request of requests) void session.decide(request, { approved: false, by: 'ana', reason: 'fraud' });
   * });
   * ```
   */
  async decide(request: Pick<ApprovalRequest, 'toolCallId' | 'digest' | 'run'>, verdict: Verdict & { always?: boolean | undefined }): Promise<void> {
    this.#refuseClosed('decide a call');
    let refused: Refusal | undefined;
    const listening = this.actor.on('approval.refused', (e) => e.toolCallId === request.toolCallId && (refused = { reason: e.refusal, detail: e.detail }));
    try {
      const event = decisionEvent(request, verdict);
      const problem = externalEventProblem(event);
      if (problem) throw new InvalidFeedError('decide', problem);
      this.send(event);
    } finally {
      listening.unsubscribe();
    }
    await this.flush();
    if (refused) throw new ApprovalRefusedError(request.toolCallId, refused);
  }

  /**
   * Resolves with the output of the run once the session is idle again and stored (at once with
   * the last run's output when no run is in flight; null before the first run). Every wait ends:
   * it rejects with the write error if a step could not be stored; with `SessionClosedError` when
   * the session is closed before its run ends, or already was (the run stays stored where it was,
   * for the next open); and at once with `SessionNotIdleError` when the session holds a stored run
   * it has not resumed (opened with `resume: false`), which would never end by itself.
   *
   * @example
   * ```ts
   * const session = await DurableSession.open({ machine, store, sessionId: 'support-42', resume: false });
   * session.send({ type: 'resume' }); // a stored run in flight goes on; at rest, nothing happens
   * console.log((await session.whenIdle())?.outcome);
   * ```
   */
  async whenIdle(): Promise<AgentOutput | null> {
    this.#refuseClosed('wait for its run to end');
    if (this.#failure) throw this.#failure;
    const { value, context } = this.actor.getSnapshot();
    // Opened with resume: false over a run in flight: Idle, yet no step of that run comes until it is resumed.
    if (value === 'Idle' && runInFlight(context.brain)) {
      throw new SessionNotIdleError(this.sessionId, 'wait for idle', "it was stored in flight and not resumed (opened with resume: false): send { type: 'resume' } first");
    }
    await this.#untilIdle();
    await this.flush();
    return outputOf(this.actor.getSnapshot().context);
  }

  /** Settles once the actor is Idle; rejects when the session fails or is closed first. */
  async #untilIdle(): Promise<void> {
    let subscription: Subscription | undefined;
    const idle = new Promise<void>((resolve) => {
      if (this.actor.getSnapshot().value === 'Idle') return resolve();
      subscription = this.actor.subscribe((snapshot) => snapshot.value === 'Idle' && resolve());
    });
    try {
      await Promise.race([this.#failed, this.#closed, idle]);
    } finally {
      subscription?.unsubscribe();
    }
  }

  /**
   * Resolves when every step decided so far is stored; rejects with the write error if one failed.
   * After `close()` there is nothing left to store: it resolves.
   */
  async flush(): Promise<void> {
    this.#persist(this.actor.getSnapshot().context);
    this.#writeTrace();
    this.#drain();
    await Promise.race([this.#failed, this.#queue]);
  }

  /**
   * Drops committed history past `length`, snapped down to a coherent cut (a tool call never
   * loses its result), in one stored step that truncates the log. Legal only while the session
   * is Idle with no run in flight (SessionNotIdleError otherwise; nothing is written) and not
   * closed (SessionClosedError). Resolves with how many messages were dropped once the step is
   * stored. The session's usage and its last run's outcome stay as they were; the next run
   * measures the shorter conversation afresh.
   *
   * @example
   * ```ts
   * const dropped = await session.rewindTo(4); // keeps the first 4 messages (fewer, to keep a call with its result)
   * ```
   */
  async rewindTo(length: number): Promise<number> {
    this.#refuseClosed('rewind');
    if (this.#failure) throw this.#failure;
    await this.flush();
    // A close() called while the flush ran: the actor is about to stop, the rewind would be lost.
    this.#refuseClosed('rewind');
    const { value, context } = this.actor.getSnapshot();
    if (value !== 'Idle' || runInFlight(context.brain)) throw new SessionNotIdleError(this.sessionId, 'rewind');
    // The brain's own check: a bad length is an InvalidFeedError, and nothing is sent.
    const problem = feedProblem(context.brain.context, { type: 'rewindTo', len: length });
    if (problem) throw new InvalidFeedError('rewindTo', problem.problem);
    this.actor.send({ type: 'rewind', len: length });
    await this.flush();
    return context.brain.context.history.length - this.actor.getSnapshot().context.brain.context.history.length;
  }

  /**
   * Stops the actor after the pending writes; the store stays open (it may serve other sessions).
   * A run in flight is recorded as closed, so a reopen is not taken for a crash; it stays stored
   * where it was, and the next open continues it. From the call on, the session refuses to act:
   * `send`, `decide`, `rewindTo` and `whenIdle` throw `SessionClosedError`, and a `whenIdle()`
   * still waiting rejects with it once the actor is stopped. Calling it again returns the same
   * promise.
   *
   * @example
   * ```ts
   * try {
   *   session.send({ type: 'input', message: 'Hello?' });
   *   await session.whenIdle();
   * } finally {
   *   await session.close();
   * }
   * ```
   */
  close(): Promise<void> {
    return (this.#closing ??= this.#close());
  }

  async #close(): Promise<void> {
    try {
      await this.flush();
      const { brain, runIndex } = this.actor.getSnapshot().context;
      if (runInFlight(brain)) {
        this.#record({ type: 'closed', at: Date.now(), v: this.#version, run: runIndex, state: brain.value, io: this.#ioState });
        await this.flush();
      }
    } finally {
      stopActor(this.actor);
      // The stopped run never reaches Idle in this object: whoever waits for it is told, not left waiting.
      this.#endWaiters(new SessionClosedError(this.sessionId, 'wait for its run to end (the run stays stored where it was)'));
      // Its children stay where they are: the next open of this session resumes them through its calls.
      await Promise.all([...this.#children].map((child) => child.close()));
    }
  }

  /** Refuses what would change the session (or wait on its run) once `close()` was called. */
  #refuseClosed(what: string): void {
    if (this.#closing) throw new SessionClosedError(this.sessionId, what);
  }

  /** A child run's session (an agent tool's call), on this store beside this one; see `agentTool`. */
  async #openChild(options: OpenChildOptions): Promise<ChildSession> {
    const child = await DurableSession.open({
      machine: options.machine as AgentMachine,
      store: this.#store,
      sessionId: options.sessionId,
      attach: options.attach as unknown as (actor: AgentActor) => void,
      parent: options.parent as AnyActorRef,
      scope: options.scope,
    });
    this.#children.add(child);
    return {
      actor: child.actor,
      send: (event) => child.send(event as AgentEvent),
      whenIdle: () => child.whenIdle(),
      close: () => (this.#children.delete(child), child.close()),
    };
  }

  /**
   * The durability wrapper around the agent's executor: nothing runs before the steps that
   * decided it are stored; a tool result's journal entry is queued before the driver sees it,
   * ahead of any step that uses it (the step that logs it absorbs it: `planWrites`); a result
   * journaled before a crash is replayed.
   */
  #durable(inner: Executor): Executor {
    return async (effect, perform) => {
      await this.flush();
      if (effect.kind === 'operation') return this.#operation(effect as SideEffect<'operation'>, inner, perform as never) as never;
      if (effect.kind === 'toolStart') return this.#started(effect as SideEffect<'toolStart'>, inner, perform as never) as never;
      if (effect.kind !== 'tool') return this.#traced(effect, () => inner(effect, perform));
      const { batchKey, call } = (effect as SideEffect<'tool'>).input;
      const recorded = this.#replay.get(batchKey)?.get(call.id);
      if (recorded) return recorded as never;
      // An agent tool's child run is a session of its own on this store.
      // The child session the call opens (an agent tool's), for its trace entry: what a reader finds the child by.
      let child: string | undefined;
      const open = (options: OpenChildOptions) => ((child = options.sessionId), this.#openChild(options));
      const result = await extendScope({ open }, () => this.#traced(effect, () => inner(effect, perform), () => child));
      if (!effect.signal.aborted) {
        this.#enqueue({ kind: 'journal', turnKey: batchKey, entry: result as ToolMessage });
      }
      return result;
    };
  }

  /**
   * Runs one effect and records it in the trace when it settles (before the driver sees the
   * result, so the entry is queued ahead of the step that uses it). Approval checks are not
   * recorded: the decision is, when it is sent. Nor is a run's toolset step: what it listed is
   * journaled in the row (`offered`) by the step that takes it. `child`: the child session a
   * tool call opened (an agent tool's), which its entry names.
   */
  async #traced<T>(effect: SideEffect, work: () => Promise<T>, child: () => string | undefined = () => undefined): Promise<T> {
    if (!this.#store.appendTrace || effect.kind === 'approval') return work();
    const run = this.actor.getSnapshot().context.runIndex;
    const prompt = effect.kind === 'model' ? this.#prompts.next((effect as SideEffect<'model'>).input.request.messages) : undefined;
    const started = Date.now();
    const t0 = performance.now();
    let result: T | undefined;
    let failure: unknown;
    let failed = false;
    try {
      result = await work();
      return result;
    } catch (error) {
      failed = true;
      failure = error;
      throw error;
    } finally {
      if (!effect.signal.aborted || !failed) {
        const common = { at: started, ms: Math.round((performance.now() - t0) * 10) / 10, run, key: effect.key };
        const error = failed ? { error: errorRecord(failure) } : {};
        if (effect.kind === 'model') {
          const { input } = effect as SideEffect<'model'>;
          const reply = result as { message: unknown; finishReason?: unknown; usage?: unknown } | undefined;
          this.#record({
            type: 'model',
            ...common,
            turn: input.turn,
            ...(input.model !== undefined && { model: input.model }),
            tools: input.request.tools.map((tool) => tool.name),
            ...prompt!,
            ...(reply && {
              reply: {
                message: reply.message,
                ...(typeof reply.finishReason === 'string' && { finishReason: reply.finishReason }),
                ...(reply.usage !== undefined && { usage: reply.usage }),
              } as never,
            }),
            ...error,
          });
        } else if (effect.kind === 'tool') {
          const { input } = effect as SideEffect<'tool'>;
          const opened = child();
          this.#record({
            type: 'tool',
            ...common,
            turn: input.turn,
            call: input.call,
            ...(result !== undefined && { result: result as ToolMessage }),
            ...error,
            ...(opened !== undefined && { child: opened }),
          });
          // Other calls of the batch may run on for long: the entry does not wait for the batch's step.
          this.#writeTrace();
        } else if (effect.kind === 'guardrail') {
          const { turn, stage, guardrail: name, checkKey: check } = (effect as SideEffect<'guardrail'>).input;
          this.#record({ type: 'guardrail', ...common, turn, check, stage, name, ...(result !== undefined && { verdict: result as never }), ...error });
        } else if (effect.kind === 'policy') {
          const { turn, call } = (effect as SideEffect<'policy'>).input;
          const by = policyDecidedBy(result);
          // An executor's answer that is no verdict fails the run (checkedVerdict); the entry keeps only a verdict.
          const verdict = ToolPolicyVerdictSchema.safeParse(result);
          this.#record({ type: 'policy', ...common, turn, call, ...(verdict.success && { verdict: verdict.data }), ...(by !== undefined && { by }), ...error });
        } else if (effect.kind === 'compaction') {
          const { input } = effect as SideEffect<'compaction'>;
          const output = result as { before: number; after: number; messages?: unknown } | undefined;
          this.#record({
            type: 'compaction',
            ...common,
            turn: input.turn,
            reason: input.reason,
            before: output?.before ?? input.tokensBefore,
            after: output?.after ?? input.tokensBefore,
            rewritten: output?.messages !== undefined,
            ...error,
          });
        }
      }
    }
  }

  /**
   * Holds an entry for the next write. Each write takes every entry recorded before it runs, so
   * the trace's order is the order things were recorded in.
   */
  #record(entry: TraceEntry): void {
    if (!this.#store.appendTrace || this.#failure) return;
    this.#trace.push(entry);
  }

  /** The entries recorded so far, handed to the write that runs now (none: undefined). */
  #takeTrace(): TraceEntry[] | undefined {
    if (this.#trace.length === 0) return undefined;
    const entries = this.#trace;
    this.#trace = [];
    return entries;
  }

  /**
   * Asks for a write of the trace alone for entries no step will take: the drain writes what
   * its steps did not take.
   */
  #writeTrace(): void {
    if (this.#trace.length === 0 || this.#failure) return;
    this.#traceWanted = true;
    this.#scheduleDrain();
  }

  /**
   * An operation's hook, journaled like a tool call: what it returned is recorded under its
   * point's key before the driver applies it, and replayed instead of run after a restart.
   * Tool results it gave (a `runsTools` operation) go in the batch's journal as if they had run.
   */
  async #operation(
    effect: SideEffect<'operation'>,
    inner: Executor,
    perform: () => Promise<SideEffectOutputs['operation']>,
  ): Promise<SideEffectOutputs['operation']> {
    const { pointKey, operation, hook } = effect.input;
    const recorded = this.#replay.get(pointKey)?.get(operation);
    const replayed = recorded && parsedOutput(recorded.content);
    if (replayed !== undefined) return replayed;
    const output = await inner(effect, perform);
    if (effect.signal.aborted) return output;
    const entry: ToolMessage = { role: 'tool', toolCallId: operation, toolName: 'operation', content: JSON.stringify(output) };
    this.#enqueue({ kind: 'journal', turnKey: pointKey, entry });
    // Results a beforeTools point gave belong to the journal of its batch.
    const point = hook === 'beforeTools' ? parseKey(pointKey, this.sessionId) : null;
    const batchKey = point?.kind === 'point' ? keyOf({ ...turnOf(point), kind: 'tools' }) : undefined;
    for (const result of (batchKey && output?.results) || []) {
      this.#enqueue({ kind: 'journal', turnKey: batchKey!, entry: result });
    }
    return output;
  }

  /**
   * A start marker of a call whose tool asks when in doubt: stored before the tool runs. A marker
   * journaled before this session opened is answered from the journal (the IO then knows the
   * call was started elsewhere), unless the call's result is journaled too (then it replays).
   */
  async #started(effect: SideEffect<'toolStart'>, inner: Executor, perform: () => Promise<SideEffectOutputs['toolStart']>): Promise<SideEffectOutputs['toolStart']> {
    const { batchKey, call } = effect.input;
    const marker = this.#replay.get(markerBatch(batchKey))?.get(effect.key);
    if (marker && !this.#replay.get(batchKey)?.has(call.id)) return { token: marker.content as string };
    const output = await inner(effect, perform);
    const entry: ToolMessage = { role: 'tool', toolCallId: effect.key, toolName: call.name, content: output.token };
    this.#enqueue({ kind: 'journal', turnKey: markerBatch(batchKey), entry });
    await this.flush();
    return output;
  }

  #persist(context: AgentContext): void {
    // Events that change nothing (text deltas, progress) keep the context object: nothing to encode.
    if (this.#failure || context === this.#seen) return;
    this.#seen = context;
    const row = encodeRow(context);
    const log = logOf(context.brain.context);
    const written = this.#written;
    const logUnchanged = log.sameAs(written.log);
    // Compared as data, not as text: the store serializes the row once, when it writes it.
    if (logUnchanged && sameJson(row, written.row)) return;
    const effect = logEffect(written.log, log);
    const key = toolsKey(context);
    const pointKey = context.operations.point?.key ?? null;
    // Once a batch's results are in the log (or dropped), its journal entries go in the same step;
    // so do a point's operation effects once the point is done (they are in the row).
    const obsolete = [
      ...(written.awaitingToolsKey && written.awaitingToolsKey !== key ? [written.awaitingToolsKey, markerBatch(written.awaitingToolsKey)] : []),
      ...(written.pointKey && written.pointKey !== pointKey ? [written.pointKey] : []),
    ];
    const clearJournal = obsolete.length > 0 ? obsolete : undefined;
    const expectedVersion = this.#version++;
    this.#written = { log, row, awaitingToolsKey: key, pointKey };
    this.#enqueue({ kind: 'step', write: { expectedVersion, state: row, ...effect, ...(clearJournal && { clearJournal }) } });
    this.#recordStep(context, expectedVersion + 1);
  }

  /** The brain's counters once a step is stored. */
  #recordStep(context: AgentContext, version: number): void {
    if (!this.#store.appendTrace) return;
    const brain = context.brain;
    const now = Date.now();
    // Recorded after the step is queued, before it runs: it rides in the step's own write and says what is stored.
    this.#record({
      type: 'step',
      at: now,
      v: version,
      run: context.runIndex,
      state: brain.value,
      io: this.#ioState,
      turns: brain.context.turnsTaken,
      tokens: brain.context.contextTokens,
      toolCalls: brain.context.totalToolCalls,
      log: logOf(brain.context).length,
      policy: context.policy,
      usage: context.sessionUsage,
      outcome: brain.context.outcome,
    });
  }

  #enqueue(write: QueuedWrite): void {
    if (write.kind === 'step') this.#stepsAhead++;
    this.#queued.push(write);
    this.#scheduleDrain();
  }

  /**
   * Writes are queued as they are decided and handed to the store together once the work of the
   * moment is done (or at a flush, which every side effect waits for): a tool result and the
   * step that takes it into the log are then one transaction (see `planWrites`).
   */
  #scheduleDrain(): void {
    this.#drainTimer ??= setImmediate(() => this.#drain());
  }

  /** Hands what was queued to the write chain, in order. */
  #drain(): void {
    // At most one timer, and none left once drained: a host whose work never yields to the event
    // loop (instant model and tools, a store that answers at once) would pile up timers, each
    // holding its closed session.
    clearImmediate(this.#drainTimer);
    this.#drainTimer = undefined;
    const planned = planWrites(this.#queued.splice(0));
    const trace = this.#traceWanted;
    this.#traceWanted = false;
    if (planned.length === 0 && !trace) return;
    this.#queue = this.#queue.then(async () => {
      try {
        for (const write of planned) await this.#write(write);
        // Entries no step of this drain took (a step takes every entry recorded before it runs),
        // unless a step decided while this drain wrote waits its turn: it takes them, in its transaction.
        const entries = trace && !this.#failure && this.#stepsAhead === 0 ? this.#takeTrace() : undefined;
        if (entries) await this.#store.appendTrace!(this.sessionId, entries);
      } catch (error) {
        this.#stop(error as Error);
      }
    });
  }

  async #write(write: PlannedWrite): Promise<void> {
    if (this.#failure) return;
    if (write.kind === 'journal') return this.#store.journalToolResult(this.sessionId, write.turnKey, write.entry);
    this.#stepsAhead--;
    // The step's trace entries (its run's start, the effects that led to it, the step itself) go in its transaction.
    const trace = this.#takeTrace();
    try {
      // The trace first: a literal that starts with a spread gets a V8 map of its own per step when a key follows it.
      await this.#store.apply(this.sessionId, trace ? { trace, ...write.write } : write.write);
    } catch (error) {
      // A refused step (another process won the session) leaves the results it held where they
      // would have been without it: in the journal.
      for (const journal of write.absorbed) await this.#store.journalToolResult(this.sessionId, journal.turnKey, journal.entry).catch(() => {});
      throw error;
    }
  }

  /** A write that failed (another process won the session, the disk is gone): stop acting at once. */
  #stop(error: Error): void {
    if (this.#failure) return;
    this.#failure = error;
    this.#fail(error);
    stopActor(this.actor);
  }
}

/** A journaled operation effect, or undefined when the entry is unreadable (the hook runs again). */
function parsedOutput(content: string): SideEffectOutputs['operation'] | undefined {
  try {
    return JSON.parse(content) as SideEffectOutputs['operation'];
  } catch {
    return undefined;
  }
}


/** The journal batch of the tool calls the brain is waiting for, if it is waiting for any. */
function toolsKey(context: AgentContext): string | null {
  return context.brain.value === 'AwaitingTools' ? serviceKey(context, context.brain.context.turnsTaken, 'tools') : null;
}

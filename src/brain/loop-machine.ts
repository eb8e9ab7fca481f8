import { createActor, type Actor, type InspectionEvent, type Observer } from 'xstate';
import {
  decide,
  loopMachine,
  type LoopSnapshot,
} from '../../machines/loop.machine.js';
import { coherentCut } from './conversation.js';
import { parseFeed, parseHistory } from './history.js';
import { IllegalFeedError } from '../errors.js';
import { feedIllegality } from './feed-problems.js';
import { acceptsFeed, feedRejection } from './feed-rejection.js';
import type { LoopEvent } from './loop-events.js';
import type { FinishReason } from '../model.js';
import {
  AssistantMessageSchema,
  DEFAULT_POLICY,
  FinishReasonSchema,
  LoopErrorInfoSchema,
  MessageSchema,
  PolicySchema,
  ToolMessageSchema,
  UserMessageSchema,
  type AssistantMessage,
  type LoopContext,
  type LoopErrorInfo,
  type LoopState,
  type Message,
  type Outcome,
  type Policy,
  type PolicyInput,
  type Step,
  type ToolMessage,
  type UserMessage,
} from '../schemas.js';
import { parseLoopSnapshot, toLoopSnapshotJSON, type LoopSnapshotJSON } from './loop-snapshot.js';
import { z } from 'zod';

const ToolNamesSchema = z.array(z.string());

export interface LoopMachineOptions {
  /** Committed messages to start from; must be coherent. */
  history?: Message[] | undefined;
  /** XState inspection observer, e.g. from `@statelyai/inspect` or `summarizingInspector`. */
  inspect?: Observer<InspectionEvent> | ((event: InspectionEvent) => void) | undefined;
}

/**
 * The imperative face of the brain for hosts that drive it themselves: the seed's API in
 * camelCase over the XState actor. An illegal feed throws and leaves the machine unchanged.
 *
 * @example
 * ```ts
 * const brain = new LoopMachine();
 * brain.acceptInput({ role: 'user', content: 'What is 6 * 7?' });
 * const step = brain.nextStep(); // { type: 'CallLLM', turn: 1 }
 * brain.modelResponse({ role: 'assistant', content: '42' }, 20, []);
 * brain.nextStep(); // { type: 'Done', outcome: { type: 'Completed', finalText: '42' } }
 * const again = LoopMachine.restore(JSON.parse(JSON.stringify(brain.toJSON())));
 * ```
 */
export class LoopMachine {
  readonly actor: Actor<typeof loopMachine>;
  /** The policy of the latest `nextStep`: a compaction feed judges its stall against it. */
  #policy: Policy = DEFAULT_POLICY;

  constructor(options: LoopMachineOptions = {}, restored?: LoopSnapshot) {
    const history = options.history && parseHistory(options.history);
    this.actor = createActor(loopMachine, {
      input: { history: history ?? [] },
      ...(restored && { snapshot: restored }),
      ...(options.inspect && { inspect: options.inspect }),
    }).start();
  }

  /** Rebuilds a machine from `toJSON()` output or from XState's `getPersistedSnapshot()`. */
  static restore(json: unknown, options: Omit<LoopMachineOptions, 'history'> = {}): LoopMachine {
    const { state, context } = parseLoopSnapshot(json);
    return new LoopMachine(options, loopMachine.resolveState({ value: state, context }));
  }

  // ── the step ──────────────────────────────────────────────────────────────

  /** What to do next under `policy`. Asking twice with nothing in between answers the same. */
  nextStep(policy: PolicyInput = {}): Step {
    const resolved = parseFeed('nextStep', PolicySchema, policy);
    this.#policy = resolved;
    const snapshot = this.#snapshot;
    const decision = decide(snapshot.value, snapshot.context, resolved);
    const step = decision.step(snapshot.context);
    // Only decisions that move the brain are sent, so the inspector shows each move once.
    if (decision.target) this.actor.send({ type: 'next', policy: resolved });
    return step;
  }

  // ── feeds ─────────────────────────────────────────────────────────────────

  /**
   * Starts a run with this user message. Legal in every state but Terminal, as seed 000 says
   * ("clears pending, pushes the user message, resets counters"): called in the middle of a
   * run it drops that run's pending turn (and queued steering) and keeps history. Commit or
   * salvage first to keep the turn.
   */
  acceptInput(message: UserMessage): void {
    this.#feed({ type: 'acceptInput', message: this.#parse('acceptInput', UserMessageSchema, message) });
  }

  modelResponse(
    response: AssistantMessage,
    contextTokens: number,
    availableTools: readonly string[],
    finishReason?: FinishReason,
  ): void {
    this.#feed({
      type: 'modelResponse',
      response: this.#parse('modelResponse', AssistantMessageSchema, response),
      contextTokens,
      availableTools: this.#parse('modelResponse', ToolNamesSchema, availableTools),
      ...(finishReason && { finishReason: this.#parse('modelResponse', FinishReasonSchema, finishReason) }),
    });
  }

  toolResults(messages: readonly ToolMessage[]): void {
    this.#feed({
      type: 'toolResults',
      messages: this.#parse('toolResults', z.array(ToolMessageSchema), messages),
    });
  }

  compactionResult(compacted: readonly Message[], before: number, after: number, policy?: PolicyInput): void {
    this.#feed({
      type: 'compactionResult',
      compacted: this.#parse('compactionResult', z.array(MessageSchema), compacted),
      before,
      after,
      contextWindow: this.#window('compactionResult', policy),
    });
  }

  compactionNoop(before: number, after: number, policy?: PolicyInput): void {
    this.#feed({ type: 'compactionNoop', before, after, contextWindow: this.#window('compactionNoop', policy) });
  }

  /**
   * Appends to pending without refreshing the estimate: call `setContextTokens` after big ones.
   * Refused where the message would break the order a provider needs: while tool calls await
   * their results (IllegalFeedError; `steer` queues a user message instead), a tool result
   * (it would answer no open call) and an assistant message with tool calls (nothing would
   * dispatch them) (InvalidFeedError).
   */
  inject(message: Message): void {
    this.#feed({ type: 'inject', message: this.#parse('inject', MessageSchema, message) });
  }

  setContextTokens(tokens: number): void {
    this.#feed({ type: 'setContextTokens', tokens });
  }

  cancel(): void {
    this.#feed({ type: 'cancel' });
  }

  fail(error: LoopErrorInfo): void {
    this.#feed({ type: 'fail', error: this.#parse('fail', LoopErrorInfoSchema, error) });
  }

  /** Ends the run with `Sealed(reason)` at once. Idempotent: on a finished run it does nothing. */
  seal(reason: string): void {
    if (this.isTerminal()) return;
    this.#feed({ type: 'seal', reason: this.#parse('seal', z.string(), reason) });
  }

  /** A user message for the running turn, delivered at the next coherent point. */
  steer(message: UserMessage): void {
    this.#feed({ type: 'steer', message: this.#parse('steer', UserMessageSchema, message) });
  }

  // ── maintenance ───────────────────────────────────────────────────────────

  commitPending(): void {
    this.#feed({ type: 'commitPending' });
  }

  discardPending(): void {
    this.#feed({ type: 'discardPending' });
  }

  /** Commits the longest coherent prefix of pending and drops the unanswered rest. */
  salvagePending(): { committed: number; dropped: number } {
    const { history, pending } = this.#snapshot.context;
    this.#feed({ type: 'salvagePending' });
    const committed = this.#snapshot.context.history.length - history.length;
    return { committed, dropped: pending.length - committed };
  }

  /** Drops committed history past `len`, snapped down to a coherent cut. Returns how many went. */
  rewindTo(len: number): number {
    const before = this.#snapshot.context.history.length;
    this.#feed({ type: 'rewindTo', len });
    return before - this.#snapshot.context.history.length;
  }

  /** Takes a pruned copy of the conversation (same shape, lighter contents). No state change. */
  adoptPruned(messages: readonly Message[]): void {
    this.#feed({
      type: 'adoptPruned',
      messages: this.#parse('adoptPruned', z.array(MessageSchema), messages),
    });
  }

  // ── reads ─────────────────────────────────────────────────────────────────

  history(): readonly Message[] {
    return this.#snapshot.context.history;
  }

  /** History + pending: exactly what the next request would send. */
  fullHistory(): Message[] {
    const { history, pending } = this.#snapshot.context;
    return history.concat(pending);
  }

  state(): LoopState {
    return stateOf(this.#snapshot);
  }

  turnsTaken(): number {
    return this.#snapshot.context.turnsTaken;
  }

  totalToolCalls(): number {
    return this.#snapshot.context.totalToolCalls;
  }

  isTerminal(): boolean {
    return this.#snapshot.value === 'Terminal';
  }

  isCancelled(): boolean {
    return this.#snapshot.context.cancelled;
  }

  contextTokens(): number {
    return this.#snapshot.context.contextTokens;
  }

  lastCoherentLen(): number {
    return coherentCut(this.fullHistory(), Infinity);
  }

  toJSON(): LoopSnapshotJSON {
    return toLoopSnapshotJSON(this.#snapshot.value, this.#snapshot.context);
  }

  // ── internals ─────────────────────────────────────────────────────────────

  get #snapshot(): LoopSnapshot {
    return this.actor.getSnapshot();
  }

  #window(feed: LoopEvent['type'], policy: PolicyInput | undefined): number {
    return policy ? this.#parse(feed, PolicySchema, policy).contextWindow : this.#policy.contextWindow;
  }

  /** Validates an argument; a feed the current state refuses anyway reports that first. */
  #parse<S extends z.ZodType>(feed: LoopEvent['type'], schema: S, value: unknown): z.output<S> {
    const state = this.#snapshot.value;
    if (!acceptsFeed(state, feed)) throw new IllegalFeedError(feed, state);
    const illegal = feedIllegality(this.#snapshot.context, feed);
    if (illegal) throw new IllegalFeedError(feed, state, illegal);
    return parseFeed(feed, schema, value);
  }

  /** Sends a feed if the brain takes it; otherwise throws the precise reason, changing nothing. */
  #feed(event: LoopEvent): void {
    const snapshot = this.#snapshot;
    if (!snapshot.can(event)) {
      throw feedRejection(snapshot.value, snapshot.context, event) ?? new IllegalFeedError(event.type, snapshot.value);
    }
    this.actor.send(event);
  }
}


export function stateOf(snapshot: { value: LoopSnapshot['value']; context: LoopContext }): LoopState {
  const { context } = snapshot;
  switch (snapshot.value) {
    case 'Start':
      return { type: 'Start' };
    case 'AwaitingModel':
      return { type: 'AwaitingModel', turn: context.turnsTaken + 1 };
    case 'AwaitingTools':
      return { type: 'AwaitingTools', turn: context.turnsTaken };
    case 'AwaitingCompaction':
      return { type: 'AwaitingCompaction', reason: context.compactionReason! };
    case 'Terminal':
      return { type: 'Terminal', outcome: context.outcome as Outcome };
  }
}

import type { AnyActorRef } from 'xstate';
import { lazyField } from '../../object-slot.js';
import type { MessageLog } from '../../brain/message-log.js';
import type { Model, ModelReply, ResponseFormat, ToolDefinition } from '../../model.js';
import type { RetryAttempt, RetryOptions } from '../../models/retry.js';
import type { CompactionReason, Message, PendingToolCall, ToolCall, ToolMessage } from '../../schemas.js';
import type { Compactor } from '../../compaction/contract.js';
import type { ToolSet } from '../../tools/define-tool.js';
import type { ToolSource } from '../../tools/tool-source.js';
import type { ListingCache, SourceRef } from '../../tools/offered-tools.js';
import type { Executor, SideEffect, SideEffectKind, SideEffectOutputs } from './executor.js';
import type { OperationHook } from '../operations/operation-state.js';
import type { OperationOutput, OperationPlan } from '../operations/operation-rules.js';
import type { PreparedRequest } from '../operations/operation.js';
import type { DoubtState } from '../core/call-decisions.js';
import type { SubagentReport } from './actor-types.js';
import type { ChildRoutes } from './child-routes.js';
import type { GuardrailPlan, GuardrailStage, GuardrailVerdict } from '../guardrails/guardrails.js';
import type { ToolPolicyPlan, ToolPolicyVerdict } from '../approvals/tool-policy.js';

/**
 * What the chart and its IO actor (see `ioLogic`) say to each other: the requests, the events
 * reported back, what the IO is built from, and what each request type's handler is given.
 */

// A model call's request as operations see it (`prepareRequest`), which the IO prepares.
export type { PreparedRequest };

/** What a model call's request is prepared with: the run's ids, the turn, and the conversation as the model sees it. */
export interface RequestContext {
  readonly sessionId: string;
  readonly scope?: string | undefined;
  readonly turn: number;
  readonly messages: readonly Message[];
}

/** A request context's `messages`, read when first asked for (see `requestContext`). */
const withMessages = lazyField('messages', (read: () => readonly Message[]) => read());

/**
 * A call's request context, its messages cut from the conversation (by `read`) only if someone
 * reads them; every such context has one hidden class (see `lazyField`).
 */
export const requestContext = (call: { sessionId: string; scope?: string | undefined; turn: number }, read: () => readonly Message[]): RequestContext =>
  withMessages({ sessionId: call.sessionId, scope: call.scope, turn: call.turn }, read);

/**
 * How the IO prepares a model call's request besides the instructions and the conversation (the
 * operations' prompt parts and rewrites), when the agent has anything to add.
 */
export type RequestPreparer = (instructions: Message | undefined, tools: readonly ToolDefinition[], ctx: RequestContext, slices: Slices) => PreparedRequest;

/** What the IO is built from (see `createAgentMachine`). */
export interface IoDeps {
  /** The agent's models in fallback order; each request names the one to use. */
  models: readonly Model[];
  retry: RetryOptions | false;
  tools: ToolSet;
  /** Listed once per run by its `toolset` step (see `ToolSource`); the run then keeps that set. */
  toolSources: readonly ToolSource[];
  /** The runnable tools of the listings this process made, for later steps of the same runs. */
  listings: ListingCache;
  operations: OperationPlan;
  compactor: Compactor | undefined;
  toolConcurrency: number;
  /** The system prompt, sent first on every model call and never stored in the conversation. */
  instructions: Message | undefined;
  /** The operations' prompt parts and rewrites (none: the instructions and the conversation as they are). */
  prepareRequest?: RequestPreparer | undefined;
  /** The answer's format (an output schema, a model with a JSON-schema mode): sent with every model call. */
  responseFormat?: ResponseFormat | undefined;
  executor: Executor;
  /** The agent's tool policies, asked about each call before its approval rule (null: none). */
  toolPolicy: ToolPolicyPlan | null;
  /** The agent's guardrails (null: none). */
  guardrails: GuardrailPlan | null;
  /** Told when the IO stops (its run ended, or the actor stopped mid-run), with the last request's key. */
  onStop?: ((lastKey: string | undefined) => void) | undefined;
}

/** With handoffs: the speaking agent's instructions (instead of the agent's) and its view of the conversation. */
export interface SpeakerView {
  instructions: Message | undefined;
  present(messages: readonly Message[]): readonly Message[];
}

/** The conversation as the brain holds it: history and pending in one shared log, read only. */
export type ConversationRef = MessageLog;

/** What the chart asks of its IO. Each request's `key` is the idempotency key of its step. */
export type IoRequest =
  /** Lists the run's tool sources: its `toolset` step. */
  | { type: 'toolset'; key: string }
  /** `tools`: the run's recorded set, offered to the model. */
  /** `model`: which of the agent's models (its index) takes the call. */
  | { type: 'model'; key: string; turn: number; sessionId: string; scope?: string | undefined; conversation: ConversationRef; slices: Slices; tools: readonly ToolDefinition[]; model: number; speaker?: SpeakerView | undefined }
  /** Runs the operations of a hook point in list order from `from`, until one yields. */
  | {
      type: 'operation';
      key: string;
      hook: OperationHook;
      from: number;
      turn: number;
      sessionId: string;
      scope?: string | undefined;
      conversation: ConversationRef;
      slices: Slices;
      reply: ModelReply | undefined;
      batch: readonly PendingToolCall[];
    }
  | {
      type: 'tools';
      key: string;
      turn: number;
      sessionId: string;
      /** The session's memory scope, which each tool is told (`ToolContext.scope`). */
      scope?: string | undefined;
      calls: readonly ToolCall[];
      batch: readonly PendingToolCall[];
      conversation: ConversationRef;
      /**
       * Calls whose start the chart reported itself: a new batch's calls that start at once (the
       * first `toolConcurrency`). The IO reports each other call's start (`io.toolStarted`) as it
       * starts it: a call queued behind those is not running yet.
       */
      announced: readonly string[];
      /** What the run's sources listed, by its `toolset` step's key; null without sources (or in an older snapshot). */
      offered: { key: string; definitions: readonly ToolDefinition[]; sources?: readonly SourceRef[] | undefined } | null;
      /** The batch's calls in doubt and their reruns (each rerun has keys of its own). */
      doubt?: DoubtState | undefined;
    }
  | { type: 'approvals'; key: string; turn: number; sessionId: string; calls: readonly ToolCall[]; conversation: ConversationRef }
  | {
      type: 'compaction';
      key: string;
      turn: number;
      reason: CompactionReason;
      conversation: ConversationRef;
      tokensBefore: number;
      /** Tokens of the system parts (instructions, prompt parts) the request carries besides the conversation. */
      systemTokens: number;
      contextWindow: number;
      /** The run's recorded tool definitions, which the next request carries. */
      tools: readonly ToolDefinition[];
      /** The run's active model (its index), handed to the compactor. */
      model: number;
    }
  /** Runs the named guardrails of one check in parallel; each verdict is reported as it comes. */
  | {
      type: 'guardrails';
      key: string;
      stage: GuardrailStage;
      names: readonly string[];
      turn: number;
      sessionId: string;
      text: string;
      /** The parsed answer an output check judges (an agent with an output schema). */
      output?: unknown;
      conversation: ConversationRef;
    }
  /**
   * The time limit passed mid-batch (a pausing budget): the batch's calls already started run on,
   * none other starts; the calls still queued (behind `toolConcurrency`) are set aside, reported
   * (`io.toolsHeld`), and run as first asked when a later `tools` request names them (a raise).
   */
  | { type: 'holdTools'; key: string }
  /**
   * A cancel or a seal while the batch's calls run (the chart's `Ending`), just before its `abort`:
   * no other call starts, not even one already taken off the queue, and a result a call had when
   * the abort came is still reported (`io.toolFinished`), not the interrupted answer.
   */
  | { type: 'endTools'; key: string }
  /** Stops everything in flight: the run no longer needs it. */
  | { type: 'abort' }
  /** A decision or a steer for a child run (an agent tool's): `event` as the child of call `callId` takes it (routed by the run's batch, see `routeAmong`). */
  | { type: 'forward'; callId: string; event: { type: string; toolCallId?: string | undefined; target?: string | undefined } };

/** What the IO reports. Only events the IO actor made are accepted (see `fromIo`). */
export type IoEvent =
  /** The IO actor started: fresh, or restored with its agent. The chart re-issues what it waits for. */
  | { type: 'io.attached' }
  /** `index`: the delta's position in its attempt (a retry starts again at 0). */
  | { type: 'io.textDelta'; key: string; turn: number; delta: string; index: number }
  | ({ type: 'io.retry'; key: string; turn: number } & RetryAttempt)
  | { type: 'io.listed'; key: string; output: SideEffectOutputs['toolset'] }
  | { type: 'io.replied'; key: string; reply: ModelReply }
  | { type: 'io.toolStarted'; key: string; call: ToolCall }
  | { type: 'io.toolFinished'; key: string; call: ToolCall; result: ToolMessage }
  /** The call's start was journaled by an earlier process and it has no result: the run asks a person (see in-doubt.ts). */
  | { type: 'io.toolInDoubt'; key: string; call: ToolCall }
  /** Answers `holdTools`: the ids of the batch's calls that were queued, not started, and now wait for a raise. */
  | { type: 'io.toolsHeld'; key: string; calls: string[] }
  /** `policy`: the tool policy's verdict for each call it was asked about, in order. */
  | { type: 'io.approvalsChecked'; key: string; waiting: string[]; policy: PolicyVerdicts }
  /** Operation `index` of the point's list returned (`output` null: it declined). */
  | { type: 'io.operated'; key: string; index: number; output: OperationOutput | null }
  | { type: 'io.guarded'; key: string; name: string; verdict: GuardrailVerdict }
  | { type: 'io.compacted'; key: string; reason: CompactionReason; output: SideEffectOutputs['compaction'] }
  /** A child run of call `callId` (an agent tool's) reports to its parent. */
  | { type: 'io.subagent'; key: string; callId: string; report: SubagentReport }
  | { type: 'io.failed'; key: string; kind: SideEffectKind; error: unknown };

// Events are trusted by identity: only objects the IO passed through `trusted` pass, so an `io.*`
// event sent from outside the agent can neither satisfy a tool call nor end a turn.
const made = new WeakSet<object>();
/** Marks an event as the IO's own, for `fromIo`. */
export const trusted = <E extends IoEvent>(event: E): E => (made.add(event), event);

/** Whether an event was sent by an agent's IO actor (and not by anyone else). */
export const fromIo = (event: object): boolean => made.has(event);

/** The tool policy's verdicts of one approval check, by call, in the batch's order. */
export type PolicyVerdicts = { toolCallId: string; verdict: ToolPolicyVerdict }[];

/** The operations' state slices by name, as the driver's context holds them. */
export type Slices = Readonly<Record<string, unknown>>;

/** A request of one type. */
export type RequestOf<T extends IoRequest['type']> = Extract<IoRequest, { type: T }>;

/**
 * What a handler is given of its IO actor (see `ioLogic`): the agent's deps, the run's
 * bookkeeping and the ways to report. One per IO actor, shared by its handlers.
 */
export interface IoScope {
  readonly deps: IoDeps;
  /** The IO actor: the parent of an agent tool's child run. */
  readonly self: AnyActorRef;
  /** The controller of what the run has in flight now; aborting the run replaces it. */
  readonly run: AbortController;
  /** The children of this run's calls (an agent tool's child run), by call id: what a decision or a steer for one goes to. */
  readonly children: ChildRoutes;
  /**
   * Runs one request's work under the run's controller, once per key while it is in flight; work
   * begins a microtask later, after the chart's current step, so an event sent in the same
   * breath (a cancel right after start) still comes first.
   */
  start(key: string, work: (controller: AbortController) => Promise<void>): void;
  /** Hands one side effect to the executor. */
  execute<K extends SideEffectKind>(effect: Omit<SideEffect<K>, 'specificationVersion'>, perform: () => Promise<SideEffectOutputs[K]>): Promise<SideEffectOutputs[K]>;
  /** Reports an event, unless its work's controller was aborted. */
  send(controller: AbortController, event: IoEvent): void;
  /** Reports an event whatever happened to the run. */
  report(event: IoEvent): void;
  /** A request's last word: it is no longer in flight by the time the chart hears it. */
  finish(controller: AbortController, key: string, event: IoEvent): void;
  /** A request's failure, as its last word. */
  fail(controller: AbortController, key: string, kind: SideEffectKind, error: unknown): void;
  /** The conversation alone, as one list (what operations, guardrails and compactors read). */
  view(conversation: ConversationRef): readonly Message[];
}

/** The handler of one request type, made once per IO actor. */
export type Handler<T extends IoRequest['type']> = (request: RequestOf<T>) => void;

/**
 * The IO handlers a feature brings for its own request types (operations, approvals, guardrails),
 * each made from the IO actor's scope on its type's first request: a run that never asks for one
 * never builds it. The chart gives the IO all of them (see `ioLogic`).
 */
export type FeatureHandlers = { readonly [T in IoRequest['type']]?: (io: IoScope) => Handler<T> };

/** Every feature's handler makers, by request type, as the IO looks them up (see `ioLogic`). */
export type FeatureHandlerMap = ReadonlyMap<string, NonNullable<FeatureHandlers[keyof FeatureHandlers]>>;

/**
 * The reason an agent's IO aborts its calls when the actor stops (not cancelled: the process
 * shuts down or the session closes): a child then stays where it is, to be resumed.
 */
export const PARENT_STOPPED: unknown = Object.freeze({ reason: 'the agent stopped' });
export const isParentStopped = (reason: unknown): boolean => reason === PARENT_STOPPED;

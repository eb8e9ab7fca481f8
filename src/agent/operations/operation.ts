import type { z } from 'zod';
import { LoopchartError } from '../../errors.js';
import type { ModelReply, ToolDefinition } from '../../model.js';
import type { Message, PendingToolCall, ToolCall, ToolMessage } from '../../schemas.js';
import type { Tool } from '../../tools/define-tool.js';
import type { OperationHook } from './operation-state.js';

/**
 * What an operation sees: the conversation so far and its own slice of state, read-only.
 *
 * @example
 * ```ts
 * const op: Operation<{ n: number }> = { name: 'n', prompt: (ctx: OperationContext<{ n: number }>) => `turn ${ctx.turn}, n = ${ctx.state.n}` };
 * ```
 */
export interface OperationContext<S = unknown> {
  readonly sessionId: string;
  /** The session's memory scope (whose session it is), if it was opened with one: see `AgentInput.scope`. */
  readonly scope?: string | undefined;
  readonly turn: number;
  readonly messages: readonly Message[];
  /** This operation's slice of application state (`state.initial` until an effect replaces it). */
  readonly state: S;
}

/**
 * What a hook sees besides: a signal aborted when the run stops needing it or its timeout passes.
 *
 * @example
 * ```ts
 * const op: Operation = { name: 'fetcher', beforeModelCall: async (ctx: HookContext) => void (await fetch('https://example.com/context', { signal: ctx.signal })) };
 * ```
 */
export interface HookContext<S = unknown> extends OperationContext<S> {
  readonly signal: AbortSignal;
}

/**
 * The request about to go to the model; `prepareRequest` may return a rewritten one.
 *
 * @example
 * ```ts
 * const noEcho: Operation = { name: 'no-echo', prepareRequest: (request: PreparedRequest) => ({ ...request, tools: request.tools.filter((t) => t.name !== 'echo') }) };
 * ```
 */
export interface PreparedRequest {
  messages: Message[];
  tools: ToolDefinition[];
}

/**
 * What a hook returns (seed 003): nothing to decline, or effects. `state` replaces the
 * operation's slice (checked against its schema); `results` answers tool calls of the batch so
 * they do not run (only an operation declaring `runsTools`, at `beforeTools`); `yield` stops the
 * run here until `{ type: 'operation.resume', operation, payload }` arrives. Effects are applied
 * before the yield, and a yield wins the point: later operations and the step itself wait.
 *
 * @example
 * ```ts
 * const gate: Operation<{ asked: number }, { ok: boolean }> = {
 *   name: 'gate',
 *   state: { schema: z.object({ asked: z.number() }), initial: { asked: 0 } },
 *   resume: { schema: z.object({ ok: z.boolean() }) },
 *   beforeTools: (_calls, ctx): OperationStep<{ asked: number }> => ({ state: { asked: ctx.state.asked + 1 }, yield: { reason: 'review' } }),
 * };
 * ```
 */
export interface OperationStep<S = unknown> {
  state?: S | undefined;
  results?: ToolMessage[] | undefined;
  yield?: { reason: string; payload?: unknown } | undefined;
}

type HookResult<S> = OperationStep<S> | void | undefined;
type MaybePromise<T> = T | Promise<T>;

/**
 * How long a hook may take unless the operation says otherwise.
 *
 * @example
 * ```ts
 * const patient: Operation = { name: 'patient', timeoutMs: 4 * DEFAULT_OPERATION_TIMEOUT_MS, beforeModelCall: async (ctx) => void (await fetch('https://example.com/slow', { signal: ctx.signal })) };
 * ```
 */
export const DEFAULT_OPERATION_TIMEOUT_MS = 30_000;

/**
 * One composable piece of agent behaviour (seed 003's operations). The driver asks every
 * operation, in list order, for tools and prompt parts before each model call, and runs its
 * hooks at three points of each turn, in this order: `beforeModelCall`, `afterReply`,
 * `beforeTools`. At a point the operations run in list order; each declines (returns nothing),
 * applies effects and lets the next one run, or applies effects and yields. Hooks may be async:
 * each runs through the executor seam (kind `operation`, so a durable session journals what it
 * returned and never runs a finished hook again), with an `AbortSignal` and a timeout.
 *
 * Prompt parts and request rewrites are synchronous: the brain counts them before it decides.
 * Fetch asynchronously in a hook, keep the result in the operation's state, read it in `prompt`.
 *
 * @example
 * ```ts
 * import { z } from 'zod';
 * import { createAgentMachine, type Operation } from 'loopchart';
 *
 * const notes: Operation<{ seen: number }> = {
 *   name: 'notes',
 *   state: { schema: z.object({ seen: z.number() }), initial: { seen: 0 } },
 *   prompt: (ctx) => `Replies so far: ${ctx.state.seen}.`,
 *   async afterReply(_reply, ctx) {
 *     return { state: { seen: ctx.state.seen + 1 } };
 *   },
 * };
 * const agent = createAgentMachine({ model, operations: [notes] });
 * ```
 */
export interface Operation<S = any, R = any> {
  /** Unique within the agent: letters, digits, `_`, `-`, `.`, starting with a letter. */
  readonly name: string;
  readonly tools?: readonly Tool[] | undefined;
  /** The operation's slice of application state, persisted with the session and checked on restore. */
  readonly state?: { schema: z.ZodType<S>; initial: S } | undefined;
  /**
   * Declares that the operation may yield, and the payload that resumes it. `apply` turns the
   * payload into effects (a new slice; it may yield again).
   */
  readonly resume?: { schema: z.ZodType<R>; apply?(payload: R, ctx: OperationContext<S>): HookResult<S> } | undefined;
  /** Declares that its `beforeTools` may answer tool calls (`results`): it runs tools. */
  readonly runsTools?: boolean | undefined;
  /** How long each hook may take, in ms. Default `DEFAULT_OPERATION_TIMEOUT_MS`. */
  readonly timeoutMs?: number | undefined;
  /** System text to send before the conversation on this call. */
  prompt?(ctx: OperationContext<S>): string | undefined;
  /** Rewrites the request just before it goes to the model (sync; never stored). */
  prepareRequest?(request: PreparedRequest, ctx: OperationContext<S>): PreparedRequest | void;
  beforeModelCall?(ctx: HookContext<S>): MaybePromise<HookResult<S>>;
  afterReply?(reply: ModelReply, ctx: HookContext<S>): MaybePromise<HookResult<S>>;
  beforeTools?(calls: readonly PendingToolCall[], ctx: HookContext<S>): MaybePromise<HookResult<S>>;
  /**
   * The run is being cancelled (seed 003: operations get "a chance to preserve received output"):
   * sees what the interrupted step received and may keep it in the operation's state. Runs once,
   * synchronously, after any hook in flight had its grace (see `DEFAULT_CANCEL_GRACE_MS`) and
   * before the unanswered calls get their interrupted results. A throw or a slice the schema
   * refuses is reported (`operation.failed`); the run still ends `Cancelled`.
   */
  onCancel?(interrupted: InterruptedStep, ctx: OperationContext<S>): { state?: S | undefined } | void;
}

/**
 * What a cancelled run's interrupted step had received, as `onCancel` sees it.
 *
 * @example
 * ```ts
 * const keep = (step: InterruptedStep) => step.results.map((result) => result.content);
 * ```
 */
export interface InterruptedStep {
  /** The hook point that was in progress, if any. */
  point: OperationHook | null;
  /** Results of the current tool batch that had arrived. */
  results: readonly ToolMessage[];
  /** Calls of the batch that had no result: each gets an interrupted result next. */
  unanswered: readonly ToolCall[];
}

/**
 * How long a cancel waits for an operation hook in flight (its signal aborted at once) to return
 * what it received before the run ends; `{ type: 'cancel', graceMs: 0 }` does not wait.
 *
 * @example
 * ```ts
 * actor.send({ type: 'cancel', graceMs: DEFAULT_CANCEL_GRACE_MS / 4 });
 * ```
 */
export const DEFAULT_CANCEL_GRACE_MS = 1_000;

/**
 * Where an operation failed: one of its hooks, its resume, its prompt part or its request rewrite.
 *
 * @example
 * ```ts
 * actor.on('operation.failed', ({ error }) => console.log(error.operation, error.hook satisfies OperationFailurePoint));
 * ```
 */
export type OperationFailurePoint = OperationHook | 'resume' | 'prompt' | 'prepareRequest' | 'onCancel';

/**
 * An operation's hook threw, timed out, or returned effects that break its contract (a slice
 * its schema refuses, results it may not give). The run fails; the error names the operation.
 *
 * @example
 * ```ts
 * actor.on('operation.failed', ({ error }) => {
 *   if (OperationError.isInstance(error)) console.error(error.operation, error.hook, error.message);
 * });
 * ```
 */
export class OperationError extends LoopchartError {
  readonly operation: string;
  readonly hook: OperationFailurePoint;
  constructor(operation: string, hook: OperationFailurePoint, problem: string, options?: { cause?: unknown }) {
    super('OperationFailed', `operation '${operation}' ${hook}: ${problem}`, options);
    this.operation = operation;
    this.hook = hook;
  }
}

/**
 * A stored slice of an operation's state that its schema refuses (or a yield for an operation
 * the agent does not have): the session cannot continue with this configuration. Nothing stored
 * is changed.
 *
 * @example
 * ```ts
 * try {
 *   await DurableSession.open({ machine, store, sessionId });
 * } catch (error) {
 *   if (OperationStateError.isInstance(error)) console.error(`fix the state of ${error.operation}`);
 * }
 * ```
 */
export class OperationStateError extends LoopchartError {
  readonly operation: string;
  constructor(operation: string, problem: string) {
    super('InvalidOperationState', `operation '${operation}': ${problem}`);
    this.operation = operation;
  }
}

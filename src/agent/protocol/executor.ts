import type { ModelReply, ModelRequest, ToolDefinition } from '../../model.js';
import type { CompactionReason, Message, ToolCall, ToolMessage } from '../../schemas.js';
import type { OperationHook } from '../operations/operation-state.js';
import type { OperationOutput } from '../operations/operation-rules.js';
import type { ToolPolicyVerdict } from '../approvals/tool-policy.js';
import type { GuardrailStage, GuardrailVerdict } from '../guardrails/guardrails.js';

/**
 * The executor seam: every side effect of a run (a model call, one tool call, a compaction, an
 * approval check, the listing of its tool sources) is handed to one executor as a described effect plus the work that performs
 * it in-process. The chart decides what happens; the executor decides how and where: at once
 * (the default), journaled by a durable session, as an engine's durable step, inside a span.
 */

/** What each kind of side effect is given, besides its key. */
export interface SideEffectInputs {
  /** `model`: the name of the model that takes the call (with a list of models, the run's active one). */
  model: { turn: number; request: Omit<ModelRequest, 'signal' | 'idempotencyKey' | 'onTextDelta'>; model?: string | undefined };
  /** `batchKey` names the batch the call belongs to (the turn's tool step). */
  tool: { turn: number; call: ToolCall; batchKey: string };
  /** The start of a call of a tool whose in-doubt policy asks, journaled before it runs (see `inDoubt` on a tool). */
  toolStart: { turn: number; call: ToolCall; batchKey: string };
  compaction: { turn: number; reason: CompactionReason; messages: readonly Message[]; tokensBefore: number };
  /** Asks whether one call must wait for a human's decision before it runs. */
  approval: { turn: number; call: ToolCall };
  /** Asks the agent's tool policies about one call, before its approval rule and before anything runs. */
  policy: { turn: number; call: ToolCall };
  /** One guardrail of one check (`checkKey`): the run's input before its first model call, or its final answer. */
  guardrail: { turn: number; stage: GuardrailStage; guardrail: string; checkKey: string };
  /** One operation's hook at one point; `pointKey` names the point (its operations share it). */
  operation: { turn: number; operation: string; hook: OperationHook; pointKey: string };
  /** Lists the run's tool sources, once per run before its first model call (only for an agent with sources). */
  toolset: { sources: number };
}

/** What each kind of side effect resolves to: plain JSON, so it can be journaled and replayed. */
export interface SideEffectOutputs {
  model: ModelReply;
  tool: ToolMessage;
  /** A token of the process that started the call: one from another process means the call is in doubt. */
  toolStart: { token: string };
  /** `messages` absent: the compactor changed nothing. `after` counts tool definitions too. */
  compaction: { before: number; after: number; messages?: Message[] | undefined };
  approval: boolean;
  policy: ToolPolicyVerdict;
  guardrail: GuardrailVerdict;
  /** The hook's effects, checked; null when it declined. */
  operation: OperationOutput | null;
  /**
   * The definitions the sources listed: the run offers these (and the agent's own tools) to its
   * end. `sources`: the source that listed each, its name or (a source without one, and in
   * older journals) its index in `toolSources`; absent in still older journals.
   */
  toolset: { definitions: ToolDefinition[]; sources?: (string | number)[] | undefined };
}

export type SideEffectKind = keyof SideEffectInputs;

/**
 * The version of the side-effect contract (the kinds, their inputs and outputs) this build
 * speaks, as the AI SDK's `specificationVersion`: every effect carries it, and an executor may
 * declare the one it was written against, so a journal, a worker or a wrapper from another build
 * is recognised before it runs an effect it would misread. A change to `SideEffectInputs` or
 * `SideEffectOutputs` that an older executor cannot read raises it.
 *
 * @example
 * ```ts
 * import type { Executor } from 'loopchart';
 * import { EFFECT_SPECIFICATION_VERSION } from 'loopchart/schemas';
 *
 * const journaled: Executor = Object.assign<Executor, { specificationVersion: string }>(
 *   (effect, perform) => perform(),
 *   { specificationVersion: EFFECT_SPECIFICATION_VERSION },
 * );
 * ```
 */
export const EFFECT_SPECIFICATION_VERSION = 'v1';

/** One side effect, described. */
export interface SideEffect<K extends SideEffectKind = SideEffectKind> {
  /** The contract version the effect is described in (`EFFECT_SPECIFICATION_VERSION`). */
  readonly specificationVersion: typeof EFFECT_SPECIFICATION_VERSION;
  /**
   * The idempotency key: the same effect has the same key across retries, restores and
   * processes, and no other effect of the session shares it.
   */
  readonly key: string;
  readonly kind: K;
  readonly input: SideEffectInputs[K];
  /** Aborted when the run stops needing the result (cancel, seal, the actor stopped). */
  readonly signal: AbortSignal;
}

/**
 * Runs side effects. `perform` does the work in this process; an executor may call it, wrap
 * it (timing, spans, retries), skip it (a result recorded earlier), or hand the effect to
 * another runner. Executors compose by wrapping one another.
 *
 * @example
 * ```ts
 * import { createAgentMachine, type Executor } from 'loopchart';
 *
 * const logged: Executor = async (effect, perform) => {
 *   const started = performance.now();
 *   try {
 *     return await perform();
 *   } finally {
 *     console.log(effect.kind, effect.key, `${(performance.now() - started).toFixed(1)} ms`);
 *   }
 * };
 * const agent = createAgentMachine({ model, tools, executor: logged });
 * ```
 */
export type Executor = (<K extends SideEffectKind>(
  effect: SideEffect<K>,
  perform: () => Promise<SideEffectOutputs[K]>,
) => Promise<SideEffectOutputs[K]>) & {
  /** The contract version the executor was written against; absent: any (it reads effects as they come). */
  readonly specificationVersion?: string | undefined;
};

/**
 * Why an executor cannot run this build's effects, or null: it declares a contract version
 * other than `EFFECT_SPECIFICATION_VERSION`. Read once, when the agent is compiled.
 */
export function executorVersionProblem(executor: Executor): string | null {
  let declared: unknown;
  try {
    declared = executor.specificationVersion;
  } catch (error) {
    return `its specificationVersion cannot be read (${(error as Error)?.message ?? String(error)})`;
  }
  if (declared === undefined || declared === EFFECT_SPECIFICATION_VERSION) return null;
  return `the executor speaks side-effect contract ${JSON.stringify(declared)}; this build of loopchart speaks ${JSON.stringify(EFFECT_SPECIFICATION_VERSION)} (a journal, worker or wrapper from another build: update it with the library)`;
}

/**
 * The default: performs every effect at once, in this process.
 *
 * @example
 * ```ts
 * const agent = createAgentMachine({ model, executor: inProcessExecutor });
 * ```
 */
export const inProcessExecutor: Executor = (_effect, perform) => perform();

/** What a host may change of an agent's machine: its executor and its clock (see `WithExecutor`). */
export interface Rewirable<Self> {
  withExecutor(wrap: (inner: Executor) => Executor): Self;
  withClock(clock: () => number): Self;
}

/**
 * Whether an option meant to be an agent machine is one a host can run (what `createAgentMachine`
 * makes: its executor can be rewired), for the factories that take one to refuse anything else
 * where it enters.
 *
 * @example
 * ```ts
 * declare const options: { machine: unknown };
 * if (!isRewirableMachine(options.machine)) throw new InvalidConfigError('machine must be an agent (createAgentMachine)');
 * ```
 */
export const isRewirableMachine = (value: unknown): boolean =>
  typeof value === 'object' && value !== null && typeof (value as { withExecutor?: unknown }).withExecutor === 'function';

/**
 * Wraps an executor: `wrap(inner)` sees every effect first and passes it on (or not).
 * The outermost wrapper is applied last: `composeExecutors(durable, traced)` traces around
 * durability.
 *
 * @example
 * ```ts
 * const executor = composeExecutors(inProcessExecutor, (inner) => async (effect, perform) => {
 *   console.log('start', effect.key);
 *   return inner(effect, perform);
 * });
 * ```
 */
export function composeExecutors(base: Executor, ...wrappers: ReadonlyArray<(inner: Executor) => Executor>): Executor {
  return wrappers.reduce<Executor>((inner, wrap) => wrap(inner), base);
}

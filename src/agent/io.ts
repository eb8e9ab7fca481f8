import { setMaxListeners } from 'node:events';
import { fromCallback } from 'xstate';
import { z } from 'zod';
import { parseModelReply, type Model, type ModelReply, type ResponseFormat, type ToolDefinition } from '../model.js';
import { withRetry, type RetryAttempt, type RetryOptions } from '../models/retry.js';
import type { CompactionReason, Message, PendingToolCall, ToolCall, ToolMessage } from '../schemas.js';
import { estimateToolTokens } from '../tokens.js';
import { runToolCalls } from '../tools/run-tools.js';
import { changedNothing, type Compactor } from '../compaction/contract.js';
import { ToolSet } from '../tools/define-tool.js';
import { parseToolArguments } from '../tools/own-arguments.js';
import type { ToolSource } from '../tools/tool-source.js';
import { listSources, plainDefinitions, resolveOffered, type ListingCache } from '../tools/offered-tools.js';
import { InvalidSnapshotError } from '../errors.js';
import { ToolDefinitionSchema } from './context.js';
import type { Executor, SideEffect, SideEffectKind, SideEffectOutputs } from './executor.js';
import { DEFAULT_OPERATION_TIMEOUT_MS, OperationError, type HookContext, type Operation, type OperationContext, type PreparedRequest } from './operation.js';
import type { OperationHook } from './operation-state.js';
import { checkOutput, messageOf, type OperationOutput, type OperationPlan } from './operation-rules.js';
import { uniqueCallIds } from './call-ids.js';
import { ToolInDoubtError, inDoubtPolicy, isInDoubtSignal, rerunsOf, startKeys, type DoubtState } from './in-doubt.js';
import { madeHere, startToken } from './start-marker.js';
import { calibrated, requestTokens } from './request-size.js';
import { PARENT_STOPPED, inScope, isAgentTool, type ChildHandle, type SubagentReport } from './subagent-scope.js';
import { routedEvent } from './subagents.js';
import { checkedGuardVerdict, runGuardrail, type GuardrailPlan, type GuardrailStage, type GuardrailVerdict } from './guardrails.js';
import { checkedVerdict, decideCall, earlierCallsOf, type ToolPolicyPlan, type ToolPolicyVerdict } from './tool-policy.js';


/**
 * The driver's IO: one long-lived child actor per agent that takes requests from the chart
 * (`sendTo`), hands each side effect to the executor, and reports back with events. Requests
 * carry the conversation by reference, never as an actor's input, so nothing of it lands in a
 * persisted snapshot; one actor for the agent's whole life means no actor per call.
 */

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
  /** The answer's format (an output schema, a model with a JSON-schema mode): sent with every model call. */
  responseFormat?: ResponseFormat | undefined;
  executor: Executor;
  /** The agent's tool policies, asked about each call before its approval rule (null: none). */
  toolPolicy: ToolPolicyPlan | null;
  /** The agent's guardrails (null: none). */
  guardrails: GuardrailPlan | null;
  /** Told when the IO stops (its run ended, or the actor stopped mid-run), with the last request's key. */
  onStop?: (lastKey: string | undefined) => void;
}

/** With handoffs: the speaking agent's instructions (instead of the agent's) and its view of the conversation. */
export interface SpeakerView {
  instructions: Message | undefined;
  present(messages: readonly Message[]): readonly Message[];
}

/** The conversation as the brain holds it: two lists, read only. */
export interface ConversationRef {
  readonly history: readonly Message[];
  readonly pending: readonly Message[];
}

/** What the chart asks of its IO. Each request's `key` is the idempotency key of its step. */
export type IoRequest =
  /** Lists the run's tool sources: its `toolset` step. */
  | { type: 'toolset'; key: string }
  /** `tools`: the run's recorded set, offered to the model. */
  /** `model`: which of the agent's models (its index) takes the call. */
  | { type: 'model'; key: string; turn: number; sessionId: string; conversation: ConversationRef; slices: Slices; tools: readonly ToolDefinition[]; model: number; speaker?: SpeakerView }
  /** Runs the operations of a hook point in list order from `from`, until one yields. */
  | {
      type: 'operation';
      key: string;
      hook: OperationHook;
      from: number;
      turn: number;
      sessionId: string;
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
      calls: readonly ToolCall[];
      batch: readonly PendingToolCall[];
      conversation: ConversationRef;
      /** Report each call's start (`io.toolStarted`); false when the chart announced them itself. */
      announce: boolean;
      /** What the run's sources listed, by its `toolset` step's key; null without sources (or in an older snapshot). */
      offered: { key: string; definitions: readonly ToolDefinition[] } | null;
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
  /** Stops everything in flight: the run no longer needs it. */
  | { type: 'abort' }
  /** A decision or a steer for a child run (an agent tool's): routed by the first part of its path. */
  | { type: 'forward'; event: { type: string; toolCallId?: string; target?: string } };

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
  /** `policy`: the tool policy's verdict for each call it was asked about, in order. */
  | { type: 'io.approvalsChecked'; key: string; waiting: string[]; policy: PolicyVerdicts }
  /** Operation `index` of the point's list returned (`output` null: it declined). */
  | { type: 'io.operated'; key: string; index: number; output: OperationOutput | null }
  | { type: 'io.guarded'; key: string; name: string; verdict: GuardrailVerdict }
  | { type: 'io.compacted'; key: string; reason: CompactionReason; output: SideEffectOutputs['compaction'] }
  /** A child run of call `callId` (an agent tool's) reports to its parent. */
  | { type: 'io.subagent'; key: string; callId: string; report: SubagentReport }
  | { type: 'io.failed'; key: string; kind: SideEffectKind; error: unknown };

// Events are trusted by identity: only objects this module created pass, so an `io.*` event
// sent from outside the agent can neither satisfy a tool call nor end a turn.
const made = new WeakSet<object>();
const trusted = <E extends IoEvent>(event: E): E => (made.add(event), event);

/** Whether an event was sent by an agent's IO actor (and not by anyone else). */
export const fromIo = (event: object): boolean => made.has(event);

/** The tool policy's verdicts of one approval check, by call, in the batch's order. */
export type PolicyVerdicts = { toolCallId: string; verdict: ToolPolicyVerdict }[];

/** The operations' state slices by name, as the driver's context holds them. */
export type Slices = Readonly<Record<string, unknown>>;

/** The context one operation is given: the shared part and its own slice. */
export const contextFor = (op: Operation, ctx: Omit<OperationContext, 'state'>, slices: Slices): OperationContext => ({
  sessionId: ctx.sessionId,
  turn: ctx.turn,
  get messages() {
    return ctx.messages;
  },
  state: Object.hasOwn(slices, op.name) ? slices[op.name] : op.state?.initial,
});

/**
 * The operations' prompt parts for this call: sent before the conversation, never stored. A
 * prompt that throws or returns anything but a string (or nothing) throws `OperationError`
 * naming the operation, for the run to fail with.
 */
export function promptParts(operations: readonly Operation[], ctx: Omit<OperationContext, 'state'>, slices: Slices): Message[] {
  return operations.flatMap((op) => {
    if (!op.prompt) return [];
    let text: unknown;
    try {
      text = op.prompt(contextFor(op, ctx, slices));
    } catch (error) {
      throw new OperationError(op.name, 'prompt', `threw: ${messageOf(error)}`, { cause: error });
    }
    if (text === undefined || text === null || text === '') return [];
    if (typeof text !== 'string') throw new OperationError(op.name, 'prompt', `returned ${describeValue(text)}, not a string`);
    return [{ role: 'system' as const, content: text }];
  });
}

const describeValue = (value: unknown): string => (Array.isArray(value) ? 'an array' : value === null ? 'null' : `a ${typeof value}`);

/**
 * Runs one hook with its own signal (the run's, or its timeout) and checks what it returned. A
 * hook that returns at once is not timed; one that returns a promise races its timeout. Throws
 * `OperationError` naming the operation.
 */
async function runHook(
  op: Operation,
  hook: OperationHook,
  run: AbortSignal,
  call: (signal: AbortSignal) => unknown,
  batch: readonly PendingToolCall[],
): Promise<OperationOutput | null> {
  const controller = new AbortController();
  const onAbort = () => controller.abort(run.reason);
  run.addEventListener('abort', onAbort, { once: true });
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    let value = call(controller.signal);
    if (value && typeof (value as { then?: unknown }).then === 'function') {
      const ms = op.timeoutMs ?? DEFAULT_OPERATION_TIMEOUT_MS;
      const timeout = new Promise<never>((_, reject) => {
        if (!Number.isFinite(ms)) return;
        timer = setTimeout(() => {
          const error = new OperationError(op.name, hook, `timed out after ${ms} ms`);
          controller.abort(error);
          reject(error);
        }, ms);
      });
      value = await Promise.race([value, timeout]);
    }
    return checkOutput(op, hook, value as never, batch);
  } catch (error) {
    if (OperationError.isInstance(error)) throw error;
    throw new OperationError(op.name, hook, `threw: ${messageOf(error)}`, { cause: error });
  } finally {
    clearTimeout(timer);
    run.removeEventListener('abort', onAbort);
  }
}

/**
 * The conversation as one list for a request, kept per agent and grown in place while the
 * brain only appends: a turn does not copy the conversation. Callers get it read-only.
 */
function conversationView(prefix: Message | undefined) {
  let history: readonly Message[] | undefined;
  let pending: readonly Message[] | undefined;
  let taken = 0;
  let view: Message[] = [];
  return ({ history: h, pending: p }: ConversationRef): readonly Message[] => {
    if (!prefix && h.length === 0) return p;
    if (!prefix && p.length === 0) return h;
    if (h !== history || p !== pending || p.length < taken) {
      view = prefix ? [prefix, ...h] : [...h];
      history = h;
      pending = p;
      taken = 0;
    }
    for (; taken < p.length; taken++) view.push(p[taken]!);
    return view;
  };
}

export function ioLogic(deps: IoDeps) {
  return fromCallback<IoRequest>(({ sendBack, receive, self }) => {
    /**
     * One controller for whatever the run has in flight; `abort` (cancel, seal) aborts it and
     * starts a new one. Work holds the controller it started under, so a late report from
     * aborted work is dropped.
     */
    let run = runController(deps.toolConcurrency);
    /**
     * Runnable tools for the run's recorded set: this process's own listing when it made it,
     * else resolved once per IO actor (see `resolveOffered`). Without sources no await at all:
     * the work keeps its timing relative to the chart's events.
     */
    let resolving: Promise<ToolSet> | undefined;
    const executables = (offered: Extract<IoRequest, { type: 'tools' }>['offered'], signal: AbortSignal): ToolSet | Promise<ToolSet> => {
      if (deps.toolSources.length === 0) return deps.tools;
      // A snapshot of an older build records no set: the sources are listed as they were then.
      if (!offered) return (resolving ??= listSources(deps.tools, deps.toolSources, signal).then(({ all }) => all));
      const cached = deps.listings.get(offered.key);
      if (cached) return cached;
      return (resolving ??= resolveOffered(deps.tools, deps.toolSources, offered.definitions, signal).then((set) => {
        deps.listings.set(offered.key, set);
        return set;
      }));
    };
    /**
     * Keys of requests in flight: a request asked for again (a restore re-issuing it) is not
     * started twice. Each holds a token: a call under the same key started as the previous one
     * ended (a fallback) is not taken off the books by the previous one's end.
     */
    const inFlight = new Map<string, object>();
    /** The start markers of 'ask' calls this IO made (see in-doubt.ts). */
    const starts = new Set<string>();
    // The conversation alone (what operations and compactors read), and as a request's messages.
    const view = conversationView(undefined);
    const requestView = conversationView(deps.instructions);
    const send = (controller: AbortController, event: IoEvent) => {
      if (!controller.signal.aborted) sendBack(trusted(event));
    };
    // One retrying model for the agent's life; each model call says where its retries are reported.
    let reportRetry: ((attempt: RetryAttempt) => void) | undefined;
    const models: readonly Model[] = deps.models.map((model) =>
      deps.retry === false
        ? model
        : withRetry(model, {
            ...deps.retry,
            onRetry: (attempt) => {
              reportRetry?.(attempt);
              if (deps.retry !== false) deps.retry.onRetry?.(attempt);
            },
          }),
    );
    const modelAt = (index: number): Model => models[index] ?? models[0]!;

    /**
     * Runs one request's work; work begins a microtask later, after the chart's current step, so
     * an event sent in the same breath (a cancel right after start) still comes first.
     */
    const start = (key: string, work: (controller: AbortController) => Promise<void>) => {
      if (inFlight.has(key)) return;
      const controller = run;
      const token = {};
      inFlight.set(key, token);
      void later(controller, () => work(controller)).finally(() => inFlight.get(key) === token && inFlight.delete(key));
    };
    const execute = <K extends SideEffectKind>(
      effect: SideEffect<K>,
      perform: () => Promise<SideEffectOutputs[K]>,
    ): Promise<SideEffectOutputs[K]> => deps.executor(effect, perform);
    /** A request's last word: it is no longer in flight by the time the chart hears it. */
    const finish = (controller: AbortController, key: string, event: IoEvent) => {
      inFlight.delete(key);
      send(controller, event);
    };
    const fail = (controller: AbortController, key: string, kind: SideEffectKind, error: unknown) =>
      finish(controller, key, { type: 'io.failed', key, kind, error });

    /**
     * Tool batches by key. A batch may be asked for more than once (a decision makes calls
     * runnable while others still run, a restore re-issues it): each call runs once, and no more
     * than `toolConcurrency` of a batch run at a time.
     */
    const batches = new Map<
      string,
      { controller: AbortController; started: Set<string>; queue: { call: ToolCall; announce: boolean }[]; next: number; active: number }
    >();
    const runTools = (request: Extract<IoRequest, { type: 'tools' }>) => {
      const { key, turn } = request;
      let batch = batches.get(key);
      if (!batch) {
        // One batch at a time: a new one means the chart is done with the others.
        batches.clear();
        const controller = run;
        batch = { controller, started: new Set(), queue: [], next: 0, active: 0 };
        batches.set(key, batch);
      }
      const current = batch;
      const { controller } = current;
      for (const call of request.calls) {
        if (current.started.has(call.id)) continue;
        current.started.add(call.id);
        current.queue.push({ call, announce: request.announce });
      }
      const runOne = async (call: ToolCall, announce: boolean): Promise<ToolMessage | undefined> => {
        await null; // after the chart's current step, as every request (see `start`)
        if (controller.signal.aborted) return undefined;
        if (announce) send(controller, { type: 'io.toolStarted', key, call });
        const callKey = `${key}:${call.id}`;
        const report = (report: SubagentReport) => send(controller, { type: 'io.subagent', key, callId: call.id, report });
        const adopt = (child: ChildHandle) => (children.set(call.id, child), () => children.get(call.id) === child && children.delete(call.id));
        // An 'ask' tool's start is journaled first: a start this IO did not make is an earlier process's, so the call is in doubt.
        const keys = inDoubtPolicy(deps.tools.get(call.name)) === 'ask' ? startKeys(callKey, rerunsOf(request.doubt, call.id)) : null;
        const fresh = !keys || madeHere(starts, await execute({ key: keys.marker, kind: 'toolStart', input: { turn, call, batchKey: key }, signal: controller.signal }, async () => startToken(starts)));
        const runsAgent = isAgentTool(deps.tools.get(call.name));
        return inScope({ sessionId: request.sessionId, callId: call.id, parent: self, report, adopt, runsAgent }, () => execute(
          { key: keys?.step ?? callKey, kind: 'tool', input: { turn, call, batchKey: key }, signal: controller.signal },
          async () => {
            if (!fresh) throw new ToolInDoubtError(call.id);
            const listed = executables(request.offered, controller.signal);
            const tools = listed instanceof ToolSet ? listed : await listed;
            return (await runToolCalls([{ call }], tools, { signal: controller.signal, idempotencyKey: () => callKey }))[0]!;
          },
        ));
      };
      const pump = () => {
        while (current.active < deps.toolConcurrency && current.next < current.queue.length && !controller.signal.aborted) {
          const { call, announce } = current.queue[current.next++]!;
          current.active++;
          runOne(call, announce).then(
            (result) => {
              // Off the books before the chart hears it: the call is no longer in flight.
              current.active--;
              if (result) send(controller, { type: 'io.toolFinished', key, call, result });
              pump();
            },
            (error) => {
              current.active--;
              // In doubt: the chart waits for a person; a decision to run it again hands it over anew.
              if (!isInDoubtSignal(error)) return fail(controller, key, 'tool', error);
              current.started.delete(call.id);
              send(controller, { type: 'io.toolInDoubt', key, call });
              pump();
            },
          );
        }
      };
      pump();
    };

    /** Running children of this run's calls (agent tools), by call id. */
    const children = new Map<string, ChildHandle>();
    /** Aborts what is in flight, and only that: a finished call's signal never fires later. */
    const abortRun = (reason?: unknown) => {
      const busy = inFlight.size > 0 || [...batches.values()].some((batch) => batch.active > 0 || batch.next < batch.queue.length);
      inFlight.clear();
      batches.clear();
      if (!busy) return;
      run.abort(reason);
      run = runController(deps.toolConcurrency);
    };

    /** One call's policy decision, as a side effect: a durable executor records it, a restore replays it. */
    const policyVerdict = async (
      plan: ToolPolicyPlan,
      request: Extract<IoRequest, { type: 'approvals' }>,
      call: ToolCall,
      signal: AbortSignal,
    ): Promise<ToolPolicyVerdict> => {
      const key = `${request.key}:${call.id}:policy`;
      const { turn, sessionId, conversation } = request;
      const output = await execute({ key, kind: 'policy', input: { turn, call }, signal }, () =>
        decideCall(plan, { call, sessionId, turn, messages: view(conversation), earlierCalls: earlierCallsOf(conversation.pending, call.id) }, signal),
      );
      return checkedVerdict(key, output);
    };

    let received = false;
    let lastKey: string | undefined;
    receive((request) => {
      // A child run created with this actor as its parent reports its end here: its tool call hears it.
      if (request.type.startsWith('xstate.')) return;
      received = true;
      if (request.type !== 'abort' && request.type !== 'forward') lastKey = request.key;
      switch (request.type) {
        case 'abort':
          abortRun();
          return;
        case 'forward': {
          const routed = routedEvent(request.event);
          if (routed) children.get(routed.callId)?.send(routed.event);
          return;
        }
        case 'toolset':
          return start(request.key, async (controller) => {
            const { key } = request;
            const signal = controller.signal;
            try {
              const output = await execute({ key, kind: 'toolset', input: { sources: deps.toolSources.length }, signal }, async () => {
                const { all, listed } = await listSources(deps.tools, deps.toolSources, signal);
                deps.listings.set(key, all);
                return { definitions: plainDefinitions(listed) };
              });
              finish(controller, key, { type: 'io.listed', key, output: checkedToolset(key, output) });
            } catch (error) {
              fail(controller, key, 'toolset', error);
            }
          });
        case 'model':
          return start(request.key, async (controller) => {
            const { key, turn, sessionId, speaker } = request;
            const signal = controller.signal;
            try {
              const ctx = {
                sessionId,
                turn,
                get messages() {
                  return speaker ? speaker.present(view(request.conversation)) : view(request.conversation);
                },
              };
              const request_ = speaker
                ? prepareRequest({ ...deps, instructions: speaker.instructions }, request.tools, ctx, request.slices)
                : deps.operations.list.length
                  ? prepareRequest(deps, request.tools, ctx, request.slices)
                  : { messages: requestView(request.conversation) as Message[], tools: request.tools as PreparedRequest['tools'] };
              let index = 0;
              reportRetry = (attempt) => {
                index = 0;
                send(controller, { type: 'io.retry', key, turn, ...attempt });
              };
              const model = modelAt(request.model);
              const raw = await execute({ key, kind: 'model', input: { turn, request: request_, model: deps.models[request.model]?.name ?? model.name }, signal }, () =>
                model.generate({
                  ...request_,
                  ...(deps.responseFormat && { responseFormat: deps.responseFormat }),
                  signal,
                  idempotencyKey: key,
                  onTextDelta: (delta) => send(controller, { type: 'io.textDelta', key, turn, delta, index: index++ }),
                }),
              );
              const reply = uniqueCallIds(parseModelReply(raw));
              finish(controller, key, { type: 'io.replied', key, reply });
            } catch (error) {
              fail(controller, key, 'model', error);
            }
          });
        case 'tools':
          return runTools(request);
        case 'operation':
          return start(request.key, async (controller) => {
            const { key, hook, turn, sessionId, reply, batch } = request;
            const list = deps.operations.at[hook];
            const ctx = {
              sessionId,
              turn,
              get messages() {
                return view(request.conversation);
              },
            };
            for (let index = request.from; index < list.length; index++) {
              const op = list[index]!;
              const hookCtx = (signal: AbortSignal): HookContext => Object.assign(contextFor(op, ctx, request.slices), { signal });
              let output: OperationOutput | null;
              try {
                output = await execute(
                  { key: `${key}:${op.name}`, kind: 'operation', input: { turn, operation: op.name, hook, pointKey: key }, signal: controller.signal },
                  () =>
                    runHook(
                      op,
                      hook,
                      controller.signal,
                      (signal) =>
                        hook === 'beforeModelCall'
                          ? op.beforeModelCall!(hookCtx(signal))
                          : hook === 'afterReply'
                            ? op.afterReply!(reply!, hookCtx(signal))
                            : op.beforeTools!(batch, hookCtx(signal)),
                      batch,
                    ),
                );
              } catch (error) {
                if (controller.signal.aborted) return sendBack(trusted({ type: 'io.failed', key, kind: 'operation', error }));
                // Whatever failed on the way (the hook, an executor around it) fails the run naming the operation.
                const named = OperationError.isInstance(error) ? error : new OperationError(op.name, hook, `failed: ${messageOf(error)}`, { cause: error });
                return fail(controller, key, 'operation', named);
              }
              // Cancelled while it ran: what it returned is still reported (a cancelling run keeps its state).
              if (controller.signal.aborted) return sendBack(trusted({ type: 'io.operated', key, index, output }));
              const last = index === list.length - 1 || output?.yield !== undefined;
              if (last) return finish(controller, key, { type: 'io.operated', key, index, output });
              send(controller, { type: 'io.operated', key, index, output });
            }
          });
        case 'approvals':
          return start(request.key, async (controller) => {
            const { key, turn, sessionId } = request;
            try {
              const waiting: string[] = [];
              const policy: PolicyVerdicts = [];
              for (const call of request.calls) {
                // The tool policy first: a denial or a needs-approval ends the call's check.
                const verdict = deps.toolPolicy && (await policyVerdict(deps.toolPolicy, request, call, controller.signal));
                if (verdict) policy.push({ toolCallId: call.id, verdict });
                if (verdict?.type === 'needs-approval') waiting.push(call.id);
                if (verdict && verdict.type !== 'allow') continue;
                // Only the agent's own tools may need approval (a source's may not, see `listSources`).
                const tool = deps.tools.get(call.name);
                const rule = tool?.needsApproval;
                if (!tool || rule === undefined || rule === false) continue;
                if (rule === true) {
                  waiting.push(call.id);
                  continue;
                }
                // Arguments the tool would reject never run, so they need no approval: the runner reports them.
                const args = parseToolArguments(tool, call.args);
                if (!args.success) continue;
                const asks = await execute(
                  { key: `${key}:${call.id}:approval`, kind: 'approval', input: { turn, call }, signal: controller.signal },
                  async () => Boolean(await rule(args.data, { toolCallId: call.id, sessionId })),
                );
                if (asks) waiting.push(call.id);
              }
              finish(controller, key, { type: 'io.approvalsChecked', key, waiting, policy });
            } catch (error) {
              fail(controller, key, 'approval', error);
            }
          });
        case 'guardrails':
          return start(request.key, async (controller) => {
            const { key, stage, turn, sessionId, text, output } = request;
            const messages = view(request.conversation);
            const input = { stage, sessionId, text, messages, ...(output !== undefined && { output }) };
            // In parallel; the first failure fails the check (the chart stops listening to the rest).
            await Promise.all(
              request.names.map(async (name) => {
                const guardrail = deps.guardrails!.byName.get(name)!;
                try {
                  const output = await execute(
                    { key: `${key}:${name}`, kind: 'guardrail', input: { turn, stage, guardrail: name, checkKey: key }, signal: controller.signal },
                    () => runGuardrail(guardrail, input, controller.signal),
                  );
                  send(controller, { type: 'io.guarded', key, name, verdict: checkedGuardVerdict(name, stage, output) });
                } catch (error) {
                  fail(controller, key, 'guardrail', error);
                }
              }),
            );
          });
        case 'compaction':
          return start(request.key, async (controller) => {
            const { key, turn, reason, tokensBefore, systemTokens, contextWindow } = request;
            const signal = controller.signal;
            try {
              const messages = view(request.conversation);
              const definitions = request.tools;
              const output = await execute(
                { key, kind: 'compaction', input: { turn, reason, messages, tokensBefore }, signal },
                async () => {
                  reportRetry = undefined; // a summary call's retries are not the turn's
                  const result = deps.compactor
                    ? await deps.compactor({
                        messages,
                        reason,
                        tokensBefore,
                        contextWindow,
                        tools: definitions,
                        idempotencyKey: key,
                        model: modelAt(request.model),
                        signal,
                      })
                    : null;
                  if (!result) return { before: tokensBefore, after: tokensBefore };
                  // The same measure as the `before` side: the whole next request (system parts and
                  // tool definitions included); the compactor's own count may raise it, never lower it.
                  const measured = requestTokens({ system: systemTokens, messages: result.messages, tools: definitions });
                  const after = calibrated(measured, result.tokensAfter + estimateToolTokens(definitions) + systemTokens);
                  return { before: tokensBefore, after, messages: result.messages };
                },
              );
              finish(controller, key, { type: 'io.compacted', key, reason, output });
            } catch (error) {
              // A compactor that failed without touching the conversation changed nothing: the brain's
              // stall rule decides (a threshold pass that still fits defers, otherwise CompactionStalled).
              if (!changedNothing(error)) return fail(controller, key, 'compaction', error);
              finish(controller, key, { type: 'io.compacted', key, reason, output: { before: tokensBefore, after: tokensBefore } });
            }
          });
      }
    });
    // A restored agent waits for IO that no one started: when no request came with this actor's
    // start (a fresh agent's first one is already in the mailbox), say so, and the chart re-issues
    // what it waits for with the same keys.
    queueMicrotask(() => {
      if (!received) sendBack(trusted({ type: 'io.attached' }));
    });
    return () => {
      abortRun(PARENT_STOPPED);
      deps.onStop?.(lastKey);
    };
  });
}

/**
 * The controller of a run's IO. Every call of a batch listens to its signal at once (each tool
 * call runs with it), so Node's leak warning would fire past ten concurrent calls: the limit is
 * what the run may really have in flight.
 */
function runController(toolConcurrency: number): AbortController {
  const controller = new AbortController();
  setMaxListeners(toolConcurrency * 2 + 10, controller.signal);
  return controller;
}

/** Runs `work` a microtask from now, unless the request was aborted by then. */
async function later(controller: AbortController, work: () => Promise<void>): Promise<void> {
  await null;
  if (!controller.signal.aborted) await work();
}

/** The request for one model call: instructions and prompt parts first, then the operations' rewrites. */
function prepareRequest(deps: IoDeps, tools: readonly ToolDefinition[], ctx: Omit<OperationContext, 'state'>, slices: Slices): PreparedRequest {
  const parts = promptParts(deps.operations.list, ctx, slices);
  let request: PreparedRequest = {
    messages: [...(deps.instructions ? [deps.instructions] : []), ...parts, ...ctx.messages],
    tools: [...tools],
  };
  for (const op of deps.operations.list) {
    if (!op.prepareRequest) continue;
    let rewritten: unknown;
    try {
      rewritten = op.prepareRequest(request, contextFor(op, ctx, slices));
    } catch (error) {
      throw new OperationError(op.name, 'prepareRequest', `threw: ${messageOf(error)}`, { cause: error });
    }
    if (rewritten === undefined) continue;
    const shape = rewritten as Partial<PreparedRequest> | null;
    if (!shape || typeof shape !== 'object' || !Array.isArray(shape.messages) || !Array.isArray(shape.tools)) {
      throw new OperationError(op.name, 'prepareRequest', `returned ${describeValue(rewritten)} without messages and tools arrays`);
    }
    request = shape as PreparedRequest;
  }
  return request;
}

const ToolsetOutputSchema = z.object({ definitions: z.array(ToolDefinitionSchema) });

/** A toolset step's output, checked: an executor may answer it from a journal written elsewhere. */
function checkedToolset(key: string, output: unknown): SideEffectOutputs['toolset'] {
  const parsed = ToolsetOutputSchema.safeParse(output);
  if (!parsed.success) throw new InvalidSnapshotError(`toolset step ${key}: ${z.prettifyError(parsed.error)}`);
  return parsed.data;
}

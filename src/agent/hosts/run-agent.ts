import { randomUUID } from 'node:crypto';
import { createActor, type AnyEventObject } from 'xstate';
import { createAgentMachine, type AgentActor, type AgentMachine } from '../../../machines/agent.machine.js';
import { type AgentEmitted, type AgentOutput } from '../protocol/actor-types.js';
import { AGENT_CONFIG_KEYS, type AgentConfig } from '../core/config.js';
import { checkKnownKeys, optionKeys } from '../../known-keys.js';
import { InvalidConfigError, LoopchartError, RunFailedError } from '../../errors.js';
import type { Usage } from '../../model.js';
import type { Message } from '../../schemas.js';
import type { AgentOutcome } from '../protocol/failure.js';
import type { OutputOf, OutputSchema } from '../structured-output/structured-output.js';
import { answerWaits, type UnattendedOptions } from './unattended.js';
import { inputRefusal } from '../core/actor-input.js';

/**
 * One run of an agent, without XState: the agent's configuration (`model`, `tools`,
 * `instructions` — the system prompt, sent on every call and never stored — ...) plus what to ask
 * and how to stop it.
 */
export interface RunAgentOptions<S extends OutputSchema | undefined = OutputSchema | undefined> extends AgentConfig, UnattendedOptions {
  /** The final answer's schema (see `AgentConfig.output`): the result's `output` has its type. */
  output?: S | undefined;
  /** The user's message that starts the run. */
  prompt: string;
  /** Conversation to continue from (committed messages of an earlier run). */
  history?: Message[] | undefined;
  /** Whose run this is (a user, a resource, a team): the memory scope its operations and tools are told (see `AgentInput.scope`). */
  scope?: string | undefined;
  /** Aborting it cancels the run: in-flight model and tool calls are aborted, the outcome is `Cancelled`. */
  signal?: AbortSignal | undefined;
}

/** How a run ended; `O` is the output schema's type (see `AgentConfig.output`). */
export interface RunAgentResult<out O = unknown> {
  /** The final answer when the run is `Completed`, else ''. */
  text: string;
  /** The validated answer of a `Completed` run with an output schema (also `outcome.output`), else undefined. */
  output: O | undefined;
  outcome: AgentOutcome<O>;
  /** The committed conversation after the run (history + this run), always coherent. */
  messages: Message[];
  usage: Usage;
  /** The run's cost, when the config gives prices. */
  costUsd?: number | undefined;
  /** With a list of models: what each model used (and cost), in order of first use. */
  usageByModel?: AgentOutput['usageByModel'] | undefined;
  /**
   * Why the run failed, when `outcome.type` is `Failed`: the typed error itself (a `ModelError`
   * with its `status`, an `OperationError`...), or a `RunFailedError` whose `cause` is what a
   * custom model or tool threw. Its `message` is the one line to show: the cause and what to check.
   */
  error?: LoopchartError | undefined;
}

/** What `streamAgent` yields: every event the agent emits while it runs, then `done` with the result. */
export type AgentStreamEvent<O = unknown> = AgentEmitted | { type: 'done'; result: RunAgentResult<O> };

/**
 * The run's actor, the last error its side effects failed with (what a Failed outcome came from),
 * and the function that stops answering its waits (see unattended.ts), for when the run is over.
 */
/** What `runAgent` and `streamAgent` take besides the agent config. */
const RUN_KEYS = optionKeys<Omit<RunAgentOptions, keyof AgentConfig>>()({ prompt: true, history: true, scope: true, signal: true, approve: true, approveTimeoutMs: true });
const RUN_AGENT_KEYS = [...AGENT_CONFIG_KEYS, ...RUN_KEYS];

function startRun(options: RunAgentOptions, where: 'runAgent' | 'streamAgent'): { actor: AgentActor; lastFailure: () => unknown; stopAnswering: () => void } {
  // Strict, over the config and the run's own options together (`promt` → "prompt").
  checkKnownKeys(options, RUN_AGENT_KEYS, where);
  // Without a prompt the actor would wait for an input nobody can send: the run would never settle.
  if (options.prompt === undefined) throw new InvalidConfigError(`${where}: prompt is required (the user's message that starts the run)`);
  const { prompt, history, scope, signal, approve, approveTimeoutMs, ...config } = options;
  let failure: unknown;
  // What a side effect failed with (the outcome keeps its message only): read from the events the
  // machine takes, not through XState's inspection, which would describe every step of the run.
  const machine = withEventsSeen(createAgentMachine(config), (event) => {
    if (event.type === 'io.failed') failure = (event as { error?: unknown }).error;
  });
  const actor = createActor(machine, { input: { sessionId: oneRunSessionId(), prompt, ...(history && { history }), ...(scope !== undefined && { scope }) } });
  // An answer that never validated: the run's error is the StructuredOutputError itself.
  actor.on('output.rejected', (event) => (failure = event.error));
  // A guardrail that tripped: its GuardrailTrippedError (name, stage, info).
  actor.on('guardrail.tripped', (event) => (failure = event.error));
  // Nobody else holds this actor: a call that needs approval is put to `approve`, a yield is sealed.
  const stopAnswering = answerWaits(actor, { approve, approveTimeoutMs });
  // Input the actor refused (it ended at once, Failed(InvalidInput)): the error is its InvalidFeedError.
  return { actor, lastFailure: () => failure ?? inputRefusal(actor.getSnapshot().context), stopAnswering };
}

/**
 * The session id of one `runAgent` or `streamAgent` run: its own, so its idempotency keys
 * (`<session>:run-1:turn-1:model`, a tool's `ctx.idempotencyKey`, what `mcpTools` and an
 * OpenAI-compatible provider are sent) are its own. With the actor's default, `session`, every run
 * sent the same keys, and an API that deduplicates by them answered a second, unrelated run (another
 * user's charge, another question) with the first one's result. Such a run is never restored, so
 * nothing needs its key again after it ends.
 */
const oneRunSessionId = (): string => `runagent-${randomUUID()}`;

/** The machine, with `seen` told of each event before its transition runs. */
function withEventsSeen(machine: AgentMachine, seen: (event: AnyEventObject) => void): AgentMachine {
  const transition: AgentMachine['transition'] = (snapshot, event, scope) => {
    seen(event);
    return machine.transition(snapshot, event, scope);
  };
  return new Proxy(machine, { get: (target, key, receiver) => (key === 'transition' ? transition : Reflect.get(target, key, receiver)) });
}

/** Cancels the run when `signal` aborts; returns the detach function. */
function cancelOnAbort(actor: AgentActor, signal: AbortSignal | undefined): () => void {
  if (!signal) return () => {};
  const cancel = () => actor.send({ type: 'cancel' });
  if (signal.aborted) {
    cancel();
    return () => {};
  }
  signal.addEventListener('abort', cancel, { once: true });
  return () => signal.removeEventListener('abort', cancel);
}

function resultOf(output: AgentOutput, thrown: unknown): RunAgentResult {
  const result: RunAgentResult = {
    text: output.outcome.type === 'Completed' ? output.outcome.finalText : '',
    output: output.outcome.type === 'Completed' ? output.outcome.output : undefined,
    outcome: output.outcome,
    messages: output.messages,
    usage: output.usage,
    ...(output.costUsd !== undefined && { costUsd: output.costUsd }),
    ...(output.usageByModel && { usageByModel: output.usageByModel }),
  };
  if (output.outcome.type !== 'Failed') return result;
  const failure = output.outcome.error;
  // The thrown error is the outcome's cause only when the outcome says so (a compaction that
  // stalled after a retried failure is its own cause).
  const caused = thrown instanceof Error && thrown.message === failure.message;
  const error = caused && LoopchartError.isInstance(thrown) ? thrown : new RunFailedError(failure, caused ? { cause: thrown } : undefined);
  return { ...result, error };
}

/**
 * Settles with the actor's output, or null once it is stopped before its end (a stream's consumer
 * that left: its cancel may still be taking the calls' results when the stream stops the actor),
 * or rejects with what stopped it (an actor error).
 */
function outputOf(actor: AgentActor): Promise<AgentOutput | null> {
  return new Promise((resolve, reject) => {
    actor.subscribe({
      complete: () => {
        const snapshot = actor.getSnapshot();
        resolve(snapshot.status === 'done' ? (snapshot.output as AgentOutput) : null);
      },
      error: reject,
    });
  });
}

/**
 * Runs an agent on one prompt to its end and resolves with the answer, the outcome, the
 * conversation and the token usage. A thin layer over `createAgentMachine` + XState's
 * `createActor`: every rule of the agent machine applies. It never rejects for how the run
 * ended (a failed model call is `outcome.type === 'Failed'`, with the typed error in `error`);
 * it rejects only for a bad configuration.
 *
 * @example
 * ```ts
 * import { runAgent, defineTool, openAICompatibleModel } from 'loopchart';
 * import { z } from 'zod';
 *
 * const add = defineTool({
 *   name: 'add',
 *   description: 'Adds two numbers.',
 *   input: z.object({ a: z.number(), b: z.number() }),
 *   execute: ({ a, b }) => a + b,
 * });
 * const { text, outcome, usage } = await runAgent({
 *   model: openAICompatibleModel({ baseURL: 'http://localhost:11434/v1', model: 'qwen3' }),
 *   tools: [add],
 *   instructions: 'You are a careful calculator.',
 *   prompt: 'What is 2 + 3?',
 *   signal: AbortSignal.timeout(60_000),
 * });
 * console.log(outcome.type, text, usage.inputTokens + usage.outputTokens);
 * // A Failed run: `error` says why in one line (here a 401 names the API key to check).
 * ```
 */
export async function runAgent<S extends OutputSchema | undefined = undefined>(options: RunAgentOptions<S>): Promise<RunAgentResult<OutputOf<S>>> {
  const { actor, lastFailure, stopAnswering } = startRun(options, 'runAgent');
  const output = outputOf(actor);
  actor.start();
  const detach = cancelOnAbort(actor, options.signal);
  try {
    // Never null here: only the `finally` below stops the actor.
    return resultOf((await output)!, lastFailure()) as RunAgentResult<OutputOf<S>>;
  } finally {
    detach();
    stopAnswering();
    actor.stop();
  }
}

/**
 * The same run as `runAgent`, as an async iterable of its events while it goes: `text.delta`,
 * `tool.started`, `tool.finished`, `turn.finished`, ... and last `done` with the result.
 * Leaving the loop early (`break`, `return`, a throw) cancels the run.
 *
 * @example
 * ```ts
 * import { streamAgent } from 'loopchart';
 *
 * for await (const event of streamAgent({ model, tools, prompt: 'What is in this folder?' })) {
 *   if (event.type === 'text.delta') process.stdout.write(event.delta);
 *   if (event.type === 'tool.started') console.log(`\n→ ${event.call.name}`);
 *   if (event.type === 'done') console.log(`\n${event.result.outcome.type}`);
 * }
 * ```
 */
export async function* streamAgent<S extends OutputSchema | undefined = undefined>(
  options: RunAgentOptions<S>,
): AsyncGenerator<AgentStreamEvent<OutputOf<S>>, void, undefined> {
  const { actor, lastFailure, stopAnswering } = startRun(options, 'streamAgent');
  const queue: AgentStreamEvent<OutputOf<S>>[] = [];
  let wake: (() => void) | undefined;
  let failure: { error: unknown } | undefined;
  let finished = false;
  const notify = () => {
    wake?.();
    wake = undefined;
  };
  // Listen before start(): the run begins on entry.
  actor.on('*', (event) => {
    queue.push(event as AgentEmitted);
    notify();
  });
  outputOf(actor).then(
    (output) => {
      if (output) queue.push({ type: 'done', result: resultOf(output, lastFailure()) as RunAgentResult<OutputOf<S>> });
      finished = true;
      notify();
    },
    (error: unknown) => {
      failure = { error };
      notify();
    },
  );
  actor.start();
  const detach = cancelOnAbort(actor, options.signal);
  try {
    for (;;) {
      const event = queue.shift();
      if (event) {
        yield event;
        if (event.type === 'done') return;
        continue;
      }
      if (failure) throw failure.error;
      if (finished) return;
      await new Promise<void>((resolve) => (wake = resolve));
    }
  } finally {
    detach();
    stopAnswering();
    // A consumer that left early: cancel the run so its tools and model call are aborted.
    if (actor.getSnapshot().status === 'active') actor.send({ type: 'cancel' });
    actor.stop();
  }
}

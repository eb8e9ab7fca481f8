import { createActor } from 'xstate';
import { createAgentMachine, type AgentActor, type AgentEmitted, type AgentOutput } from '../machines/agent.machine.js';
import type { AgentConfig } from './agent/config.js';
import type { Usage } from './model.js';
import type { Message, Outcome } from './schemas.js';

/**
 * One run of an agent, without XState: the agent's configuration (`model`, `tools`,
 * `instructions` — the system prompt, sent on every call and never stored — ...) plus what to ask
 * and how to stop it.
 */
export interface RunAgentOptions extends AgentConfig {
  /** The user's message that starts the run. */
  prompt: string;
  /** Conversation to continue from (committed messages of an earlier run). */
  history?: Message[];
  /** Aborting it cancels the run: in-flight model and tool calls are aborted, the outcome is `Cancelled`. */
  signal?: AbortSignal;
}

/** How a run ended. */
export interface RunAgentResult {
  /** The final answer when the run is `Completed`, else ''. */
  text: string;
  outcome: Outcome;
  /** The committed conversation after the run (history + this run), always coherent. */
  messages: Message[];
  usage: Usage;
}

/** What `streamAgent` yields: every event the agent emits while it runs, then `done` with the result. */
export type AgentStreamEvent = AgentEmitted | { type: 'done'; result: RunAgentResult };

function startRun(options: RunAgentOptions): AgentActor {
  const { prompt, history, signal, ...config } = options;
  return createActor(createAgentMachine(config), { input: { prompt, ...(history && { history }) } });
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

const resultOf = (output: AgentOutput): RunAgentResult => ({
  text: output.outcome.type === 'Completed' ? output.outcome.finalText : '',
  outcome: output.outcome,
  messages: output.messages,
  usage: output.usage,
});

/** Settles with the actor's output, or rejects with what stopped it (an actor error). */
function outputOf(actor: AgentActor): Promise<AgentOutput> {
  return new Promise((resolve, reject) => {
    actor.subscribe({
      complete: () => resolve(actor.getSnapshot().output as AgentOutput),
      error: reject,
    });
  });
}

/**
 * Runs an agent on one prompt to its end and resolves with the answer, the outcome, the
 * conversation and the token usage. A thin layer over `createAgentMachine` + XState's
 * `createActor`: every rule of the agent machine applies. It never rejects for how the run
 * ended (a failed model call is `outcome.type === 'Failed'`); it rejects only for a bad
 * configuration.
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
 * ```
 */
export async function runAgent(options: RunAgentOptions): Promise<RunAgentResult> {
  const actor = startRun(options);
  const output = outputOf(actor);
  actor.start();
  const detach = cancelOnAbort(actor, options.signal);
  try {
    return resultOf(await output);
  } finally {
    detach();
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
export async function* streamAgent(options: RunAgentOptions): AsyncGenerator<AgentStreamEvent, void, undefined> {
  const actor = startRun(options);
  const queue: AgentStreamEvent[] = [];
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
      queue.push({ type: 'done', result: resultOf(output) });
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
    // A consumer that left early: cancel the run so its tools and model call are aborted.
    if (actor.getSnapshot().status === 'active') actor.send({ type: 'cancel' });
    actor.stop();
  }
}

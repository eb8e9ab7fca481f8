import { outputOf } from '../../src/agent/protocol/actor-types.js';
/**
 * Helpers for the driver's end-to-end tests (machines/agent.machine.ts): running an actor to its
 * end, waiting for states, recording models, gated tools, and the provider-validity check shared
 * with the brain tests.
 */
import { waitFor, type InspectionEvent } from 'xstate';
import { z } from 'zod';
import type { AgentActor } from '../../machines/agent.machine.js';
import type { AgentOutput } from '../../src/agent/protocol/actor-types.js';
import type { Model, ModelReply, ModelRequest } from '../../src/model.js';
import type { Message, ToolMessage } from '../../src/schemas.js';
import { defineTool, type Tool } from '../../src/tools/define-tool.js';
import { deferred } from './deferred.js';

export { providerValid, allCallsAnswered } from './brain.js';
export { incoherence } from '../../src/brain/conversation.js';
export { deferred };

/** Generous upper bound for anything a test waits for; a hang fails the test instead of stalling it. */
export const WAIT_MS = 5_000;

export const tick = (ms = 0) => new Promise<void>((r) => setTimeout(r, ms));

/** Resolves after `ms`, or rejects with the signal's reason as soon as it aborts. */
export function sleepOrAbort(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

/** Starts a single-run actor (if needed) and resolves with its output once it is done. */
export async function runToCompletion(actor: AgentActor): Promise<AgentOutput> {
  actor.start();
  const snapshot = await waitFor(actor, (s) => s.status !== 'active', { timeout: WAIT_MS });
  if (snapshot.status !== 'done') {
    throw new Error(`actor ended with status ${snapshot.status}: ${String((snapshot as { error?: unknown }).error)}`);
  }
  return snapshot.output!;
}

/** Waits until a session actor is Idle again after its `run`-th run, and returns that run's output. */
export async function runFinished(actor: AgentActor, run: number): Promise<AgentOutput> {
  const snapshot = await waitFor(
    actor,
    (s) => s.status !== 'active' || (s.matches('Idle') && s.context.runIndex >= run),
    { timeout: WAIT_MS },
  );
  if (snapshot.status !== 'active') {
    throw new Error(`session actor ended with status ${snapshot.status}: ${String((snapshot as { error?: unknown }).error)}`);
  }
  return outputOf(snapshot.context)!;
}

/** Sends one input to a session actor and waits for that run's output. */
export async function runInSession(actor: AgentActor, message: string): Promise<AgentOutput> {
  const run = actor.getSnapshot().context.runIndex + 1;
  actor.send({ type: 'input', message });
  return runFinished(actor, run);
}

/** Waits until the driver is in `Running.<state>` (optionally with the brain at `turnsTaken`). */
export function waitForRunning(
  actor: AgentActor,
  state: 'AwaitingModel' | 'AwaitingTools' | 'AwaitingCompaction',
  turnsTaken?: number,
) {
  return waitFor(
    actor,
    (s) => {
      if (s.status !== 'active') throw new Error(`actor is ${s.status} while waiting for ${state}`);
      return s.matches({ Running: state }) && (turnsTaken === undefined || s.context.brain.context.turnsTaken === turnsTaken);
    },
    { timeout: WAIT_MS },
  );
}

/** What a model call saw, copied at call time. */
export interface SeenRequest {
  messages: Message[];
  toolNames: string[];
  idempotencyKey: string;
  signal: AbortSignal;
}

/** Wraps a model and records every request it gets (the retry wrapper sits outside it). */
export function recording(inner: Model): Model & { seen: SeenRequest[] } {
  const seen: SeenRequest[] = [];
  return {
    name: inner.name,
    seen,
    generate(request: ModelRequest): Promise<ModelReply> {
      seen.push({
        messages: structuredClone([...request.messages]),
        toolNames: request.tools.map((t) => t.name),
        idempotencyKey: request.idempotencyKey,
        signal: request.signal,
      });
      return inner.generate(request);
    },
  };
}

/**
 * A model whose calls can be held: after `hold(when?)`, a call whose request matches `when` waits
 * until `release()` or until its signal aborts (then it rejects with an AbortError). `hold` returns a
 * promise that resolves when the first held call arrives. Requests are recorded on arrival, held or not.
 */
export function holdable(inner: Model) {
  const state = {
    when: null as ((request: ModelRequest) => boolean) | null,
    waiting: [] as Array<() => void>,
    entered: deferred(),
  };
  const holding: Model = {
    name: inner.name,
    async generate(request) {
      if (state.when?.(request)) {
        const entered = state.entered;
        await new Promise<void>((resolve, reject) => {
          const onAbort = () => {
            const error = new Error('aborted while held');
            error.name = 'AbortError';
            reject(error);
          };
          if (request.signal.aborted) return onAbort();
          request.signal.addEventListener('abort', onAbort, { once: true });
          state.waiting.push(() => {
            request.signal.removeEventListener('abort', onAbort);
            resolve();
          });
          entered.resolve();
        });
      }
      return inner.generate(request);
    },
  };
  const model = recording(holding);
  return {
    model: model as Model,
    seen: model.seen,
    hold(when: (request: ModelRequest) => boolean = () => true): Promise<void> {
      state.when = when;
      state.entered = deferred();
      return state.entered.promise;
    },
    release() {
      state.when = null;
      for (const go of state.waiting.splice(0)) go();
    },
  };
}

/** How many assistant messages a request carries: turn N's request has N - 1 of them in a fresh run. */
export const assistantCount = (request: { messages: readonly Message[] }) =>
  request.messages.filter((m) => m.role === 'assistant').length;

/** `add(a, b)`: a real tool with a zod schema. */
export const addTool = defineTool({
  name: 'add',
  description: 'Adds two numbers',
  input: z.object({ a: z.number(), b: z.number() }),
  execute: ({ a, b }) => String(a + b),
});

/** `echo(text)` returns its text. */
export const echoTool = defineTool({
  name: 'echo',
  description: 'Returns its text',
  input: z.object({ text: z.string() }),
  execute: ({ text }) => text,
});

/**
 * `wait(ms, label)`: sleeps `ms` honouring its signal, counting executions and concurrency, and
 * recording the signals and idempotency keys it was given.
 */
export function waitTool(name = 'wait') {
  const stats = {
    active: 0,
    maxActive: 0,
    started: [] as string[],
    finished: [] as string[],
    aborted: [] as string[],
    keys: [] as string[],
    signals: new Map<string, AbortSignal>(),
  };
  const tool: Tool = defineTool({
    name,
    description: 'Waits, then returns its label',
    input: z.object({ ms: z.number().int().nonnegative(), label: z.string() }),
    async execute({ ms, label }, { signal, toolCallId, idempotencyKey }) {
      stats.started.push(label);
      stats.keys.push(idempotencyKey);
      stats.signals.set(toolCallId, signal);
      stats.active++;
      stats.maxActive = Math.max(stats.maxActive, stats.active);
      try {
        await sleepOrAbort(ms, signal);
        stats.finished.push(label);
        return `waited ${label}`;
      } catch (error) {
        stats.aborted.push(label);
        throw error;
      } finally {
        stats.active--;
      }
    },
  });
  return { tool, stats };
}

/** Every tool result in `messages`, by call id. */
export function resultsById(messages: readonly Message[]): Map<string, ToolMessage> {
  const byId = new Map<string, ToolMessage>();
  for (const m of messages) if (m.role === 'tool') byId.set(m.toolCallId, m);
  return byId;
}

/** The root actor's state values, in order, from an inspection log. */
export function rootStateValues(events: readonly InspectionEvent[], rootId: string): unknown[] {
  return events
    .filter((e) => e.type === '@xstate.snapshot' && e.actorRef.sessionId === rootId)
    .map((e) => (e as { snapshot: { value?: unknown } }).snapshot.value);
}

/** A fast, recording sleep for retry options. */
export function fakeSleep() {
  const delays: number[] = [];
  return {
    delays,
    sleep: async (ms: number, signal: AbortSignal) => {
      delays.push(ms);
      if (signal.aborted) throw signal.reason;
    },
  };
}

/**
 * Helpers for the human-in-the-loop suites (issue 6): tools that need approval and count their
 * executions, a model that records every request and checks it is provider-valid, and waits for
 * the driver's AwaitingApproval state.
 */
import { waitFor } from 'xstate';
import { z } from 'zod';
import type { AgentActor } from '../../machines/agent.machine.js';
import type { AgentEmitted } from '../../src/agent/protocol/actor-types.js';
import type { Model, ModelReply, ModelRequest } from '../../src/model.js';
import type { Message, ToolCall, ToolMessage } from '../../src/schemas.js';
import { defineTool, type ApprovalContext, type Tool } from '../../src/tools/define-tool.js';
import { deferred, providerValid, WAIT_MS } from './driver.js';

export { deferred, providerValid, WAIT_MS };

export const user = (content: string): Message => ({ role: 'user', content });

/** The driver's state while calls wait for a human. */
export const AWAITING_APPROVAL = { Running: { AwaitingTools: { Working: { Approval: 'AwaitingApproval' } } } } as const;

/**
 * A model that records every request it gets (copied at call time) and whether each one was
 * provider-valid. Wraps any model; the driver's retry wrapper sits outside it.
 */
export function recordingModel(inner: Model) {
  const requests: Message[][] = [];
  const model: Model = {
    name: inner.name,
    generate(request: ModelRequest): Promise<ModelReply> {
      requests.push(structuredClone([...request.messages]));
      return inner.generate(request);
    },
  };
  return {
    model,
    requests,
    /** Indexes of requests a provider would reject (empty when all were valid). */
    invalid: () => requests.flatMap((messages, i) => (providerValid(messages) ? [] : [i])),
  };
}

/** `name(path, content)`: a write-like tool that needs approval and records each execution. */
export function guardedTool(
  name = 'write_file',
  needsApproval: boolean | ((args: { path: string; content: string }, ctx: ApprovalContext) => boolean | Promise<boolean>) = true,
) {
  const ran: { id: string; path: string; at: number }[] = [];
  const tool: Tool = defineTool({
    name,
    description: 'Writes a file (in memory)',
    input: z.object({ path: z.string(), content: z.string() }),
    needsApproval,
    execute: ({ path }, { toolCallId }) => {
      ran.push({ id: toolCallId, path, at: performance.now() });
      return `wrote ${path}`;
    },
  });
  return { tool, ran };
}

/** `lookup(key)`: needs no approval; optionally held until `release()`; records when it ran. */
export function freeTool(name = 'lookup', options: { held?: boolean } = {}) {
  const gate = deferred();
  const started = deferred();
  const log = { started: [] as { id: string; at: number }[], finished: [] as { id: string; at: number }[] };
  if (!options.held) gate.resolve();
  const tool: Tool = defineTool({
    name,
    description: 'Looks a key up',
    input: z.object({ key: z.string() }),
    execute: async ({ key }, { toolCallId }) => {
      log.started.push({ id: toolCallId, at: performance.now() });
      started.resolve();
      await gate.promise;
      log.finished.push({ id: toolCallId, at: performance.now() });
      return `value of ${key}`;
    },
  });
  return { tool, log, started: started.promise, release: () => gate.resolve() };
}

/** Records every emitted event of the given types, in order (attach before `start()`). */
export function collect<T extends AgentEmitted['type']>(actor: AgentActor, ...types: T[]) {
  const events: Extract<AgentEmitted, { type: T }>[] = [];
  for (const type of types) actor.on(type, (event) => events.push(event as Extract<AgentEmitted, { type: T }>));
  return events;
}

/** Waits until the driver sits in AwaitingApproval; returns the ids of the calls that wait. */
export async function awaitingApproval(actor: AgentActor, timeout = WAIT_MS): Promise<string[]> {
  const snapshot = await waitFor(
    actor,
    (s) => {
      if (s.status !== 'active') throw new Error(`actor is ${s.status} while waiting for AwaitingApproval`);
      return s.matches(AWAITING_APPROVAL);
    },
    { timeout },
  );
  return snapshot.context.approvals.waiting;
}

export const callIds = (calls: readonly ToolCall[]) => calls.map((c) => c.id);

/** Every tool result in `messages`, by call id. */
export function resultsById(messages: readonly Message[]): Map<string, ToolMessage> {
  const byId = new Map<string, ToolMessage>();
  for (const m of messages) if (m.role === 'tool') byId.set(m.toolCallId, m);
  return byId;
}

/** The call `name(args)` a scripted reply asks for. */
export const ask = (name: string, args: unknown) => ({ name, args });

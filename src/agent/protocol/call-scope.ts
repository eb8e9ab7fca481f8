import { AsyncLocalStorage } from 'node:async_hooks';
import type { AnyActorRef } from 'xstate';
import type { Usage } from '../../schemas.js';
import type { SubagentReport } from './actor-types.js';
import type { AgentContext } from '../core/context.js';
import type { Rewirable } from './executor.js';

/**
 * Where a tool call runs: its run (session, call, the IO actor), a line back to that run's chart,
 * and, under a durable session, how to open a child's own session. Every agent's IO runs each
 * call in it; an agent tool reads it to start its child run, and the hosts extend it (a durable
 * session with `open`, Restate with `journal`), so it is shared vocabulary, not a feature's. It
 * travels with the call's async work (the executor seam hands effects over as `perform()`
 * alone), so an executor in between (tracing, Restate) needs to know nothing of it.
 */

/** A running child, as its parent's IO routes decisions and steering to it. */
export interface ChildHandle {
  send(event: { type: string }): void;
}

/** A child's durable session, as the agent tool drives it. */
export interface ChildSession {
  /** Its actor: the context says whether it has run, and what it spent (see `Pricing.spent`). */
  readonly actor: { getSnapshot(): { context: AgentContext } };
  send(event: { type: string; [key: string]: unknown }): void;
  whenIdle(): Promise<{ outcome: unknown; usage: Usage } | null>;
  close(): Promise<void>;
}

export interface OpenChildOptions {
  machine: unknown;
  sessionId: string;
  /** Called with the child's actor before it starts, so a resumed child's first events are heard. */
  attach: (actor: { on(type: string, handler: (event: never) => void): unknown }) => void;
  /** The parent's IO actor (see `RunScope.parent`). */
  parent: AnyActorRef;
  /** The parent session's memory scope: the child's is the same (a new child is opened with it, a stored one must have it). */
  scope?: string | undefined;
}

export interface RunScope {
  readonly sessionId: string;
  readonly callId: string;
  /** The parent's IO actor: a child created with it as parent joins the parent's actor system (and its inspector). */
  readonly parent: AnyActorRef;
  report(report: SubagentReport): void;
  /** The call's running child, for what the parent routes to it; returns the release. */
  adopt(child: ChildHandle): () => void;
  /** Under a durable session: opens (or reopens) the child's session on the same store. */
  readonly open?: ((options: OpenChildOptions) => Promise<ChildSession>) | undefined;
  /** Whether the call's tool is an agent tool (`agentTool`): a host that journals steps runs it unwrapped. */
  readonly runsAgent?: boolean | undefined;
  /**
   * Under a host that journals the child's steps in the parent's own run (Restate, see
   * restate/steps.ts): the child's machine as that host runs it (its executor and clock).
   */
  readonly journal?: (<M extends Rewirable<M>>(machine: M) => M) | undefined;
  /** How deep in the tree of agents the calling agent runs: 0 for a top-level run, 1 for its child... */
  readonly depth: number;
}

/** The tools `agentTool` made: their calls start a child run (a Restate host runs them inline). */
const agentTools = new WeakSet<object>();

/** Marks a tool as an agent tool (see `runsAgent`). */
export const markAgentTool = <T extends object>(tool: T): T => (agentTools.add(tool), tool);

/**
 * The depth of each child agent actor an agent tool started (a top-level agent has none: 0). Kept
 * by actor, not read from the session id: a user's session id may itself hold the tree separator.
 */
const depths = new WeakMap<object, number>();

/** Records the depth of a child agent actor, before it starts. */
export const markDepth = (actor: object, depth: number): void => void depths.set(actor, depth);

/** The depth of the agent whose IO actor is `io` (its parent actor is the agent): 0 unless an agent tool started it. */
export const depthOfIo = (io: object): number => {
  const agent = (io as { _parent?: object | undefined })._parent;
  return (agent && depths.get(agent)) ?? 0;
};

/** Whether `tool` is an agent tool. */
export const isAgentTool = (tool: object | undefined): boolean => tool !== undefined && agentTools.has(tool);

const storage = new AsyncLocalStorage<RunScope>();

/** The scope of the tool call running now, if it runs inside an agent. */
export const currentScope = (): RunScope | undefined => storage.getStore();

/**
 * Runs a tool call's work in its own scope (an agent's IO does, per call). A call that runs no
 * agent needs one only to hide a scope around it (a child agent's own tool must not read its
 * parent's): outside any, it runs as it is. So a process whose agents call no agent tool never
 * enters an async context, which on Node 20 turns on promise hooks that every promise then pays.
 */
export const inScope = <T>(scope: RunScope, work: () => T): T =>
  scope.runsAgent || storage.getStore() !== undefined ? storage.run(scope, work) : work();

/** Runs `work` with the current scope extended (a durable session adds how to open children). */
export function extendScope<T>(extra: Partial<RunScope>, work: () => T): T {
  const current = storage.getStore();
  return current ? storage.run({ ...current, ...extra }, work) : work();
}

/**
 * Stops an actor, a child run's included. XState refuses `stop()` on an actor created with a
 * parent (`ActorOptions.parent`, how a child run joins its parent's system and inspector) that
 * the parent's chart did not spawn, so such an actor is stopped the way its parent would stop it.
 */
export function stopActor(actor: { stop(): unknown }): void {
  const child = actor as { _parent?: unknown; _stop?: (() => unknown) | undefined };
  if (child._parent && typeof child._stop === 'function') child._stop();
  else actor.stop();
}

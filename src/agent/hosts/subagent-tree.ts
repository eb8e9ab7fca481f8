import { matchesState, type AnyActorRef, type StateValue, type Subscription } from 'xstate';
import type { AgentActor } from '../../../machines/agent.machine.js';
import type { AgentContext } from '../core/context.js';
import type { AgentEmitted } from '../protocol/actor-types.js';
import { waitsForSomeone } from './waiting.js';

/**
 * The subagents of one session as a host follows them (the chat handler, a scheduler's tick):
 * every child run an agent tool starts (and their own children) joins its parent's actor system,
 * so the system's inspection names each new actor; an agent's actor is known by its session id
 * (`<chat>/run-1:turn-1:c1/run-1:turn-2:c2`), which gives the id its parent shows its calls
 * under (`c1/c2`). The tree tells which calls of each session run, so the host knows when
 * every running call is a child that waits for someone: then a chat's response ends, and a
 * scheduler's tick, as they do when the parent itself waits.
 */

interface Node {
  actor: { getSnapshot(): { value: unknown; context: AgentContext } };
  /** The id the chat's run shows the child's calls under ('' for the chat's own session). */
  via: string;
  /** The session's calls started and not finished. */
  running: Set<string>;
}

export interface TreeListener {
  /** A child's event, with the id of the call that runs it as the page knows it. */
  event(via: string, event: AgentEmitted): void;
  /** A child's state changed (it may wait for someone now). */
  changed(): void;
}

/** One segment of a child session id: `run-<r>:turn-<t>:<call id>` (see childSessionOf). */
const SEGMENT = /^run-\d+:turn-\d+:(.+)$/s;

/** The id a child's calls show under, from its session id; null for a session outside this chat. */
export function viaOf(chatId: string, sessionId: string): string | null {
  if (!sessionId.startsWith(`${chatId}/`)) return null;
  const calls: string[] = [];
  for (const segment of sessionId.slice(chatId.length + 1).split(/\/(?=run-\d+:turn-\d+:)/)) {
    const match = SEGMENT.exec(segment);
    if (!match) return null;
    calls.push(match[1]!);
  }
  return calls.join('/');
}

export class SubagentTree {
  readonly #chatId: string;
  readonly #root: Node;
  /** Child sessions by the id their calls show under. */
  readonly #nodes = new Map<string, Node>();
  readonly #seen = new WeakSet<object>();
  readonly #listener: TreeListener;
  readonly #inspection: Subscription;
  /** The children's state subscriptions, each let go when its child stops. */
  readonly #subscriptions = new Set<Subscription>();
  /** Told of each child's events and state changes (see `until`, `listen`). */
  readonly #hearing = new Set<(via: string, event: AgentEmitted | null) => void>();

  /** Follows `root`'s children from now on; call before `root` starts, so a resumed child is heard. */
  constructor(chatId: string, root: AgentActor, listener: TreeListener) {
    this.#chatId = chatId;
    this.#root = { actor: root, via: '', running: new Set() };
    this.#listener = listener;
    this.#seen.add(root);
    this.#inspection = root.system.inspect((inspection) => {
      if (inspection.type === '@xstate.actor') this.#watch(inspection.actorRef as AnyActorRef);
    });
  }

  /** The chat's own session's events: which of its calls run. */
  rootEvent(event: AgentEmitted): void {
    track(this.#root, event);
  }

  /** The live context of the child whose calls show under `via`, if this process runs it. */
  contextOf(via: string): AgentContext | undefined {
    return this.#nodes.get(via)?.actor.getSnapshot().context;
  }

  /**
   * Whether the child whose calls show under `via` is live here and waits on `operation` (it
   * yielded it and takes `operation.resume` now): a child opened again from the store gets there
   * once its parent's call runs again.
   */
  waitsOn(via: string, operation: string): boolean {
    const snapshot = this.#nodes.get(via)?.actor.getSnapshot();
    return !!snapshot && matchesState({ Running: 'AwaitingOperation' }, snapshot.value as StateValue) && snapshot.context.operations.waiting?.operation === operation;
  }

  /** Resolves true once `check` holds (looked at on each child's event and change, and every 25 ms), false after `ms`. */
  until(check: () => boolean, ms: number): Promise<boolean> {
    if (check()) return Promise.resolve(true);
    return new Promise((resolve) => {
      const done = (answer: boolean) => {
        this.#hearing.delete(look);
        clearInterval(poll);
        clearTimeout(timer);
        resolve(answer);
      };
      const look = () => check() && done(true);
      this.#hearing.add(look);
      const poll = setInterval(look, 25);
      const timer = setTimeout(() => done(check()), ms);
    });
  }

  /** Hears every child's events (`via`: the id the chat shows its calls under) until the returned function is called. */
  listen(hear: (via: string, event: AgentEmitted) => void): () => void {
    const listener = (via: string, event: AgentEmitted | null) => event && hear(via, event);
    this.#hearing.add(listener);
    return () => this.#hearing.delete(listener);
  }

  /**
   * The children (by `via`) whose budget paused them, when those pauses are all the session
   * waits on; empty when it waits on nothing or on something else too (an approval, a call in
   * doubt, an operation: a page answers those). Read when the session waits (see `waits`).
   */
  pausedChildren(): string[] {
    const paused: string[] = [];
    const walk = (node: Node): boolean => {
      const snapshot = node.actor.getSnapshot();
      if (waitsForSomeone(snapshot)) {
        if (node === this.#root || !matchesState({ Running: 'BudgetPaused' }, snapshot.value as StateValue)) return false;
        paused.push(node.via);
        return true;
      }
      for (const id of node.running) {
        const child = this.#nodes.get(node.via ? `${node.via}/${id}` : id);
        if (child && !walk(child)) return false;
      }
      const { approvals, doubt } = snapshot.context;
      // A call that waits for the page's decision while others of its batch still ran.
      return !approvals.waiting.some((id) => !Object.hasOwn(approvals.decisions, id)) && !(doubt?.waiting.length ?? 0);
    };
    return walk(this.#root) ? paused : [];
  }

  /**
   * The sessions that wait for someone when the session does (see `waits`): itself, or each child
   * (by the id its calls show under) its running calls wait on. Empty when it does not wait.
   */
  waiting(): { via: string; snapshot: { value: unknown; context: AgentContext } }[] {
    if (!this.waits()) return [];
    const found: { via: string; snapshot: { value: unknown; context: AgentContext } }[] = [];
    const walk = (node: Node) => {
      const snapshot = node.actor.getSnapshot();
      if (waitsForSomeone(snapshot)) return void found.push({ via: node.via, snapshot });
      for (const id of node.running) walk(this.#nodes.get(node.via ? `${node.via}/${id}` : id)!);
    };
    walk(this.#root);
    return found;
  }

  /** Whether the session waits for someone: itself, or every call it runs is a child that waits. */
  waits(node: Node = this.#root): boolean {
    if (waitsForSomeone(node.actor.getSnapshot())) return true;
    if (node.running.size === 0) return false;
    for (const id of node.running) {
      const child = this.#nodes.get(node.via ? `${node.via}/${id}` : id);
      if (!child || !this.waits(child)) return false;
    }
    return true;
  }

  stop(): void {
    this.#hearing.clear();
    this.#inspection.unsubscribe();
    for (const subscription of this.#subscriptions) subscription.unsubscribe();
    this.#subscriptions.clear();
    this.#nodes.clear();
  }

  /** Listens to every new actor of the system; an agent's first event tells whether it is a child of this chat. */
  #watch(actor: AnyActorRef): void {
    if (this.#seen.has(actor)) return;
    this.#seen.add(actor);
    let node: Node | null | undefined;
    actor.on('*', (event: AgentEmitted) => {
      if (node === undefined) node = this.#adopt(actor);
      if (!node) return;
      track(node, event);
      this.#listener.event(node.via, event);
      for (const hear of this.#hearing) hear(node.via, event);
    });
  }

  #adopt(actor: AnyActorRef): Node | null {
    const sessionId = (actor.getSnapshot() as { context?: { sessionId?: unknown } | undefined }).context?.sessionId;
    const via = typeof sessionId === 'string' ? viaOf(this.#chatId, sessionId) : null;
    if (via === null) return null;
    const node: Node = { actor: actor as unknown as Node['actor'], via, running: new Set() };
    this.#nodes.set(via, node);
    let subscription: Subscription | undefined;
    const gone = () => {
      if (this.#nodes.get(via) === node) this.#nodes.delete(via);
      if (subscription) this.#subscriptions.delete(subscription);
    };
    subscription = actor.subscribe({
      next: () => {
        this.#listener.changed();
        for (const hear of this.#hearing) hear(via, null);
      },
      error: gone,
      complete: gone,
    });
    this.#subscriptions.add(subscription);
    return node;
  }
}

function track(node: Node, event: AgentEmitted): void {
  if (event.type === 'tool.started') node.running.add(event.call.id);
  else if (event.type === 'tool.finished') node.running.delete(event.call.id);
  else if (event.type === 'run.started' || event.type === 'run.finished') node.running.clear();
}

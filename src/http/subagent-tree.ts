import type { AnyActorRef, Subscription } from 'xstate';
import type { AgentActor } from '../../machines/agent.machine.js';
import type { AgentContext } from '../agent/core/context.js';
import type { AgentEmitted } from '../agent/protocol/actor-types.js';
import { waitsForSomeone } from '../agent/hosts/waiting.js';

/**
 * The subagents of one chat's session as the chat handler follows them: every child run an agent
 * tool starts (and their own children) joins its parent's actor system, so the system's
 * inspection names each new actor; an agent's actor is known by its session id
 * (`<chat>/run-1:turn-1:c1/run-1:turn-2:c2`), which gives the id its parent shows its calls
 * under (`c1/c2`). The tree tells which calls of each session run, so the handler knows when
 * every running call is a child that waits for someone: then the response ends, as it does
 * when the parent itself waits.
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
    subscription = actor.subscribe({ next: () => this.#listener.changed(), error: gone, complete: gone });
    this.#subscriptions.add(subscription);
    return node;
  }
}

function track(node: Node, event: AgentEmitted): void {
  if (event.type === 'tool.started') node.running.add(event.call.id);
  else if (event.type === 'tool.finished') node.running.delete(event.call.id);
  else if (event.type === 'run.started' || event.type === 'run.finished') node.running.clear();
}

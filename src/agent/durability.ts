import type { AnyActorRef } from 'xstate';
import type { ToolMessage } from '../schemas.js';

/**
 * What a durable session lends the services of the actor it persists. The services ask for a
 * flush before any IO, so a decision is stored before it is acted on, and journal each tool
 * result the moment it exists.
 */
export interface Durability {
  /** Resolves once everything the actor has decided so far is stored; rejects if it cannot be. */
  flush(): Promise<void>;
  /** Records one finished tool result of the batch `batchKey`. */
  journal(batchKey: string, result: ToolMessage): void;
}

const attached = new WeakMap<AnyActorRef, Durability>();

export function attachDurability(actor: AnyActorRef, durability: Durability): void {
  attached.set(actor, durability);
}

export function durabilityOf(actor: AnyActorRef | undefined): Durability | undefined {
  return actor && attached.get(actor);
}

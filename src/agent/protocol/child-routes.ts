import type { ChildHandle } from './call-scope.js';

/** The most events held for one call whose child has not started: a person's decisions and steers, never a stream. */
const MAX_HELD_PER_CALL = 100;

/**
 * The child runs of a run's calls (an agent tool's child), by call id: where an event the parent
 * routes down (a decision, a steer, a raise, a resume with a `target`) goes. The chart routes
 * only to a call of the batch that has no result yet (`callMayRunChild`), but its child may not
 * run yet: a reopened parent starts the call again a moment after it opens, and the call opens
 * its child's session after that. Such an event is held for the call and handed to its child
 * when the call adopts it, instead of going to no one; it is dropped with the call (its end, a
 * new batch, the run's abort), when no child can take it any more.
 *
 * @example
 * ```ts
 * const routes = new ChildRoutes();
 * routes.send('c1', { type: 'steer' }); // held: call c1 has no child yet
 * const release = routes.adopt('c1', { send: (event) => console.log(event.type) }); // logs 'steer'
 * release();
 * ```
 */
export class ChildRoutes {
  readonly #running = new Map<string, ChildHandle>();
  readonly #held = new Map<string, { type: string }[]>();

  /** Sends `event` to the child of call `callId`, or holds it until the call adopts one. */
  send(callId: string, event: { type: string }): void {
    const child = this.#running.get(callId);
    if (child) return child.send(event);
    const held = this.#held.get(callId) ?? [];
    if (held.length < MAX_HELD_PER_CALL) held.push(event);
    this.#held.set(callId, held);
  }

  /** Call `callId` runs `child`: what was held for it goes first. Returns its release (the call's child ended). */
  adopt(callId: string, child: ChildHandle): () => void {
    this.#running.set(callId, child);
    const held = this.#held.get(callId) ?? [];
    this.#held.delete(callId);
    for (const event of held) child.send(event);
    return () => {
      if (this.#running.get(callId) === child) this.#running.delete(callId);
    };
  }

  /** Call `callId` ended: what was held for a child of it reaches no one. */
  ended(callId: string): void {
    this.#held.delete(callId);
  }

  /** The batch is over (a new one, the run's abort): nothing held goes anywhere. */
  dropHeld(): void {
    this.#held.clear();
  }
}

import { z } from 'zod';

/**
 * Delivery ids: where an emitted event a client may show sits in its session's stream, so a
 * client that reconnects (to the same process, or to the one that took over after a crash) drops
 * what it already has. An id is derived from the run, the turn and the event's position, never
 * from a clock or a counter of the process: a run continued elsewhere emits the same id for the
 * same event. The format is `{run}/{turn}/{part}` (run counts the session's runs from 1, turn its
 * model replies):
 *
 * | event           | part                                   |
 * | --------------- | -------------------------------------- |
 * | `run.started`   | `start` (turn 0)                       |
 * | `text.delta`    | `text/{attempt}/{index}`               |
 * | `text.retracted`| `retract/{attempt}` (the voided attempt)|
 * | `turn.finished` | `reply/{attempt}`                      |
 * | `tool.started`  | `tool-started/{callId}`                |
 * | `tool.finished` | `tool-finished/{callId}`               |
 * | `run.finished`  | `finish`                               |
 *
 * `attempt` counts the model calls made for one turn (1 first), across retries and resumes: it is
 * stored with the session before the call runs, so the attempt after a crash has ids of its own.
 * A regenerated reply is announced by `text.retracted`: the text of its turn shown so far is void.
 *
 * @example
 * ```ts
 * import type { DeliveryId } from 'loopchart';
 *
 * const lastSeen: DeliveryId = '1/2/text/1/4'; // run 1, turn 2, attempt 1, delta 4
 * ```
 */
export type DeliveryId = `${number}/${number}/${string}`;

/**
 * A delivery id, checked (say, a `Last-Event-ID` header a client sent back).
 *
 * @example
 * ```ts
 * import { DeliveryIdSchema } from 'loopchart/schemas';
 *
 * const parsed = DeliveryIdSchema.safeParse('1/2/tool-finished/call_7');
 * if (!parsed.success) throw new Error('bad Last-Event-ID');
 * ```
 */
export const DeliveryIdSchema = z
  .string()
  .max(1_200)
  .regex(/^\d+\/\d+\/(start|finish|text\/\d+\/\d+|retract\/\d+|reply\/\d+|tool-(started|finished)\/.+)$/s, 'not a delivery id') as unknown as z.ZodType<DeliveryId>;

/** The ids of each kind of event, as the driver stamps them. */
export const deliveryIds = {
  runStarted: (run: number): DeliveryId => `${run}/0/start`,
  text: (run: number, turn: number, attempt: number, index: number): DeliveryId => `${run}/${turn}/text/${attempt}/${index}`,
  retracted: (run: number, turn: number, attempt: number): DeliveryId => `${run}/${turn}/retract/${attempt}`,
  reply: (run: number, turn: number, attempt: number): DeliveryId => `${run}/${turn}/reply/${attempt}`,
  toolStarted: (run: number, turn: number, callId: string): DeliveryId => `${run}/${turn}/tool-started/${callId}`,
  toolFinished: (run: number, turn: number, callId: string): DeliveryId => `${run}/${turn}/tool-finished/${callId}`,
  runFinished: (run: number, turn: number): DeliveryId => `${run}/${turn}/finish`,
};

/** The attempt of the model call in flight: which step (its key) and how many calls it has had. */
export const ModelAttemptSchema = z.object({ key: z.string(), attempt: z.number().int().positive() });
export type ModelAttempt = z.infer<typeof ModelAttemptSchema>;

/**
 * The attempt a model call about to start is: the next one of the same step (a retry, or the
 * call asked for again after a restore), else the first of a new step.
 */
export const nextAttempt = (current: ModelAttempt | null | undefined, key: string): ModelAttempt =>
  current?.key === key ? { key, attempt: current.attempt + 1 } : { key, attempt: 1 };

/** The shape of an event a delivery ledger reads: its id, and for text its turn and delta. */
export type DeliveredEvent = { type: string; id: DeliveryId; delta?: string | undefined };

/**
 * What a client shows, rebuilt from delivered events: each id is taken once, and a
 * `text.retracted` drops the text (and reply) of its turn shown so far, so a reply regenerated
 * after a retry or a crash is shown once. A reconnecting client feeds everything it receives;
 * repeats are refused.
 *
 * @example
 * ```ts
 * import { DeliveryLedger } from 'loopchart';
 *
 * const ledger = new DeliveryLedger();
 * ledger.accept({ type: 'text.delta', id: '1/1/text/1/0', delta: 'Hel' });
 * ledger.accept({ type: 'text.delta', id: '1/1/text/1/0', delta: 'Hel' }); // false: a repeat
 * ledger.accept({ type: 'text.retracted', id: '1/1/retract/1' });
 * ledger.accept({ type: 'text.delta', id: '1/1/text/2/0', delta: 'Hello' });
 * console.log(ledger.text('1/1')); // 'Hello'
 * ```
 */
export class DeliveryLedger {
  readonly #seen = new Set<string>();
  /** Visible text by `{run}/{turn}`. */
  readonly #text = new Map<string, string>();
  /** Accepted events in order, retracted ones removed. */
  #events: DeliveredEvent[] = [];

  /** Takes one event; false when its id was delivered before (nothing changes). */
  accept(event: DeliveredEvent): boolean {
    if (this.#seen.has(event.id)) return false;
    this.#seen.add(event.id);
    const turn = turnOf(event.id);
    if (event.type === 'text.retracted') {
      this.#text.delete(turn);
      this.#events = this.#events.filter((kept) => !(turnOf(kept.id) === turn && (kept.type === 'text.delta' || kept.type === 'turn.finished')));
    } else if (event.type === 'text.delta') {
      this.#text.set(turn, (this.#text.get(turn) ?? '') + (event.delta ?? ''));
    }
    this.#events.push(event);
    return true;
  }

  /** The text shown for a turn (`{run}/{turn}`). */
  text(turn: string): string {
    return this.#text.get(turn) ?? '';
  }

  /** What is shown, in order: every accepted event a retraction did not void. */
  events(): readonly DeliveredEvent[] {
    return this.#events;
  }
}

const turnOf = (id: string): string => id.split('/', 2).join('/');

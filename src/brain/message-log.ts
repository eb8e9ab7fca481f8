import { objectSlot } from '../object-slot.js';
import type { LoopContext, Message } from '../schemas.js';

/** The log of each context built here, and of each view a log handed out (for contexts copied field by field). */
const logOfContext = objectSlot<object, MessageLog>();
const logOfPendingView = objectSlot<readonly Message[], MessageLog>();

/**
 * A brain context's conversation, shared between the contexts that grew from one another:
 * `history` is `items[0, split)` and `pending` is `items[split, length)` of one list. Positions
 * below a log's `length` never change, so every log stays a value while the list grows: a log
 * appends in place when it is the list's tip, and copies its own part once when it is not (after
 * a rewind or a discard, or when two contexts grow from the same one). A run of N turns costs
 * O(N) appends, not the O(N²) of copying the run's messages at every turn.
 *
 * The arrays a context shows as `history` and `pending` are cut from the log when first read
 * (`historyView`, `pendingView`) and kept, so a snapshot nobody reads costs nothing per step.
 *
 * @example
 * ```ts
 * const log = MessageLog.of([{ role: 'user', content: 'Hi' }], []);
 * const grown = log.append([{ role: 'assistant', content: 'Hello' }]);
 * log.length; // 1: the first log is unchanged
 * grown.pendingView(); // [{ role: 'assistant', content: 'Hello' }]
 * ```
 */
export class MessageLog {
  #history: readonly Message[] | undefined;
  #pending: readonly Message[] | undefined;

  private constructor(
    private readonly items: Message[],
    /** Where history ends and pending begins. */
    readonly split: number,
    /** History and pending together. */
    readonly length: number,
  ) {}

  /** A log of these two lists; the lists become its views, so the caller must not change them afterwards. */
  static of(history: readonly Message[], pending: readonly Message[]): MessageLog {
    const log = new MessageLog(history.concat(pending), history.length, history.length + pending.length);
    log.#history = history;
    log.#pending = pending;
    logOfPendingView.set(pending, log);
    return log;
  }

  get pendingLength(): number {
    return this.length - this.split;
  }

  /** The message at position `i` of history then pending, if there is one. */
  at(i: number): Message | undefined {
    return i >= 0 && i < this.length ? this.items[i] : undefined;
  }

  historyView(): readonly Message[] {
    return (this.#history ??= this.items.slice(0, this.split));
  }

  pendingView(): readonly Message[] {
    if (!this.#pending) {
      this.#pending = this.items.slice(this.split, this.length);
      logOfPendingView.set(this.#pending, this);
    }
    return this.#pending;
  }

  /** History then pending as a new list, behind `prefix` when there is one. */
  toArray(prefix?: Message): Message[] {
    const list = this.items.slice(0, this.length);
    if (prefix) list.unshift(prefix);
    return list;
  }

  /** Positions `from` to the end as a new list. */
  tail(from: number): Message[] {
    return this.items.slice(Math.max(0, from), this.length);
  }

  /** Pending grown by `messages`. */
  append(messages: readonly Message[]): MessageLog {
    if (messages.length === 0) return this;
    // The tip grows in place: no other log sees the positions it writes.
    const items = this.items.length === this.length ? this.items : this.items.slice(0, this.length);
    for (const message of messages) items.push(message);
    const next = new MessageLog(items, this.split, this.length + messages.length);
    next.#history = this.#history;
    return next;
  }

  /** The first `keep` pending messages moved into history and the rest dropped (all of them by default). */
  commit(keep = this.pendingLength): MessageLog {
    const end = this.split + Math.min(Math.max(0, keep), this.pendingLength);
    return end === this.split ? this.discardPending() : new MessageLog(this.items, end, end);
  }

  /** Pending dropped, history kept. */
  discardPending(): MessageLog {
    if (this.pendingLength === 0) return this;
    const next = new MessageLog(this.items, this.split, this.split);
    next.#history = this.#history;
    return next;
  }

  /** History cut to its first `length` messages, pending dropped. */
  rewind(length: number): MessageLog {
    const end = Math.min(Math.max(0, length), this.split);
    return end === this.split ? this.discardPending() : new MessageLog(this.items, end, end);
  }

  /** Whether the two logs hold the same messages, split at the same place. */
  sameAs(other: MessageLog): boolean {
    return this === other || (this.split === other.split && this.length === other.length && this.commonPrefix(other) === this.length);
  }

  /**
   * How many leading positions the two logs share, by identity (messages are never changed, so
   * an unchanged one keeps its identity). Two logs cut from one list share all their common
   * length: O(1) for consecutive steps of a run.
   */
  commonPrefix(other: MessageLog): number {
    const end = Math.min(this.length, other.length);
    if (this.sharesStorageWith(other)) return end;
    let i = 0;
    while (i < end && this.items[i] === other.items[i]) i++;
    return i;
  }

  /** Whether the two logs are cut from one list (no copy was made between them). */
  sharesStorageWith(other: MessageLog): boolean {
    return this.items === other.items;
  }

  /** Whether `history` and `pending` are the views this log handed out (a context copied field by field). */
  hasViews(history: readonly Message[], pending: readonly Message[]): boolean {
    return this.#history === history && this.#pending === pending;
  }
}

/** Fields of the brain's context besides the conversation. */
export type LoopFields = Omit<LoopContext, 'history' | 'pending'>;

/** The context's fields besides the conversation, read without cutting the conversation's lists. */
export const fieldsOf = (context: LoopFields): LoopFields => withFields({}, context);

/** `target` with the fields of `from` added, in the schema's order. */
function withFields<T extends object>(target: T, from: LoopFields): T & LoopFields {
  const to = target as T & LoopFields;
  to.pendingTools = from.pendingTools;
  to.turnsTaken = from.turnsTaken;
  to.contextTokens = from.contextTokens;
  to.cancelled = from.cancelled;
  to.lastCompactionTokens = from.lastCompactionTokens;
  to.deferredCompaction = from.deferredCompaction;
  to.totalToolCalls = from.totalToolCalls;
  to.compactionReason = from.compactionReason;
  to.steering = from.steering;
  to.outcome = from.outcome;
  return to;
}

/** One of the two conversation fields: read from the context's log, detached when assigned. */
function viewField(field: 'history' | 'pending', view: (log: MessageLog) => readonly Message[]): PropertyDescriptor {
  return {
    get(this: LoopContext) {
      return view(logOfContext.get(this)!);
    },
    set(this: LoopContext, value: Message[]) {
      detach(this, field, value);
    },
    enumerable: true,
    configurable: true,
  };
}

/**
 * `history` and `pending` of a context over a log: enumerable, so spreading, `structuredClone`,
 * JSON and equality see plain lists; one pair of functions for every context, since accessors
 * written in an object literal cost a closure pair per context and several times the time.
 * Assigning either replaces it with a plain value (that context then no longer follows the log).
 */
const conversationFields: PropertyDescriptorMap = {
  history: viewField('history', (log) => log.historyView()),
  pending: viewField('pending', (log) => log.pendingView()),
  // Node's console and util.inspect would print the accessors as [Getter/Setter]: show the lists.
  [Symbol.for('nodejs.util.inspect.custom')]: {
    value(this: LoopContext) {
      return { ...this };
    },
  },
};

/** The keys of `conversationFields`, symbol included, in their order. */
const conversationKeys = Reflect.ownKeys(conversationFields);

/**
 * A brain context over `log`: its fields, and `history` and `pending` cut from the log on first
 * read (see `conversationFields`).
 *
 * @example
 * ```ts
 * const fields = { pendingTools: [], turnsTaken: 0, contextTokens: 0, cancelled: false, lastCompactionTokens: null,
 *   deferredCompaction: false, totalToolCalls: 0, compactionReason: null, steering: [], outcome: null };
 * const context = loopContextOf(fields, MessageLog.of([], [{ role: 'user', content: 'Hi' }]));
 * context.pending; // [{ role: 'user', content: 'Hi' }], cut from the log on this first read
 * ```
 */
export function loopContextOf(fields: LoopFields, log: MessageLog): LoopContext {
  // The conversation first, as in the schema, so a context serializes as it always did.
  const context = {} as LoopContext;
  // One property at a time: `Object.defineProperties` with the whole map costs twice as much
  // (about 2 µs against 1 µs per context, and a turn builds several).
  for (const key of conversationKeys) Object.defineProperty(context, key, conversationFields[key]!);
  withFields(context, fields);
  logOfContext.set(context, log);
  return context;
}

function detach(context: LoopContext, field: 'history' | 'pending', value: Message[]): void {
  const other = field === 'history' ? 'pending' : 'history';
  const keep = context[other];
  logOfContext.clear(context);
  Object.defineProperty(context, field, { value, writable: true, enumerable: true, configurable: true });
  Object.defineProperty(context, other, { value: keep, writable: true, enumerable: true, configurable: true });
}

/**
 * The log behind a context: its own when `loopContextOf` built it or its lists are a log's
 * views (XState's `assign` copies a context field by field), else a new log of its two lists.
 */
export function logOf(context: LoopContext): MessageLog {
  const own = logOfContext.get(context);
  if (own) return own;
  const { history, pending } = context;
  const owner = logOfPendingView.get(pending);
  const log = owner?.hasViews(history, pending) ? owner : MessageLog.of(history, pending);
  logOfContext.set(context, log);
  return log;
}

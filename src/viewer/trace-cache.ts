import { readSessionTrace, type ReadTraceEntry } from '../sessions/trace.js';
import type { SessionStore } from '../stores/session-store.js';
import { LazyTexts } from './lazy-text.js';
import { embedTrace, type EmbeddedTrace } from './page.js';

/** A session's trace as read so far: the validated entries, and the same as a page embeds them. */
export interface CachedTrace extends EmbeddedTrace {
  entries: readonly ReadTraceEntry[];
}


/**
 * The validated traces of the sessions a viewer shows, read once. A trace is append-only, so a
 * page load after the first reads, validates and encodes only the entries stored since, not the
 * 20,000 of a long session again. Each stored row is still validated where it enters, once: an
 * invalid one stays in the list as its `invalid` reason. Bounded: the sessions read least
 * recently are forgotten past `maxSessions`.
 */
export class TraceCache {
  readonly #store: SessionStore;
  readonly #maxSessions: number;
  /** Keyed by session id (chosen by whoever stored it, hence a Map); insertion order is recency. */
  readonly #traces = new Map<string, Promise<CachedTrace>>();

  constructor(store: SessionStore, maxSessions = 4) {
    this.#store = store;
    this.#maxSessions = maxSessions;
  }

  /**
   * The session's whole trace. A snapshot: later reads make new lists, never change this one.
   * Reads of one session run one after another, so two page loads never append the same entries.
   */
  read(sessionId: string): Promise<CachedTrace> {
    const before = this.#traces.get(sessionId);
    const next = (before ?? Promise.resolve(undefined)).catch(() => undefined).then(async (known: CachedTrace = { entries: [], json: [], texts: new LazyTexts(), lastSeq: 0 }) => {
      const fresh = await readSessionTrace(this.#store, sessionId, known.lastSeq);
      if (fresh.length === 0) return known;
      const added = embedTrace(fresh, known.texts);
      return { entries: known.entries.concat(fresh), json: known.json.concat(added.json), texts: known.texts, lastSeq: added.lastSeq };
    });
    this.#traces.delete(sessionId);
    this.#traces.set(sessionId, next);
    // A failed read is not kept: the next load tries the store again.
    next.catch(() => this.#traces.get(sessionId) === next && this.#traces.delete(sessionId));
    while (this.#traces.size > this.#maxSessions) this.#traces.delete(this.#traces.keys().next().value!);
    return next;
  }
}

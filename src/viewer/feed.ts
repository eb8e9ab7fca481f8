import type { Message } from '../schemas.js';
import { readSessionTrace, type ReadTraceEntry } from '../sessions/trace.js';
import type { SessionStore } from '../stores/session-store.js';
import { failureText, reportFailure } from './failure.js';
import { cursorParam } from './http.js';
import { lastIo, loadSessionHead, type SessionHead, type TraceReader } from './load.js';
import type { SessionView } from './page-model.js';
import { catchUpParts } from './catch-up.js';
import { sseEvent, sseJsonEvent, type SseStream } from './sse.js';

/**
 * The live side of a session page: one poller per watched session, whatever the number of open
 * pages, that reads only the trace entries after the last one it saw, loads the row and log once
 * per change, and sends each page only what changed since the page's cursor. The update is
 * encoded once and the same bytes go to every page that is in step.
 */

/** What a page has: the last trace entry it got and the length of the log it holds. */
export interface LiveCursor {
  seq: number;
  log: number;
}

/** The SSE `id` of an update: the cursor a reconnecting EventSource sends back as `Last-Event-ID`. */
export const cursorId = (cursor: LiveCursor): string => `${cursor.seq}:${cursor.log}`;

/** A `Last-Event-ID` this server wrote (`seq:log`), or null for anything else. */
export function parseCursorId(value: string): LiveCursor | null {
  const match = /^(\d{1,15}):(\d{1,15})$/.exec(value);
  return match ? { seq: Number(match[1]), log: Number(match[2]) } : null;
}

/**
 * A page's cursor: the `Last-Event-ID` a reconnecting EventSource sends (what it last got),
 * else `after` (trace entries) and `log` (messages) from the query, from the page it loaded.
 * Null for anything malformed: a 400, never a stream.
 */
export function liveCursor(query: URLSearchParams, lastEventId: string | undefined): LiveCursor | null {
  if (lastEventId !== undefined) return parseCursorId(lastEventId);
  const seq = cursorParam(query.get('after'));
  const log = cursorParam(query.get('log'));
  return seq === null || log === null ? null : { seq, log };
}

/** One change of the log the feed saw: after trace entry `seq`, positions from `from` on were new. */
interface LogChange {
  seq: number;
  from: number;
}

/** An event as encoded for every page, and its id (the cursor a page holds once it applied it). */
interface Sent {
  event: Buffer;
  id: string;
}

/** Changes remembered for pages that reconnect; older ones fall back to what the trace says. */
const CHANGES_KEPT = 64;

const sameMessage = (a: Message, b: Message): boolean =>
  a.role === b.role &&
  a.content === b.content &&
  (a.role !== 'assistant' || b.role !== 'assistant' || JSON.stringify(a.toolCalls) === JSON.stringify(b.toolCalls)) &&
  (a.role !== 'tool' || b.role !== 'tool' || (a.toolCallId === b.toolCallId && a.toolName === b.toolName && a.isError === b.isError));

/** The first position where two logs differ (the shorter one's length when one extends the other). */
function firstChange(before: readonly Message[], after: readonly Message[]): number {
  const end = Math.min(before.length, after.length);
  let i = 0;
  while (i < end && sameMessage(before[i]!, after[i]!)) i++;
  return i;
}

/**
 * Where a log the feed never saw may have changed, from the trace alone: a compaction that
 * rewrote it changes everything, a step that stored a shorter log cut it there.
 */
function changedPerTrace(entries: readonly ReadTraceEntry[]): number {
  let from = Infinity;
  for (const record of entries) {
    if (!('entry' in record)) continue;
    const { entry } = record;
    if (entry.type === 'compaction' && entry.rewritten) return 0;
    if (entry.type === 'step') from = Math.min(from, entry.log);
  }
  return from;
}

export class SessionFeed {
  readonly #store: SessionStore;
  /** Catching a page up (a served page gets the start of a long trace, and the rest from here). */
  readonly #readTrace: TraceReader;
  readonly sessionId: string;
  readonly #clients = new Map<SseStream, LiveCursor>();
  #seq: number;
  #io: string;
  #head: SessionHead;
  /** The feed knows every log change after this trace entry (from `#changes`). */
  #knownSince: number;
  readonly #changes: LogChange[] = [];
  /** Ticks and attachments run one at a time, in order. */
  #work: Promise<void> = Promise.resolve();
  #timer: NodeJS.Timeout | undefined;
  #stopped = false;
  /** The reference of the store failure the last polls met (reported once), until a poll reads again. */
  #failure: string | undefined;
  /**
   * When the feed last had a page (or was opened), on the monotonic clock: it stops once it had
   * none for a grace period (a wall clock stepped back must not keep it for as long).
   */
  #lastWatched = performance.now();

  private constructor(store: SessionStore, sessionId: string, seq: number, io: string, head: SessionHead, readTrace: TraceReader) {
    this.#store = store;
    this.#readTrace = readTrace;
    this.sessionId = sessionId;
    this.#seq = seq;
    this.#knownSince = seq;
    this.#io = io;
    this.#head = head;
  }

  /** The feed of a stored session, or undefined when there is no such session. */
  static async open(store: SessionStore, sessionId: string, readTrace: TraceReader = (id, after) => readSessionTrace(store, id, after)): Promise<SessionFeed | undefined> {
    const trace = await readTrace(sessionId);
    const io = lastIo(trace);
    const head = await loadSessionHead(store, sessionId, io);
    return head && new SessionFeed(store, sessionId, trace.at(-1)?.seq ?? 0, io, head, readTrace);
  }

  /**
   * The feed of a session just loaded for a page (its view: head, log and trace as stored now):
   * the page's event stream then finds it running and the log is not loaded a second time.
   */
  static fromView(store: SessionStore, view: SessionView, readTrace: TraceReader = (id, after) => readSessionTrace(store, id, after)): SessionFeed {
    const { trace, ...head } = view;
    return new SessionFeed(store, view.sessionId, trace.at(-1)?.seq ?? 0, lastIo(trace), head, readTrace);
  }

  /** True once the feed stopped polling (it had no page left): a new page needs a new feed. */
  get stopped(): boolean {
    return this.#stopped;
  }

  /**
   * Polls the store every `everyMs` until a poll finds no page left for `graceMs` (a page that
   * was just served connects its event stream a moment later); then `onIdle`.
   */
  poll(everyMs: number, onIdle: () => void, graceMs = 0): void {
    const loop = async () => {
      if (this.#stopped) return;
      if (this.#clients.size > 0) this.#lastWatched = performance.now();
      else if (performance.now() - this.#lastWatched >= graceMs) {
        this.stop();
        onIdle();
        return;
      }
      // A feed kept for a page that has not attached yet reads nothing: its first tick after the
      // attach finds whatever changed meanwhile.
      if (this.#clients.size > 0) await this.tick().catch(() => {});
      if (!this.#stopped) this.#timer = setTimeout(loop, everyMs);
    };
    this.#timer = setTimeout(loop, everyMs);
  }

  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
  }

  /** Follows the session on `stream`, first sending what changed since `cursor`. */
  attach(stream: SseStream, cursor: LiveCursor): Promise<void> {
    this.#clients.set(stream, cursor);
    return this.#serial(async () => {
      if (!this.#clients.has(stream)) return;
      await this.#deliverAll(stream, await this.#catchUp(cursor));
    });
  }

  detach(stream: SseStream): void {
    this.#clients.delete(stream);
  }

  /** Reads new trace entries; when there are, sends every page its update. */
  tick(): Promise<void> {
    return this.#serial(async () => {
      let entries: ReadTraceEntry[];
      let head: SessionHead | undefined;
      try {
        entries = await readSessionTrace(this.#store, this.sessionId, this.#seq);
        if (entries.length > 0) head = await loadSessionHead(this.#store, this.sessionId, lastIo(entries) || this.#io);
      } catch (error) {
        // The pages get a reference, never the store's error; it is reported once per outage, not at every poll.
        this.#failure ??= reportFailure(`following session '${this.sessionId}'`, error);
        const failure = sseEvent({ message: failureText(this.#failure) }, { event: 'failure' });
        for (const stream of this.#clients.keys()) stream.send(failure);
        return;
      }
      this.#failure = undefined;
      if (entries.length === 0 || !head) return;
      const before: LiveCursor = { seq: this.#seq, log: this.#head.messages.length };
      const from = firstChange(this.#head.messages, head.messages);
      this.#seq = entries.at(-1)!.seq;
      this.#io = head.state?.io ?? this.#io;
      this.#head = head;
      this.#changes.push({ seq: this.#seq, from });
      if (this.#changes.length > CHANGES_KEPT) this.#knownSince = this.#changes.shift()!.seq;
      let shared: Sent | undefined;
      for (const [stream, cursor] of this.#clients) {
        const inStep = cursor.seq === before.seq && cursor.log === before.log;
        if (inStep) this.#deliver(stream, (shared ??= this.#update(entries, from)));
        else await this.#deliverAll(stream, await this.#catchUp(cursor));
      }
    });
  }

  #deliver(stream: SseStream, update: Sent): void {
    if (stream.send(update.event, update.id)) this.#clients.set(stream, { seq: this.#seq, log: this.#head.messages.length });
    else this.#clients.delete(stream);
  }

  /**
   * A catch-up's events in order, each sent once the client took everything before it: the
   * stream's own header first (a fresh response's first bytes wait in Node until the next tick;
   * a catch-up event written behind them found them "unread" and dropped the page at once), then
   * each event. A client that stops reading meanwhile is dropped by the bound, told the cursor of
   * the last event it was sent.
   */
  async #deliverAll(stream: SseStream, updates: readonly Sent[]): Promise<void> {
    for (const update of updates) {
      if (!(await stream.drained())) return void this.#clients.delete(stream);
      if (!this.#clients.has(stream)) return;
      if (!stream.send(update.event, update.id)) return void this.#clients.delete(stream);
    }
    if (updates.length > 0) this.#clients.set(stream, { seq: this.#seq, log: this.#head.messages.length });
  }

  /** What a page at `cursor` lacks, as bounded events with their ids (none when it has everything the feed has). */
  async #catchUp(cursor: LiveCursor): Promise<Sent[]> {
    const seq = Math.min(cursor.seq, this.#seq);
    const entries = seq < this.#seq ? (await this.#readTrace(this.sessionId, seq)).filter((r) => r.seq <= this.#seq) : [];
    const length = this.#head.messages.length;
    let from = Math.min(cursor.log, length);
    if (seq < this.#knownSince) from = Math.min(from, changedPerTrace(entries.filter((r) => r.seq <= this.#knownSince)));
    for (const change of this.#changes) if (change.seq > seq) from = Math.min(from, change.from);
    if (entries.length === 0 && from === length && cursor.log === length) return [];
    const { version, messageCount, error, state, messages } = this.#head;
    const parts = catchUpParts({ entries, log: { from, messages: messages.slice(from) }, rest: { head: { version, messageCount, error }, state }, seq: { from: seq, to: this.#seq } });
    return parts.map((part) => ({ event: sseJsonEvent(part.json, { id: cursorId(part.cursor) }), id: cursorId(part.cursor) }));
  }

  /** What an update says besides its entries: the session's head, its log from `from`, its state. */
  #rest(from: number) {
    const { version, messageCount, error, state, messages } = this.#head;
    return { head: { version, messageCount, error }, log: { from, messages: messages.slice(from) }, state };
  }

  #update(entries: readonly ReadTraceEntry[], from: number): Sent {
    const id = cursorId({ seq: this.#seq, log: this.#head.messages.length });
    return { event: sseEvent({ entries, ...this.#rest(from) }, { id }), id };
  }

  #serial(work: () => Promise<void>): Promise<void> {
    const next = this.#work.then(work);
    this.#work = next.catch(() => {});
    return next;
  }
}

/** How long a feed started for a served page waits for the page's event stream before it stops. */
const PRIMED_GRACE_MS = 5_000;

/** The feeds of one server, one per watched session, opened on the first page and ended after the last. */
export class SessionFeeds {
  readonly #store: SessionStore;
  readonly #pollMs: number;
  readonly #readTrace: TraceReader | undefined;
  readonly #feeds = new Map<string, Promise<SessionFeed | undefined>>();

  constructor(store: SessionStore, pollMs: number, readTrace?: TraceReader) {
    this.#store = store;
    this.#pollMs = pollMs;
    this.#readTrace = readTrace;
  }

  /** The session's running feed, or undefined when there is no such session. */
  async feed(sessionId: string): Promise<SessionFeed | undefined> {
    for (;;) {
      const feed = await (this.#feeds.get(sessionId) ?? this.#start(sessionId, SessionFeed.open(this.#store, sessionId, this.#readTrace), 0));
      // A feed that went idle while this page waited: open a fresh one.
      if (!feed?.stopped) return feed;
    }
  }

  /**
   * A page of `view`'s session was just served: unless its session has a feed, one starts from
   * the view, kept for `PRIMED_GRACE_MS` without a page, so the page's event stream attaches to
   * it instead of loading the session's log again (on a 10,000-turn session, a quarter second of
   * the server's event loop right when the page is drawn).
   */
  prime(view: SessionView): void {
    if (this.#feeds.has(view.sessionId)) return;
    void this.#start(view.sessionId, Promise.resolve(SessionFeed.fromView(this.#store, view, this.#readTrace)), PRIMED_GRACE_MS);
  }

  #start(sessionId: string, opening: Promise<SessionFeed | undefined>, graceMs: number): Promise<SessionFeed | undefined> {
    this.#feeds.set(sessionId, opening);
    void opening.then(
      (feed) => {
        if (!feed) this.#feeds.delete(sessionId);
        else feed.poll(this.#pollMs, () => this.#feeds.get(sessionId) === opening && this.#feeds.delete(sessionId), graceMs);
      },
      () => this.#feeds.delete(sessionId),
    );
    return opening;
  }

  stopAll(): void {
    for (const pending of this.#feeds.values()) void pending.then((feed) => feed?.stop(), () => {});
    this.#feeds.clear();
  }
}

import type { ServerResponse } from 'node:http';
import { z } from 'zod';
import { LoopchartError } from '../errors.js';
import { parseOptions } from '../known-keys.js';

/**
 * Server-sent-event streams whose memory is bounded: a client that stops reading (a laptop
 * that sleeps, a stuck tab) is dropped once its unsent bytes pass a bound, with a reconnect
 * hint, instead of the server buffering every update for it until the heap runs out.
 */

const limit = z.number().int().min(1).max(2 ** 31);

/** How much a live client may fall behind, and what a dropped one is told. */
export const LiveLimitsSchema = z.strictObject({
  /**
   * Bytes a client may have waiting in the server (Node's buffers, above what the kernel
   * holds) before the next update drops it. An update larger than the bound still goes to a
   * client that has nothing waiting, so no single update is undeliverable. Default 1 MiB.
   */
  maxBufferedBytes: limit.default(1 << 20),
  /** The `retry:` a dropped client's EventSource waits before it reconnects (ms). Default 2,000. */
  retryMs: limit.default(2_000),
  /** A dropped client still not read out after this long is disconnected (ms). Default 10,000. */
  dropGraceMs: limit.default(10_000),
});
export type LiveLimits = z.output<typeof LiveLimitsSchema>;
export type LiveLimitsInput = z.input<typeof LiveLimitsSchema>;

/**
 * A viewer or inspector option out of range (say a live buffer bound of 0).
 *
 * @example
 * ```ts
 * try { await startViewer({ store, live: { maxBufferedBytes: 0 } }); } catch (e) { if (ViewerOptionsError.isInstance(e)) console.error(e.message); }
 * ```
 */
export class ViewerOptionsError extends LoopchartError {
  constructor(problem: string) {
    super('InvalidViewerOptions', `invalid viewer options: ${problem}`);
  }
}

/** The limits with their defaults, or ViewerOptionsError naming the field. */
export function liveLimits(input: LiveLimitsInput | undefined): LiveLimits {
  return parseOptions(LiveLimitsSchema, input ?? {}, 'live', (message) => new ViewerOptionsError(message));
}

/** What the live streams of one server hold now, and how many were dropped so far. */
export interface LiveStats {
  /** Streams open and following. */
  clients: number;
  /** Dropped streams whose socket has not closed yet (their buffered bytes count below). */
  dropping: number;
  /** Bytes written to live and dropping streams that their sockets have not taken yet. */
  bufferedBytes: number;
  /** Streams dropped since the server started for falling behind. */
  dropped: number;
}

/** One server-sent event, encoded once: the same bytes can go to every client. */
export function sseEvent(data: unknown, options: { id?: string | undefined; event?: string | undefined } = {}): Buffer {
  return sseJsonEvent(JSON.stringify(data), options);
}

/** One server-sent event whose data is already JSON text (one line: JSON.stringify escapes line breaks). */
export function sseJsonEvent(json: string, options: { id?: string | undefined; event?: string | undefined } = {}): Buffer {
  const head = `${options.id !== undefined ? `id: ${options.id}\n` : ''}${options.event !== undefined ? `event: ${options.event}\n` : ''}`;
  return Buffer.from(`${head}data: ${json}\n\n`);
}

/**
 * Where a stream's bytes go: a `node:http` response, or a Fetch response body (loopchart/http).
 * `writableLength` is what was written and not yet taken by the client's connection.
 */
export interface SseSink {
  readonly writableLength: number;
  write(chunk: Buffer): unknown;
  end(chunk?: Buffer): unknown;
  destroy(): unknown;
}

/**
 * The viewer's last words to a dropped page: a reconnect hint its EventSource follows, with the
 * id of the last event the page was sent (its cursor): the notice itself says where the
 * reconnect resumes, so it asks for what comes after what this stream delivered.
 */
const reconnectHint = (reason: string, limits: LiveLimits, lastId: string | undefined): Buffer =>
  Buffer.from(`retry: ${limits.retryMs}\n${lastId === undefined ? '' : `id: ${lastId}\n`}event: dropped\ndata: ${JSON.stringify({ reason })}\n\n`);

/** One client's stream. `send` refuses (and drops the client) rather than buffer past the bound. */
export class SseStream {
  readonly #res: SseSink;
  readonly #limits: LiveLimits;
  readonly #onDrop: () => void;
  readonly #dropNotice: (reason: string, limits: LiveLimits, lastId: string | undefined) => Buffer;
  #state: 'open' | 'dropped' | 'closed' = 'open';
  #grace: NodeJS.Timeout | undefined;
  /** The id of the last event written: what a drop notice repeats. */
  #lastId: string | undefined;
  /**
   * Bytes the sink held before the first event: the stream's own header, which Node sends on the
   * next tick. They are not the client's unread events: counted as such, a first event larger
   * than the bound minus the header (a long catch-up) dropped a client that had read everything.
   */
  #preamble: number;

  /** `dropNotice`: the last bytes a dropped client gets (default: the viewer's reconnect hint). */
  constructor(res: SseSink, limits: LiveLimits, onDrop: () => void, dropNotice = reconnectHint) {
    this.#res = res;
    this.#limits = limits;
    this.#onDrop = onDrop;
    this.#dropNotice = dropNotice;
    this.#preamble = res.writableLength;
  }

  get open(): boolean {
    return this.#state === 'open';
  }

  /** Bytes written to this client that its socket has not taken yet. */
  get buffered(): number {
    return this.#state === 'closed' ? 0 : this.#res.writableLength;
  }

  /** Writes one event (`id`: the id it carries); false when the client is gone or was dropped by this write. */
  send(chunk: Buffer, id?: string): boolean {
    if (this.#state !== 'open') return false;
    const waiting = Math.max(0, this.#res.writableLength - this.#preamble);
    if (waiting > 0 && waiting + chunk.length > this.#limits.maxBufferedBytes) {
      this.#drop(waiting);
      return false;
    }
    this.#res.write(chunk);
    this.#preamble = 0;
    if (id !== undefined) this.#lastId = id;
    return true;
  }

  /**
   * Resolves once the client took everything written to it (true), or false once it is gone.
   * Gives up after `dropGraceMs` (true: the next `send` then applies the bound as usual). A
   * page's catch-up waits on it between its events, so they never pile up past the bound.
   */
  async drained(): Promise<boolean> {
    // The monotonic clock: a wall clock stepped back must not keep this loop polling for as long.
    const until = performance.now() + this.#limits.dropGraceMs;
    while (this.#state === 'open' && this.#res.writableLength > 0 && performance.now() < until) await new Promise((resolve) => setTimeout(resolve, 2));
    return this.#state === 'open';
  }

  /** Ends the stream (the server closes, the session is gone), after `last` when given. */
  end(last?: Buffer): void {
    if (this.#state !== 'open') return;
    this.#state = 'dropped';
    this.#res.end(last);
  }

  /** The socket closed: nothing is held for this client any more. */
  closed(): void {
    this.#state = 'closed';
    clearTimeout(this.#grace);
  }

  #drop(waiting: number): void {
    this.#state = 'dropped';
    const reason = `this page fell behind (${waiting} bytes unread); reconnect to continue from its last event`;
    // The notice is the last thing in the stream: a client that wakes up reads what it missed, then this.
    this.#res.end(this.#dropNotice(reason, this.#limits, this.#lastId));
    this.#grace = setTimeout(() => this.#res.destroy(), this.#limits.dropGraceMs);
    this.#grace.unref();
    this.#onDrop();
  }
}

/** The live streams of one server: opened here, counted, all ended when the server closes. */
export class LiveStreams {
  readonly #limits: LiveLimits;
  readonly #streams = new Set<SseStream>();
  #dropped = 0;

  constructor(limits: LiveLimits) {
    this.#limits = limits;
  }

  /** Starts an event stream on `res`; `onClose` runs once its socket closes or the stream ends. */
  open(res: ServerResponse, onClose: (stream: SseStream) => void): SseStream {
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-store', 'x-content-type-options': 'nosniff' });
    res.write(`: loopchart\nretry: ${this.#limits.retryMs}\n\n`);
    const stream = new SseStream(res, this.#limits, () => this.#dropped++);
    this.#streams.add(stream);
    res.once('close', () => {
      stream.closed();
      this.#streams.delete(stream);
      onClose(stream);
    });
    return stream;
  }

  stats(): LiveStats {
    let clients = 0;
    let bufferedBytes = 0;
    for (const stream of this.#streams) {
      if (stream.open) clients++;
      bufferedBytes += stream.buffered;
    }
    return { clients, dropping: this.#streams.size - clients, bufferedBytes, dropped: this.#dropped };
  }

  endAll(): void {
    for (const stream of this.#streams) stream.end();
  }
}

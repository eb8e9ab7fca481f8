import type { AgentEmitted, AgentOutput } from '../agent/protocol/actor-types.js';
import { sseEvent, SseStream, type LiveLimits } from '../viewer/sse.js';
import type { Answer } from './denials.js';
import { ASKS, AUDIENCE, type Audience, type RunChunker, type UIChunk } from './ui-chunks.js';

/** The protocol's end of stream. */
const DONE = Buffer.from('data: [DONE]\n\n');

/**
 * Events after which the open step's text is void: a failed model attempt (the next attempt
 * writes its own) and an answer a tripped output guardrail refused (the run fails without it).
 */
const VOIDS_ATTEMPT: ReadonlySet<AgentEmitted['type']> = new Set(['model.retry', 'guardrail.tripped']);

/** What a dropped response reads last: an error chunk (the page can reattach), no `[DONE]`. */
const dropNotice = (reason: string): Buffer => sseEvent({ type: 'error', errorText: `${reason} (GET the chat's stream to reattach)` });

/** A chunk of the log, encoded once; `audience` and `asks` as the chunk had them (see `AUDIENCE`, `ASKS`). */
interface Entry {
  bytes: Buffer;
  audience?: Audience | undefined;
  asks?: string | undefined;
}

/**
 * One run of a chat as the responses that show it: every content chunk the run produced so far
 * (encoded once), and the responses attached to it, each bounded by the live limits. A response
 * attaches at a position: 0 replays the run's message from its start (a reattaching page, whose
 * `useChat` replaces the message it had with the replay), a later one continues it (the request
 * that answered an approval). Each is for an audience: a page that continues the message it holds
 * with its answers, or one that builds it from the response alone; a chunk for the other one is
 * not sent to it (how an answered call shows differs, see RunChunker's `#toolOutput`). Text of a
 * failed model attempt, and an answer a guardrail refused when it tripped, are taken out of the
 * replay.
 */
export class ChatRun {
  readonly chunker: RunChunker;
  readonly #log: Entry[] = [];
  /** Where the open step's text begins in the log (what a retry takes out). */
  #attemptAt: number | null = null;
  #closing: Buffer | null = null;
  readonly #responses = new Map<SseStream, Audience>();
  readonly #limits: LiveLimits;
  readonly #onDrop: () => void;

  constructor(chunker: RunChunker, limits: LiveLimits, onDrop: () => void) {
    this.chunker = chunker;
    this.#limits = limits;
    this.#onDrop = onDrop;
  }

  get run(): number {
    return this.chunker.run;
  }

  /** Chunks in the log: a response that attaches here gets only what comes next. */
  get length(): number {
    return this.#log.length;
  }

  get ended(): boolean {
    return this.#closing !== null;
  }

  /** Responses attached and following. */
  get responses(): ReadonlySet<SseStream> {
    return new Set(this.#responses.keys());
  }

  /** Adds what the run already stored (a run picked up from the store). */
  seed(chunks: readonly UIChunk[]): void {
    this.#add(chunks);
  }

  /** Adds what an emitted event shows, for every attached response. */
  event(event: AgentEmitted): void {
    const chunks = this.chunker.event(event);
    if (VOIDS_ATTEMPT.has(event.type) && this.#attemptAt !== null) {
      // The attempt's text is void: a reattaching page must not get it.
      this.#log.length = this.#attemptAt;
      this.#attemptAt = null;
      this.#broadcast(chunks);
      return;
    }
    this.#add(chunks);
  }

  /** Adds what the page's answer to a call shows (see RunChunker.answer). */
  answer(toolCallId: string, answer: Answer): void {
    this.#add(this.chunker.answer(toolCallId, answer));
  }

  /** Adds what a subagent's event shows (`via`: the id of the call that runs it, see RunChunker.childEvent). */
  childEvent(via: string, event: AgentEmitted): void {
    if (this.#closing) return;
    this.#add(this.chunker.childEvent(via, event));
  }

  /**
   * Ends every response: the run finished (its output) or waits for someone (null);
   * `pausedChildren`: the subagents whose budget pause is all it waits on (see RunChunker.closing).
   */
  close(output: AgentOutput | null, pausedChildren: readonly string[] = []): void {
    if (this.#closing) return;
    this.#add(this.chunker.pause());
    this.#end(Buffer.concat([sseEvent(this.chunker.closing(output, pausedChildren)), DONE]));
  }

  /**
   * Ends every response while the run goes on elsewhere (the handler closed, this process lets
   * go of it): an error chunk that says to reattach, as a dropped response reads, not a finish
   * that would tell the page the run waits for a decision.
   */
  interrupt(reason: string): void {
    if (this.#closing) return;
    this.#end(dropNotice(reason));
  }

  /** Ends every response with an error: the run stopped under them (its session failed). */
  fail(message: string): void {
    if (this.#closing) return;
    this.#add([...this.chunker.pause(), { type: 'error', errorText: message }]);
    this.#end(Buffer.concat([sseEvent({ type: 'finish', finishReason: 'error' }), DONE]));
  }

  /** Ends every response with `closing`, which a response attaching later reads too. */
  #end(closing: Buffer): void {
    this.#closing = closing;
    for (const stream of this.#responses.keys()) stream.end(closing);
    this.#responses.clear();
  }

  /** Attaches a response for `audience` at `from` (see the class): `start`, the log from there, then live chunks until the run ends. */
  attach(sink: ConstructorParameters<typeof SseStream>[0], from: number, audience: Audience = from === 0 ? 'replaying' : 'continuing'): SseStream {
    const stream = new SseStream(sink, this.#limits, this.#onDrop, dropNotice);
    const backlog = [sseEvent(this.chunker.start()[0]), ...this.#for(audience, this.#log.slice(from))];
    // One write: the backlog of a long run is one buffer, not thousands of small ones.
    if (!stream.send(Buffer.concat(backlog))) return stream;
    if (this.#closing) stream.end(this.#closing);
    else this.#responses.set(stream, audience);
    return stream;
  }

  /** The bytes of `entries` a response for `audience` gets (a replay leaves out the requests RunChunker.withholds). */
  #for(audience: Audience, entries: readonly Entry[]): Buffer[] {
    const out: Buffer[] = [];
    for (const entry of entries) {
      if (entry.audience !== undefined && entry.audience !== audience) continue;
      if (audience === 'replaying' && entry.asks !== undefined && this.chunker.withholds(entry.asks)) continue;
      out.push(entry.bytes);
    }
    return out;
  }

  detach(stream: SseStream): void {
    this.#responses.delete(stream);
  }

  #add(chunks: readonly UIChunk[]): void {
    for (const chunk of chunks) {
      if (chunk.type === 'start-step') this.#attemptAt = null;
      else if (chunk.type === 'text-start' && this.#attemptAt === null) this.#attemptAt = this.#log.length;
      this.#log.push(entryOf(chunk));
    }
    this.#broadcast(chunks, this.#log.length - chunks.length);
  }

  /** Sends chunks to every response; `at` is where they sit in the log (encoded there already). */
  #broadcast(chunks: readonly UIChunk[], at?: number): void {
    if (chunks.length === 0 || this.#responses.size === 0) return;
    const entries = at === undefined ? chunks.map(entryOf) : this.#log.slice(at);
    // Most chunks are for every page: encoded together once.
    const same = entries.every((entry) => entry.audience === undefined && entry.asks === undefined) ? Buffer.concat(entries.map((entry) => entry.bytes)) : null;
    const bytes = new Map<Audience, Buffer>();
    for (const [stream, audience] of this.#responses) {
      let sent = same ?? bytes.get(audience);
      if (!sent) bytes.set(audience, (sent = Buffer.concat(this.#for(audience, entries))));
      if (sent.length > 0 && !stream.send(sent)) this.#responses.delete(stream);
    }
  }
}

const entryOf = (chunk: UIChunk): Entry => ({ bytes: sseEvent(chunk), audience: chunk[AUDIENCE], asks: chunk[ASKS] });

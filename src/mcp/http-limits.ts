import type { FetchLike } from '@modelcontextprotocol/sdk/shared/transport.js';
import { RESULT_TOO_LARGE_CODE } from './stdio-transport.js';

/*
 * The fetch loopchart gives the SDK's Streamable HTTP transport, which reads whatever a server
 * sends whole: a JSON answer, one event of an SSE stream, the body of an error status (quoted in
 * the error's message, which becomes the tool result the model reads). Here each is bounded as a
 * stdio line is: an answer or an event over `maxMessageBytes` is never held, and the request it
 * answers fails with the same too-large error as over stdio (`McpResultTooLargeError` for a tool
 * call); the connection stays. An error status's body is cut to its first few KiB.
 */

/** The JSON-RPC error code of a request whose answer's event stream ended without the answer. */
export const STREAM_ENDED_CODE = -32_092;

/** Bytes of an error status's body kept for the error message. */
export const ERROR_BODY_BYTES = 4096;

/** A fetch that bounds what the server's responses may make this process hold (see above). */
export function boundedFetch(maxMessageBytes: number, base: FetchLike = fetch): FetchLike {
  return async (url, init) => {
    const response = await base(url, init);
    if (!response.body || (response.status >= 300 && response.status < 400)) return response;
    if (!response.ok) return rebuilt(response, await readAtMost(response.body, ERROR_BODY_BYTES, true));
    const requestId = requestIdOf(init?.body);
    const type = (response.headers.get('content-type') ?? '').split(';')[0]!.trim().toLowerCase();
    if (type === 'application/json') {
      const read = await readAtMost(response.body, maxMessageBytes, false);
      if (!read.over) return rebuilt(response, read);
      const declared = Number(response.headers.get('content-length'));
      const bytes = Number.isSafeInteger(declared) && declared > maxMessageBytes ? declared : read.bytes;
      if (requestId === undefined) throw new Error(`the MCP server sent an answer of ${bytes} bytes or more, over the limit of ${maxMessageBytes}`);
      const body = JSON.stringify(tooLarge(requestId, bytes, maxMessageBytes, bytes === read.bytes));
      return rebuilt(response, { chunks: [new TextEncoder().encode(body)], bytes: body.length, over: false });
    }
    if (type === 'text/event-stream') return rebuilt(response, boundedEvents(response.body, maxMessageBytes, requestId));
    return response;
  };
}

type RequestId = string | number;

/** The id of the JSON-RPC request a POST carries (undefined for a notification, an answer, a batch, a GET). */
function requestIdOf(body: unknown): RequestId | undefined {
  if (typeof body !== 'string') return undefined;
  try {
    const message = JSON.parse(body) as { method?: unknown; id?: unknown } | null;
    if (typeof message !== 'object' || message === null || typeof message.method !== 'string') return undefined;
    return typeof message.id === 'string' || typeof message.id === 'number' ? message.id : undefined;
  } catch {
    return undefined;
  }
}

/** The error answer the transport hands the SDK in place of an answer over the limit. */
function tooLarge(id: RequestId, bytes: number, limit: number, atLeast: boolean) {
  const size = atLeast ? `${bytes} bytes or more` : `${bytes} bytes`;
  return { jsonrpc: '2.0', id, error: { code: RESULT_TOO_LARGE_CODE, message: `the answer is ${size}, over the limit of ${limit}`, data: { bytes, limit, atLeast } } };
}

interface Read {
  chunks: Uint8Array[];
  bytes: number;
  /** The body went on past the limit (its read was stopped there). */
  over: boolean;
}

/** The body up to `limit` bytes; past it the read stops (the rest is cancelled) and, if `cut`, what was read is kept. */
async function readAtMost(body: ReadableStream<Uint8Array>, limit: number, cut: boolean): Promise<Read> {
  const reader = body.getReader();
  const chunks: Uint8Array[] = [];
  let bytes = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return { chunks, bytes, over: false };
      bytes += value.byteLength;
      if (bytes > limit) {
        await reader.cancel().catch(() => {});
        if (!cut) return { chunks: [], bytes, over: true };
        chunks.push(value.subarray(0, value.byteLength - (bytes - limit)));
        chunks.push(new TextEncoder().encode(`… [cut at ${limit} bytes]`));
        return { chunks, bytes: limit, over: true };
      }
      chunks.push(value);
    }
  } finally {
    reader.releaseLock();
  }
}

/** The response with another body, its status and headers kept (less those that described the old body). */
function rebuilt(response: Response, body: Read | ReadableStream<Uint8Array>): Response {
  const headers = new Headers(response.headers);
  headers.delete('content-length');
  headers.delete('content-encoding');
  const content = body instanceof ReadableStream ? body : new Blob(body.chunks as BlobPart[]);
  return new Response(content, { status: response.status, statusText: response.statusText, headers });
}

const LF = 0x0a;
const CR = 0x0d;

/**
 * An SSE stream passed on event by event, each held until its blank line: an event over `limit`
 * bytes is skipped as it streams in and, on a POST's stream, replaced by the error answer to the
 * POST's request (on the standalone GET stream, which answers no request, it is dropped). A
 * POST's stream that ends, or breaks (the server died), before answering its request, and gave
 * no event id to resume from, ends with an error answer: the SDK would wait for the call's timeout.
 */
function boundedEvents(source: ReadableStream<Uint8Array>, limit: number, requestId: RequestId | undefined): ReadableStream<Uint8Array> {
  const reader = source.getReader();
  const events = new EventSplitter(limit, requestId);
  return new ReadableStream<Uint8Array>({
    // Reads until something is passed on: a pull that enqueues nothing is not called again.
    async pull(controller) {
      const before = events.passed;
      while (events.passed === before) {
        let next: ReadableStreamReadResult<Uint8Array>;
        try {
          next = await reader.read();
        } catch (error) {
          // The transport's own abort (close) ends the stream as it would have.
          if ((error as { name?: unknown })?.name === 'AbortError') return controller.error(error);
          return events.finish(controller, 'broke off');
        }
        if (next.done) return events.finish(controller, 'ended');
        events.split(next.value, controller);
      }
    },
    cancel: (reason) => reader.cancel(reason),
  });
}

type Out = ReadableStreamDefaultController<Uint8Array>;

/** Where `boundedEvents` is in its stream: the event being held or skipped, the line being read, and whether the request is answered. */
class EventSplitter {
  /** Chunks passed on so far. */
  passed = 0;
  readonly #limit: number;
  readonly #requestId: RequestId | undefined;
  #held: Uint8Array[] = [];
  #heldBytes = 0;
  /** Bytes of the event being skipped, or -1 while none is. */
  #skipped = -1;
  #lineHasContent = false;
  #lastWasCr = false;
  #answered: boolean;
  /** The server gave an event id: the SDK may resume the stream, and the answer come then. */
  #resumable = false;
  readonly #encoder = new TextEncoder();

  constructor(limit: number, requestId: RequestId | undefined) {
    this.#limit = limit;
    this.#requestId = requestId;
    this.#answered = requestId === undefined;
  }

  /** Passes on the events `chunk` completes, holds the one it starts. */
  split(chunk: Uint8Array, out: Out): void {
    let from = 0;
    for (let i = 0; i < chunk.length; i++) {
      const byte = chunk[i]!;
      if (byte === LF && this.#lastWasCr) {
        // The LF of a CRLF whose CR ended a line (passed on with what follows).
        this.#lastWasCr = false;
        continue;
      }
      this.#lastWasCr = byte === CR;
      if (byte !== LF && byte !== CR) {
        this.#lineHasContent = true;
        continue;
      }
      if (this.#lineHasContent) {
        this.#lineHasContent = false;
        continue;
      }
      // A blank line: the event ends with this byte (and the LF of a CRLF in the same chunk).
      const end = byte === CR && chunk[i + 1] === LF ? i + 2 : i + 1;
      this.#keep(chunk.subarray(from, end));
      from = end;
      if (end === i + 2) {
        i++;
        this.#lastWasCr = false;
      }
      this.#endEvent(out);
    }
    this.#keep(chunk.subarray(from));
  }

  /** The stream is over: what is held goes on, and a request still unanswered is answered with an error. */
  finish(out: Out, how: string): void {
    if (this.#skipped >= 0) this.#endEvent(out);
    else for (const chunk of this.#held) this.#pass(out, chunk);
    this.#held = [];
    if (!this.#answered && !this.#resumable) this.#answer(out, { code: STREAM_ENDED_CODE, message: `the MCP server ${how} the answer's event stream without answering` });
    out.close();
  }

  #pass(out: Out, chunk: Uint8Array): void {
    this.passed++;
    out.enqueue(chunk);
  }

  #answer(out: Out, error: object): void {
    this.#answered = true;
    this.#pass(out, this.#encoder.encode(`event: message\ndata: ${JSON.stringify({ jsonrpc: '2.0', id: this.#requestId, error })}\n\n`));
  }

  /** Notes what a whole event says: an event id, the answer to the request. */
  #read(event: Uint8Array[]): void {
    if (this.#answered && this.#resumable) return;
    const lines = new TextDecoder().decode(concat(event)).split(/\r\n|\r|\n/);
    if (lines.some((line) => /^id:/.test(line))) this.#resumable = true;
    const data = lines.filter((line) => line.startsWith('data:')).map((line) => line.slice(line.startsWith('data: ') ? 6 : 5));
    if (this.#answered || data.length === 0) return;
    try {
      const message = JSON.parse(data.join('\n')) as { id?: unknown; method?: unknown } | null;
      if (message !== null && typeof message === 'object' && message.method === undefined && message.id === this.#requestId) this.#answered = true;
    } catch {
      // Not JSON: the SDK reports it.
    }
  }

  #endEvent(out: Out): void {
    if (this.#skipped >= 0) {
      if (!this.#answered) this.#answer(out, tooLarge(this.#requestId!, this.#skipped, this.#limit, false).error);
      this.#skipped = -1;
      return;
    }
    this.#read(this.#held);
    for (const chunk of this.#held) this.#pass(out, chunk);
    this.#held = [];
    this.#heldBytes = 0;
  }

  #keep(part: Uint8Array): void {
    if (part.length === 0) return;
    if (this.#skipped < 0 && this.#heldBytes + part.length > this.#limit) {
      this.#skipped = this.#heldBytes;
      this.#held = [];
      this.#heldBytes = 0;
    }
    if (this.#skipped >= 0) {
      this.#skipped += part.length;
      return;
    }
    this.#held.push(part);
    this.#heldBytes += part.length;
  }
}

function concat(chunks: Uint8Array[]): Uint8Array {
  if (chunks.length === 1) return chunks[0]!;
  const all = new Uint8Array(chunks.reduce((sum, chunk) => sum + chunk.length, 0));
  let at = 0;
  for (const chunk of chunks) {
    all.set(chunk, at);
    at += chunk.length;
  }
  return all;
}

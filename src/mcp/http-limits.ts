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
  const encoder = new TextEncoder();
  let held: Uint8Array[] = [];
  let heldBytes = 0;
  /** Bytes of the event being skipped, or -1 while none is. */
  let skipped = -1;
  let lineHasContent = false;
  let lastWasCr = false;
  let answered = requestId === undefined;
  /** The server gave an event id: the SDK may resume the stream, and the answer come then. */
  let resumable = false;
  /** Chunks passed on so far. */
  let passed = 0;
  const pass = (controller: ReadableStreamDefaultController<Uint8Array>, chunk: Uint8Array) => {
    passed++;
    controller.enqueue(chunk);
  };

  const answer = (controller: ReadableStreamDefaultController<Uint8Array>, error: object) => {
    answered = true;
    pass(controller, encoder.encode(`event: message\ndata: ${JSON.stringify({ jsonrpc: '2.0', id: requestId, error })}\n\n`));
  };

  /** Notes what a whole event says: an event id, the answer to the request. */
  const read = (event: Uint8Array[]) => {
    if (answered && resumable) return;
    const lines = new TextDecoder().decode(concat(event)).split(/\r\n|\r|\n/);
    if (lines.some((line) => /^id:/.test(line))) resumable = true;
    const data = lines.filter((line) => line.startsWith('data:')).map((line) => line.slice(line.startsWith('data: ') ? 6 : 5));
    if (answered || data.length === 0) return;
    try {
      const message = JSON.parse(data.join('\n')) as { id?: unknown; method?: unknown } | null;
      if (message !== null && typeof message === 'object' && message.method === undefined && message.id === requestId) answered = true;
    } catch {
      // Not JSON: the SDK reports it.
    }
  };

  const endEvent = (controller: ReadableStreamDefaultController<Uint8Array>) => {
    if (skipped >= 0) {
      if (!answered) answer(controller, tooLarge(requestId!, skipped, limit, false).error);
      skipped = -1;
      return;
    }
    read(held);
    for (const chunk of held) pass(controller, chunk);
    held = [];
    heldBytes = 0;
  };

  const keep = (part: Uint8Array) => {
    if (part.length === 0) return;
    if (skipped < 0 && heldBytes + part.length > limit) {
      skipped = heldBytes;
      held = [];
      heldBytes = 0;
    }
    if (skipped >= 0) {
      skipped += part.length;
      return;
    }
    held.push(part);
    heldBytes += part.length;
  };

  const split = (chunk: Uint8Array, controller: ReadableStreamDefaultController<Uint8Array>) => {
    let from = 0;
    for (let i = 0; i < chunk.length; i++) {
      const byte = chunk[i]!;
      if (byte === LF && lastWasCr) {
        // The LF of a CRLF whose CR ended a line (passed on with what follows).
        lastWasCr = false;
        continue;
      }
      lastWasCr = byte === CR;
      if (byte !== LF && byte !== CR) {
        lineHasContent = true;
        continue;
      }
      if (lineHasContent) {
        lineHasContent = false;
        continue;
      }
      // A blank line: the event ends with this byte (and the LF of a CRLF in the same chunk).
      const end = byte === CR && chunk[i + 1] === LF ? i + 2 : i + 1;
      keep(chunk.subarray(from, end));
      from = end;
      if (end === i + 2) {
        i++;
        lastWasCr = false;
      }
      endEvent(controller);
    }
    keep(chunk.subarray(from));
  };

  /** The stream is over: what is held goes on, and a request still unanswered is answered with an error. */
  const finish = (controller: ReadableStreamDefaultController<Uint8Array>, how: string) => {
    if (skipped >= 0) endEvent(controller);
    else for (const chunk of held) pass(controller, chunk);
    held = [];
    if (!answered && !resumable) answer(controller, { code: STREAM_ENDED_CODE, message: `the MCP server ${how} the answer's event stream without answering` });
    controller.close();
  };

  return new ReadableStream<Uint8Array>({
    // Reads until something is passed on: a pull that enqueues nothing is not called again.
    async pull(controller) {
      const before = passed;
      while (passed === before) {
        let next: ReadableStreamReadResult<Uint8Array>;
        try {
          next = await reader.read();
        } catch (error) {
          // The transport's own abort (close) ends the stream as it would have.
          if ((error as { name?: unknown })?.name === 'AbortError') return controller.error(error);
          return finish(controller, 'broke off');
        }
        if (next.done) return finish(controller, 'ended');
        split(next.value, controller);
      }
    },
    cancel: (reason) => reader.cancel(reason),
  });
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

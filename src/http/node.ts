import type { IncomingMessage, ServerResponse } from 'node:http';

/**
 * A Fetch API handler as a `node:http` request listener (also Express: `app.all('/api/chat*',
 * toNodeListener(chat))`): the request becomes a `Request` whose signal aborts when the client
 * goes away, and the response body is written with backpressure (a client that does not read
 * holds the writer, and the handler's bound on what it queues applies).
 *
 * The request's URL is `http://localhost` and the request target: the `Host` header never takes
 * part in routing (it is passed on as a header). A target that is not a path (`*`, an absolute
 * URL) or a malformed `Host` is a 400 with a JSON error. A response sent before the request body
 * was read to its end (a 413) closes the connection once the client has sent its body.
 *
 * @example
 * ```ts
 * import { createServer } from 'node:http';
 * import { createChatHandler, toNodeListener } from 'loopchart/http';
 *
 * createServer(toNodeListener(createChatHandler({ machine, store }))).listen(3000, '127.0.0.1');
 * ```
 */
export function toNodeListener(handler: (request: Request) => Promise<Response>): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    void serve(handler, req, res).catch(() => {
      if (res.headersSent) res.destroy();
      else res.writeHead(500, { 'content-type': 'application/json; charset=utf-8', connection: 'close' }).end('{"error":{"code":"Internal","message":"the handler failed"}}');
    });
  };
}

/** The origin every request is given: routing reads the path only, never a name the client chose. */
const FIXED_ORIGIN = 'http://localhost';

/** A `Host` header as RFC 9110 allows it: a reg-name, IPv4 or bracketed IPv6 literal, and an optional port. */
const HOST = /^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9\-._~!$&'()*+,;=%]+)(?::\d{0,5})?$/;

/** How long the rest of an unread request body is read and dropped after the response (so the client gets to read it) before the socket is dropped. */
const DRAIN_MS = 5_000;

/** Why the request line or `Host` cannot be taken, or null. */
function requestProblem(req: IncomingMessage): string | null {
  const target = req.url ?? '';
  if (!target.startsWith('/')) return 'the request target must be a path starting with / (origin-form)';
  const host = req.headers.host;
  if (host !== undefined && !HOST.test(host)) return 'the Host header is not a host name with an optional port';
  return null;
}

const jsonError = (status: number, code: string, message: string): Response => {
  const text = JSON.stringify({ error: { code, message } });
  return new Response(text, {
    status,
    headers: { 'content-type': 'application/json; charset=utf-8', 'content-length': String(Buffer.byteLength(text)), 'cache-control': 'no-store' },
  });
};

/** The request as a Fetch `Request` on the fixed origin, or why it cannot be one. */
function fetchRequest(req: IncomingMessage, body: NodeBody | undefined, signal: AbortSignal): Request | string {
  const problem = requestProblem(req);
  if (problem) return problem;
  try {
    const url = new URL(FIXED_ORIGIN + req.url);
    if (url.origin !== FIXED_ORIGIN) return 'the request target names another origin';
    const headers = new Headers();
    for (const [name, value] of Object.entries(req.headers)) {
      if (value === undefined) continue;
      for (const item of Array.isArray(value) ? value : [value]) headers.append(name, item);
    }
    return new Request(url, { method: req.method, headers, signal, ...(body && { body: body.stream, duplex: 'half' }) } as RequestInit);
  } catch (error) {
    return `the request cannot be read: ${error instanceof Error ? error.message : 'unknown'}`;
  }
}

async function serve(handler: (request: Request) => Promise<Response>, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const aborted = new AbortController();
  const body = req.method !== 'GET' && req.method !== 'HEAD' ? new NodeBody(req) : undefined;
  const request = fetchRequest(req, body, aborted.signal);
  const onClose = () => aborted.abort();
  res.once('close', onClose);
  const response = typeof request === 'string' ? jsonError(400, 'InvalidRequest', request) : await handler(request);
  const headers = Object.fromEntries(response.headers);
  // Answered before the whole body was read (a 413, a refusal): this connection cannot carry another request.
  const rest = body !== undefined && !req.complete ? body.discard() : undefined;
  if (rest) headers.connection = 'close';
  res.writeHead(response.status, headers);
  if (response.body) await pipe(response.body, res);
  if (rest && !(await rest)) {
    res.destroy();
    return;
  }
  res.end();
}

/** Writes a response body with backpressure, until it ends or the client goes away. */
async function pipe(body: ReadableStream<Uint8Array>, res: ServerResponse): Promise<void> {
  const reader = body.getReader();
  const cancel = () => void reader.cancel().catch(() => {});
  // A client gone before the response began (during a slow \`authorize\` or store read) closed
  // \`res\` already: its 'close' will not come again, and the body would be followed for nobody.
  if (res.destroyed) return cancel();
  res.once('close', cancel);
  let ended = false;
  try {
    for (;;) {
      const { done, value } = await reader.read().catch(() => ({ done: true as const, value: undefined }));
      if (done) {
        ended = true;
        break;
      }
      if (res.destroyed) break;
      if (!res.write(value)) await drained(res);
    }
  } finally {
    res.off('close', cancel);
    // However the loop left, a body not read to its end is let go: its producer stops queueing for it.
    if (!ended) cancel();
  }
}

/** Resolves once `res` can take more or is gone; both listeners go with it (there is one wait per full buffer, thousands on a long stream). */
function drained(res: ServerResponse): Promise<void> {
  return new Promise<void>((resolve) => {
    const done = () => {
      res.off('drain', done);
      res.off('close', done);
      resolve();
    };
    res.on('drain', done);
    res.on('close', done);
  });
}

/**
 * A request body as a web stream that reads on demand. Cancelling it (a body over the limit)
 * leaves the request open, where `Readable.toWeb` would destroy it and with it the socket,
 * before the client could read the response.
 */
class NodeBody {
  readonly stream: ReadableStream<Uint8Array>;
  readonly #req: IncomingMessage;
  #done = false;

  constructor(req: IncomingMessage) {
    this.#req = req;
    // A client gone mid-body errors the request: without a listener that would be thrown.
    req.on('error', () => {});
    const onData = (chunk: Buffer) => {
      if (this.#done) return;
      this.#controller.enqueue(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength));
      if ((this.#controller.desiredSize ?? 0) <= 0) req.pause();
    };
    this.stream = new ReadableStream<Uint8Array>(
      {
        start: (controller) => {
          this.#controller = controller;
          req.on('data', onData);
          req.pause();
          req.once('end', () => this.#finish(() => controller.close()));
          req.once('error', (error) => this.#finish(() => controller.error(error)));
        },
        pull: () => {
          req.resume();
        },
        cancel: () => {
          this.#done = true;
          req.off('data', onData);
          req.pause();
        },
      },
      { highWaterMark: 64 * 1024, size: (chunk) => chunk.byteLength },
    );
  }

  #controller!: ReadableStreamDefaultController<Uint8Array>;

  #finish(settle: () => void): void {
    if (this.#done) return;
    this.#done = true;
    settle();
  }

  /**
   * The response goes out before the body was read: the rest is read and dropped, so a client
   * that sends its whole body before reading gets the response, not a reset (closing a socket
   * with unread bytes sends one). True once the body ended, false when it did not within DRAIN_MS.
   */
  discard(): Promise<boolean> {
    const req = this.#req;
    this.#done = true;
    req.removeAllListeners('data');
    if (req.complete) return Promise.resolve(true);
    return new Promise<boolean>((resolve) => {
      const finish = () => {
        clearTimeout(timer);
        req.off('end', finish);
        req.off('close', finish);
        resolve(req.complete);
      };
      const timer = setTimeout(finish, DRAIN_MS);
      req.on('end', finish);
      req.on('close', finish);
      req.resume();
    });
  }
}

import type { IncomingMessage, ServerResponse } from 'node:http';
import { Readable } from 'node:stream';

/**
 * A Fetch API handler as a `node:http` request listener (also Express: `app.all('/api/chat*',
 * toNodeListener(chat))`): the request becomes a `Request` whose signal aborts when the client
 * goes away, and the response body is written with backpressure (a client that does not read
 * holds the writer, and the handler's bound on what it queues applies).
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
    void serve(handler, req, res).catch(() => res.destroy());
  };
}

async function serve(handler: (request: Request) => Promise<Response>, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const aborted = new AbortController();
  res.once('close', () => aborted.abort());
  const headers = new Headers();
  for (const [name, value] of Object.entries(req.headers)) {
    if (value === undefined) continue;
    for (const item of Array.isArray(value) ? value : [value]) headers.append(name, item);
  }
  const hasBody = req.method !== 'GET' && req.method !== 'HEAD';
  const request = new Request(`http://${req.headers.host ?? '127.0.0.1'}${req.url ?? '/'}`, {
    method: req.method,
    headers,
    signal: aborted.signal,
    ...(hasBody && { body: Readable.toWeb(req) as ReadableStream<Uint8Array>, duplex: 'half' }),
  } as RequestInit);
  const response = await handler(request);
  res.writeHead(response.status, Object.fromEntries(response.headers));
  if (!response.body) {
    res.end();
    return;
  }
  const reader = response.body.getReader();
  res.once('close', () => void reader.cancel().catch(() => {}));
  for (;;) {
    const { done, value } = await reader.read().catch(() => ({ done: true as const, value: undefined }));
    if (done || res.destroyed) break;
    if (!res.write(value)) await new Promise<void>((resolve) => {
      res.once('drain', resolve);
      res.once('close', resolve);
    });
  }
  res.end();
}

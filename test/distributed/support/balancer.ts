/**
 * A round-robin HTTP/2 load balancer in front of several worker processes, as a deployment would
 * have one: Restate registers one URL (this), and each invocation's stream goes to the next live
 * worker. Streams are proxied one by one (not connections), since Restate multiplexes many
 * invocations over one HTTP/2 connection. A worker that fails is skipped until it answers again.
 */
import http2 from 'node:http2';

export interface Balancer {
  readonly url: string;
  /** How many streams each backend was given. */
  readonly counts: Map<string, number>;
  close(): Promise<void>;
}

/** How long a backend that failed is skipped before it is tried again. */
const DOWN_FOR_MS = 3_000;

export async function startBalancer(backends: readonly string[]): Promise<Balancer> {
  const sessions = new Map<string, http2.ClientHttp2Session>();
  const down = new Map<string, number>();
  const counts = new Map<string, number>(backends.map((backend) => [backend, 0]));
  let next = 0;
  const sessionFor = (backend: string) => {
    let session = sessions.get(backend);
    if (!session || session.closed || session.destroyed) {
      session = http2.connect(backend);
      const current = session;
      const forget = () => {
        if (sessions.get(backend) === current) sessions.delete(backend);
      };
      current.on('error', () => {
        down.set(backend, Date.now());
        forget();
      });
      current.on('close', forget);
      sessions.set(backend, current);
    }
    return session;
  };
  const pick = (): string => {
    for (let tries = 0; tries < backends.length; tries++) {
      const backend = backends[next++ % backends.length]!;
      const since = down.get(backend);
      if (since === undefined || Date.now() - since > DOWN_FOR_MS) return backend;
    }
    return backends[next++ % backends.length]!;
  };
  const server = http2.createServer();
  // Restate keeps its connections open: closing the balancer ends them.
  const incoming = new Set<http2.ServerHttp2Session>();
  server.on('session', (session) => {
    incoming.add(session);
    session.on('close', () => incoming.delete(session));
  });
  server.on('stream', (stream, headers) => {
    const backend = pick();
    counts.set(backend, (counts.get(backend) ?? 0) + 1);
    const forwarded: http2.OutgoingHttpHeaders = {};
    for (const [name, value] of Object.entries(headers)) {
      if (name === ':authority' || name === ':scheme') continue;
      forwarded[name] = value;
    }
    let upstream: http2.ClientHttp2Stream;
    try {
      upstream = sessionFor(backend).request(forwarded, { endStream: false });
    } catch {
      down.set(backend, Date.now());
      stream.close(http2.constants.NGHTTP2_REFUSED_STREAM);
      return;
    }
    upstream.on('response', (responseHeaders) => {
      const out: http2.OutgoingHttpHeaders = {};
      for (const [name, value] of Object.entries(responseHeaders)) if (!name.startsWith(':') || name === ':status') out[name] = value;
      if (!stream.destroyed) stream.respond(out);
      upstream.pipe(stream);
    });
    upstream.on('error', () => down.set(backend, Date.now()));
    // A backend that died mid-stream (SIGKILL): the caller must see a failed stream, not a hang.
    upstream.on('close', () => {
      if (upstream.rstCode !== http2.constants.NGHTTP2_NO_ERROR || !upstream.readableEnded) {
        if (!stream.destroyed) stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR);
      }
    });
    stream.on('error', () => upstream.close(http2.constants.NGHTTP2_CANCEL));
    stream.on('close', () => {
      if (!upstream.destroyed) upstream.close(http2.constants.NGHTTP2_CANCEL);
    });
    stream.pipe(upstream);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    counts,
    close: async () => {
      for (const session of sessions.values()) session.destroy();
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const session of incoming) session.destroy();
      await closed;
    },
  };
}

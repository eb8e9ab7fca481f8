/**
 * A live stream's wait for a slow client to take what was written (`drained`, which a page's
 * catch-up awaits between its events) gives up after `dropGraceMs` on the process's monotonic
 * clock. Before, it polled every 2 ms until `Date.now()` passed a deadline read from `Date.now()`:
 * a wall clock stepped back an hour during the wait kept it polling for that hour, the page's
 * catch-up held with it. Real HTTP on 127.0.0.1, a client that never reads.
 */
import { once } from 'node:events';
import { createServer, type ServerResponse } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { LiveLimitsSchema, SseStream } from '../../src/viewer/sse.js';

afterEach(() => {
  vi.restoreAllMocks();
});

describe('a stream waiting for a client that does not read', () => {
  it('gives up after dropGraceMs though the wall clock stepped back an hour', async () => {
    const responses: ServerResponse[] = [];
    const server = createServer((_, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      responses.push(res);
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    let socket: Socket | undefined;
    try {
      socket = connect((server.address() as AddressInfo).port, '127.0.0.1');
      await once(socket, 'connect');
      socket.pause(); // never reads: what is written stays in the server's buffers
      socket.write('GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
      await expect.poll(() => responses.length, { timeout: 5_000 }).toBe(1);
      const stream = new SseStream(responses[0]!, LiveLimitsSchema.parse({ maxBufferedBytes: 1 << 30, dropGraceMs: 300 }), () => {});
      // More than the kernel's socket buffers take: some of it waits in Node's.
      expect(stream.send(Buffer.alloc(32 << 20, 'x'))).toBe(true);
      expect(stream.buffered).toBeGreaterThan(0);

      const realNow = Date.now.bind(Date);
      let offset = 0;
      vi.spyOn(Date, 'now').mockImplementation(() => realNow() + offset);
      const started = performance.now();
      const draining = stream.drained();
      offset = -3_600_000;
      const gaveUp = await Promise.race([draining, new Promise<'still waiting'>((resolve) => setTimeout(() => resolve('still waiting'), 3_000))]);
      expect(gaveUp).toBe(true);
      // Held to the grace: at least its 300 ms, and not the hour the wall clock went back.
      expect(performance.now() - started).toBeGreaterThanOrEqual(290);
      expect(stream.buffered).toBeGreaterThan(0);
    } finally {
      vi.restoreAllMocks();
      socket?.destroy();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});

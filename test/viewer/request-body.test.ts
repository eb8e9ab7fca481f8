/**
 * A request that comes with a body the client trickles or never ends, over real HTTP on
 * 127.0.0.1, to the viewer and to the inspector (neither reads a body). Before, each answered at
 * once but Node kept the socket open waiting for the rest of the body, until its requestTimeout
 * (300 s by default): a client held a socket per request for five minutes. Now the answer closes
 * the connection; a request without a body keeps its connection as before.
 */
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MemorySessionStore } from '../../src/index.js';
import { startViewer, viewerInspector, type RunningViewer, type ViewerInspector } from '../../src/viewer.js';

/**
 * Sends `method path` with a 100-byte Content-Length and 5 bytes of it, then nothing; resolves
 * with the status line and whether the server closed the socket within `ms` (then it is closed here).
 */
function trickled(port: number, method: string, path: string, ms: number, body = true): Promise<{ status: string; closed: boolean }> {
  const socket = connect(port, '127.0.0.1');
  socket.write(`${method} ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n${body ? 'Content-Length: 100\r\n\r\n{"a":' : '\r\n'}`);
  let got = '';
  socket.on('data', (chunk: Buffer) => (got += chunk.toString('utf8')));
  return new Promise((resolve) => {
    const done = (closed: boolean) => {
      clearTimeout(timer);
      socket.destroy();
      resolve({ status: got.split('\r\n')[0]!, closed });
    };
    const timer = setTimeout(() => done(false), ms);
    socket.once('close', () => done(true));
  });
}

describe('a request body that never ends', () => {
  let viewer: RunningViewer;
  let inspector: ViewerInspector;
  let inspectorPort: number;
  beforeAll(async () => {
    viewer = await startViewer({ store: new MemorySessionStore(), port: 0 });
    inspector = viewerInspector();
    inspectorPort = Number(new URL(await inspector.ready).port);
  });
  afterAll(async () => {
    await viewer?.close();
    await inspector?.close();
  });

  it('the viewer answers and closes the connection at once, for a GET and for a POST', async () => {
    const started = Date.now();
    expect(await trickled(viewer.port, 'GET', '/', 2_000)).toEqual({ status: 'HTTP/1.1 200 OK', closed: true });
    expect(await trickled(viewer.port, 'POST', '/', 2_000)).toEqual({ status: 'HTTP/1.1 405 Method Not Allowed', closed: true });
    expect(Date.now() - started).toBeLessThan(1_500);
  });

  it('the inspector answers and closes the connection at once', async () => {
    expect(await trickled(inspectorPort, 'GET', '/', 2_000)).toEqual({ status: 'HTTP/1.1 200 OK', closed: true });
    expect(await trickled(inspectorPort, 'POST', '/', 2_000)).toEqual({ status: 'HTTP/1.1 405 Method Not Allowed', closed: true });
  });

  it('a request without a body keeps its connection (keep-alive), as before', async () => {
    expect(await trickled(viewer.port, 'GET', '/', 300, false)).toEqual({ status: 'HTTP/1.1 200 OK', closed: false });
  });
});

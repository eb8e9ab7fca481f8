/**
 * The viewer and the live inspector answer only to loopback names on their own port (issue 25,
 * item 2): another `Host` (DNS rebinding) is a 421 and another `Origin` a 403, both before the
 * store is read or a stream opens; an unknown session is a 404 on every route, the event stream
 * included (it used to answer 200 and poll forever).
 */
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createActor, createMachine } from 'xstate';
import { MemorySessionStore } from '../../src/stores/memory.js';
import type { SessionStore } from '../../src/stores/session-store.js';
import { localRequestProblem, requestTarget } from '../../src/viewer/http.js';
import { startViewer, viewerInspector, ViewerListenError, ViewerOptionsError, type RunningViewer, type ViewerInspector } from '../../src/viewer.js';
import { writeBigSession } from './fixtures/big-session.js';
import { get } from './support.js';

/** A store that counts every read: a refused request must not cause one. */
function countingStore(inner: SessionStore): SessionStore & { reads: number } {
  const counted = {
    reads: 0,
    load: (id: string) => (counted.reads++, inner.load(id)),
    list: () => (counted.reads++, inner.list()),
    readTrace: (id: string, after?: number) => (counted.reads++, inner.readTrace!(id, after)),
    apply: inner.apply.bind(inner),
    journalToolResult: inner.journalToolResult.bind(inner),
    journaledToolResults: inner.journaledToolResults.bind(inner),
    appendTrace: inner.appendTrace!.bind(inner),
    close: () => inner.close(),
  };
  return counted;
}

/** Well-formed Hosts that name another server: a 421. */
const hostile = (port: number) => [
  { host: 'evil.example' },
  { host: `evil.example:${port}` },
  { host: `127.0.0.1:${port + 1}` },
  { host: '127.0.0.1' },
  { host: `localhost.evil.example:${port}` },
  { host: '' },
];

/** Hosts that are no `host[:port]` at all: a 400 with a JSON error (before: a 421 in plain text). */
const malformed = (port: number) => [
  { host: `127.0.0.1:${port}@evil.example` },
  { host: 'a b' },
  { host: `x/s/known?` },
  { host: `127.0.0.1:${port}/s/known` },
  { host: 'localhost:99999' },
  { host: 'localhost:-1' },
];

/** Raw bytes to the server (a request Node's client would not send: no Host, two Hosts); resolves with the status and body. */
function raw(port: number, head: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let text = '';
    socket.setEncoding('utf8');
    socket.setTimeout(5_000, () => socket.destroy(new Error('no answer within 5 s')));
    socket.on('data', (chunk: string) => (text += chunk));
    socket.on('error', reject);
    socket.on('close', () => {
      const status = /^HTTP\/1\.1 (\d{3})/.exec(text);
      if (!status) return reject(new Error(`no HTTP response: ${JSON.stringify(text)}`));
      resolve({ status: Number(status[1]), body: text.slice(text.indexOf('\r\n\r\n') + 4) });
    });
    socket.end(`${head}\r\n\r\n`);
  });
}

describe('viewer: loopback names only', () => {
  let store: ReturnType<typeof countingStore>;
  let viewer: RunningViewer;

  beforeAll(async () => {
    const backing = new MemorySessionStore();
    await writeBigSession(backing, 'known', 10);
    store = countingStore(backing);
    viewer = await startViewer({ store, port: 0, pollMs: 10 });
  });
  afterAll(async () => {
    await viewer?.close();
  });

  it('answers 127.0.0.1, localhost and [::1] with its port; another Host is a 421 before anything is read', async () => {
    const { port } = viewer;
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, `LocalHost:${port}`, `[::1]:${port}`]) {
      expect((await get(port, '/', { host })).status, host).toBe(200);
    }
    const before = store.reads;
    for (const path of ['/', '/s/known', '/s/known/events', '/s/unknown', '/nothing']) {
      for (const headers of hostile(port)) {
        const refused = await get(port, path, headers);
        expect(refused.status, `${path} ${JSON.stringify(headers)}`).toBe(421);
        expect(refused.body).not.toContain('known');
      }
    }
    expect(store.reads).toBe(before);
    expect(viewer.liveStats().clients).toBe(0);
  });

  it('a malformed, missing or repeated Host is a 400 with a JSON error, on every route, before anything is read', async () => {
    const { port } = viewer;
    const before = store.reads;
    for (const path of ['/', '/s/known', '/s/known/events', '/nothing']) {
      for (const headers of malformed(port)) {
        const refused = await get(port, path, headers);
        expect(refused.status, `${path} ${JSON.stringify(headers)}`).toBe(400);
        expect(JSON.parse(refused.body), `${path} ${JSON.stringify(headers)}`).toMatchObject({ error: { code: 'BadHost', message: expect.stringMatching(/malformed Host/) } });
      }
      const none = await raw(port, `GET ${path} HTTP/1.1\r\nconnection: close`);
      expect([none.status, JSON.parse(none.body).error.code], path).toEqual([400, 'BadHost']);
      const twice = await raw(port, `GET ${path} HTTP/1.1\r\nhost: 127.0.0.1:${port}\r\nhost: evil.example\r\nconnection: close`);
      expect([twice.status, JSON.parse(twice.body).error.message], path).toEqual([400, expect.stringMatching(/more than one Host/)]);
    }
    expect(store.reads).toBe(before);
    expect(viewer.liveStats().clients).toBe(0);
  });

  it('routes by the path alone: an absolute-form target is a 400, a path that looks like an authority is a 404', async () => {
    const { port } = viewer;
    const host = `127.0.0.1:${port}`;
    // `//evil/s/known` resolved against a base URL is the path /s/known on host evil: here it stays a path.
    expect((await get(port, '//evil.example/s/known', { host })).status).toBe(404);
    const absolute = await raw(port, `GET http://${host}/s/known HTTP/1.1\r\nhost: ${host}\r\nconnection: close`);
    expect([absolute.status, JSON.parse(absolute.body).error.code]).toEqual([400, 'BadRequestTarget']);
    expect(requestTarget('/s/a%20b/events?after=3')).toEqual({ pathname: '/s/a%20b/events', searchParams: new URLSearchParams('after=3') });
    expect(requestTarget('//x/s/y')!.pathname).toBe('//x/s/y');
    expect(requestTarget('*')).toBeNull();
  });

  it('a cross-origin Origin is a 403 before anything is read; its own origin is answered', async () => {
    const { port } = viewer;
    const host = `127.0.0.1:${port}`;
    expect((await get(port, '/s/known', { host, origin: `http://${host}` })).status).toBe(200);
    expect((await get(port, '/s/known', { host, origin: `http://localhost:${port}` })).status).toBe(200);
    const before = store.reads;
    for (const origin of ['http://evil.example', `http://evil.example:${port}`, `https://${host}`, `http://127.0.0.1:${port + 1}`, 'null', '']) {
      for (const path of ['/', '/s/known', '/s/known/events']) {
        expect((await get(port, path, { host, origin })).status, `${path} ${origin}`).toBe(403);
      }
    }
    expect(store.reads).toBe(before);
  });

  it('an unknown session is a 404 on every route, its event stream included; no stream stays open', async () => {
    const host = `127.0.0.1:${viewer.port}`;
    for (const path of ['/s/unknown', '/s/unknown/events', '/s/unknown/events?after=3&log=2']) {
      const missing = await get(viewer.port, path, { host });
      expect(missing.status, path).toBe(404);
      expect(missing.body).toMatch(/There is no session (&#39;|')unknown/);
    }
    expect(viewer.liveStats()).toMatchObject({ clients: 0, dropping: 0 });
    expect((await get(viewer.port, '/s/known/events', { host })).status).toBe(200);
  });

  it('live limits are checked: a bound of 0 is a ViewerOptionsError naming the field', async () => {
    await expect(startViewer({ store, port: 0, live: { maxBufferedBytes: 0 } })).rejects.toThrow(ViewerOptionsError);
    await expect(startViewer({ store, port: 0, live: { maxBufferedBytes: 0 } })).rejects.toThrow(/maxBufferedBytes/);
  });
});

describe('a viewer on port 80', () => {
  it('answers what a browser sends there (Host and Origin without the port), with the port too, and refuses the rest', () => {
    for (const host of ['localhost', '127.0.0.1', '[::1]', 'LocalHost', 'localhost:80', '127.0.0.1:80', '[::1]:80']) {
      expect(localRequestProblem({ host }, 80), host).toBeNull();
    }
    expect(localRequestProblem({ host: 'localhost', origin: 'http://localhost' }, 80)).toBeNull();
    expect(localRequestProblem({ host: 'localhost', origin: 'http://127.0.0.1:80' }, 80)).toBeNull();
    expect(localRequestProblem({ host: 'localhost', origin: 'http://evil.example' }, 80)?.status).toBe(403);
    expect(localRequestProblem({ host: 'evil.example' }, 80)?.status).toBe(421);
    expect(localRequestProblem({ host: 'localhost:8080' }, 80)?.status).toBe(421);
    expect(localRequestProblem({ host: 'localhost@evil' }, 80)?.status).toBe(400);
    // On any other port the port must be there: a Host with none means 80.
    expect(localRequestProblem({ host: 'localhost' }, 4317)?.status).toBe(421);
    expect(localRequestProblem({ host: 'localhost:4317', origin: 'http://localhost' }, 4317)?.status).toBe(403);
  });

  // Binding 80 needs root (CI runs as root); elsewhere the pure check above stands alone.
  it('over a real socket on port 80: Host: localhost is answered', async () => {
    let viewer: RunningViewer;
    try {
      viewer = await startViewer({ store: new MemorySessionStore(), port: 80 });
    } catch (error) {
      if (!ViewerListenError.isInstance(error)) throw error;
      console.log(`port 80 not available here (${error.message}): the real-socket leg is skipped`);
      return;
    }
    try {
      expect((await get(80, '/', { host: 'localhost' })).status).toBe(200);
      expect((await get(80, '/', { host: '127.0.0.1', origin: 'http://127.0.0.1' })).status).toBe(200);
      expect((await get(80, '/', { host: 'localhost:4317' })).status).toBe(421);
    } finally {
      await viewer.close();
    }
  });
});

describe('viewerInspector: loopback names only', () => {
  let inspector: ViewerInspector;
  let port: number;
  let actorPath: string;

  beforeAll(async () => {
    inspector = viewerInspector();
    port = Number(new URL(await inspector.ready).port);
    const toggle = createMachine({ id: 'toggle', initial: 'off', states: { off: { on: { flip: 'on' } }, on: { on: { flip: 'off' } } } });
    const actor = createActor(toggle, { inspect: inspector.inspect }).start();
    actor.send({ type: 'flip' });
    actorPath = `/a/${encodeURIComponent(actor.sessionId)}`;
  });
  afterAll(async () => {
    await inspector?.close();
  });

  it('another Host is a 421, another Origin a 403; its own names are answered', async () => {
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`]) {
      expect((await get(port, actorPath, { host })).status, host).toBe(200);
    }
    for (const path of ['/', actorPath, `${actorPath}/events`]) {
      for (const headers of hostile(port)) {
        const refused = await get(port, path, headers);
        expect(refused.status, `${path} ${JSON.stringify(headers)}`).toBe(421);
        expect(refused.body).not.toContain('toggle');
      }
      expect((await get(port, path, { host: `127.0.0.1:${port}`, origin: 'http://evil.example' })).status, path).toBe(403);
      for (const headers of malformed(port)) expect((await get(port, path, headers)).status, `${path} ${JSON.stringify(headers)}`).toBe(400);
    }
    expect(inspector.liveStats().clients).toBe(0);
  });

  it('an unknown actor is a 404 on its page and its event stream', async () => {
    for (const path of ['/a/nobody', '/a/nobody/events']) {
      expect((await get(port, path, { host: `127.0.0.1:${port}` })).status, path).toBe(404);
    }
  });
});

/**
 * `toNodeListener` on a real `node:http` server on 127.0.0.1: the Host header never routes (a
 * forged one cannot read another chat; a malformed one or a target that is not a path is a 400
 * JSON, not a dropped connection), a long stream to a slow reader keeps a bounded number of
 * listeners, and an oversized body is a prompt 413 on a fresh and on a reused keep-alive
 * connection, which then closes cleanly.
 */
import { once } from 'node:events';
import { createServer, type Server, type ServerResponse } from 'node:http';
import { connect, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { createChatHandler, toNodeListener, type ChatHandler } from '../../src/http.js';
import { MemorySessionStore } from '../../src/index.js';
import { chatAgent } from './fixtures/chat-agent.js';
import { userMessage } from './support.js';

const cleanup: Array<() => Promise<unknown> | void> = [];
afterEach(async () => {
  for (const step of cleanup.splice(0).reverse()) await step();
});

async function listen(listener: Parameters<typeof createServer>[1]): Promise<{ server: Server; port: number }> {
  const server = createServer(listener);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  cleanup.push(() => {
    server.closeAllConnections();
    return new Promise((resolve) => server.close(resolve));
  });
  return { server, port: (server.address() as { port: number }).port };
}

async function chatServer(options: Partial<Parameters<typeof createChatHandler>[0]> = {}) {
  const store = new MemorySessionStore();
  const handler: ChatHandler = createChatHandler({ machine: chatAgent([{ text: 'Secret of the victim.' }]).machine, store, ...options });
  cleanup.push(() => handler.close());
  const { port } = await listen(toNodeListener(handler));
  return { store, handler, port };
}

/** One HTTP exchange on a raw socket (`Connection: close`): the status line, headers and body as received. */
function raw(port: number, text: string, timeoutMs = 5000): Promise<{ status: number; headers: string; body: string; ms: number }> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => socket.write(text));
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => (socket.destroy(), reject(new Error(`no answer within ${timeoutMs} ms`))), timeoutMs);
    socket.on('data', (chunk) => chunks.push(chunk));
    socket.on('error', (error) => (clearTimeout(timer), reject(error)));
    socket.on('close', () => {
      clearTimeout(timer);
      const all = Buffer.concat(chunks).toString('utf8');
      const [head = '', ...rest] = all.split('\r\n\r\n');
      const body = rest.join('\r\n\r\n');
      resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0), headers: head.toLowerCase(), body: /transfer-encoding: chunked/i.test(head) ? dechunk(body) : body, ms: Date.now() - started });
    });
  });
}

/** A chunked body's data. */
function dechunk(body: string): string {
  let out = '';
  for (let at = 0; at < body.length; ) {
    const eol = body.indexOf('\r\n', at);
    const size = parseInt(body.slice(at, eol), 16);
    if (!(size > 0)) break;
    out += body.slice(eol + 2, eol + 2 + size);
    at = eol + 2 + size + 2;
  }
  return out;
}

async function seedVictim(port: number): Promise<void> {
  const response = await fetch(`http://127.0.0.1:${port}/api/chat`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ id: 'victim', messages: [userMessage('my secret')] }),
  });
  expect(await response.text()).toContain('"outcome":"Completed"');
}

describe('routing on a real socket', () => {
  it('a forged Host cannot pick the chat: GET mine/messages with Host x/api/chat/victim/messages? is mine (404), not the victim\'s', async () => {
    const { port } = await chatServer();
    await seedVictim(port);
    const forged = await raw(port, 'GET /api/chat/mine/messages HTTP/1.1\r\nHost: x/api/chat/victim/messages?\r\nConnection: close\r\n\r\n');
    // A Host like that is malformed; even a well-formed one never routes (below).
    expect(forged.status).toBe(400);
    expect(forged.body).not.toContain('secret');
    const named = await raw(port, 'GET /api/chat/mine/messages HTTP/1.1\r\nHost: victim.example:80\r\nConnection: close\r\n\r\n');
    expect(named.status).toBe(404);
    expect(JSON.parse(named.body)).toEqual({ error: { code: 'ChatNotFound', message: "no chat 'mine'" } });
    // The victim's own path still reads it: the path, and only the path, routes.
    const own = await raw(port, 'GET /api/chat/victim/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n');
    expect(own.status).toBe(200);
    expect(own.body).toContain('my secret');
  });

  it('a malformed Host or a target that is not a path is a 400 with a JSON error, never a dropped connection', async () => {
    const { port, store } = await chatServer();
    const requests = [
      'GET /api/chat/x/messages HTTP/1.1\r\nHost: a b\r\nConnection: close\r\n\r\n',
      'GET /api/chat/x/messages HTTP/1.1\r\nHost: a/b\r\nConnection: close\r\n\r\n',
      'GET /api/chat/x/messages HTTP/1.1\r\nHost: a:b:c\r\nConnection: close\r\n\r\n',
      'GET http://127.0.0.1/api/chat/x/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n',
      'OPTIONS * HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n',
      'POST http://evil.example/api/chat HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}',
    ];
    for (const text of requests) {
      const answer = await raw(port, text);
      expect(answer.status, text.split('\r\n')[0]).toBe(400);
      expect(answer.headers).toContain('content-type: application/json');
      expect(JSON.parse(answer.body).error.code).toBe('InvalidRequest');
    }
    expect(await store.list()).toEqual([]);
  });

  it('a cancel with a forged Host reaches the path\'s chat only', async () => {
    const { port } = await chatServer();
    await seedVictim(port);
    // Before: the Host's path won, the victim's chat was asked to cancel (409, it is at rest).
    const forged = await raw(port, 'POST /api/chat/mine/cancel HTTP/1.1\r\nHost: x/api/chat/victim/cancel?\r\nContent-Length: 0\r\nConnection: close\r\n\r\n');
    expect([forged.status, JSON.parse(forged.body).error.code]).toEqual([400, 'InvalidRequest']);
    const named = await raw(port, 'POST /api/chat/mine/cancel HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\nConnection: close\r\n\r\n');
    expect([named.status, JSON.parse(named.body).error.code]).toEqual([404, 'ChatNotFound']);
  });
});

describe('backpressure', () => {
  it('a 12 MB stream to a slow reader keeps its close listeners bounded and warns about nothing', async () => {
    const warnings: string[] = [];
    const onWarning = (warning: Error) => warnings.push(warning.name);
    process.on('warning', onWarning);
    cleanup.push(() => void process.off('warning', onWarning));
    let response!: ServerResponse;
    let peak = 0;
    const chunk = new Uint8Array(16 * 1024).fill(120);
    let sent = 0;
    const total = 12 * 1024 * 1024;
    const handler = async () =>
      new Response(
        new ReadableStream<Uint8Array>({
          pull(controller) {
            peak = Math.max(peak, response.listenerCount('close'), response.listenerCount('drain'));
            if (sent >= total) return controller.close();
            sent += chunk.byteLength;
            controller.enqueue(chunk);
          },
        }),
      );
    const listener = toNodeListener(handler);
    const { port } = await listen((req, res) => {
      response = res;
      listener(req, res);
    });
    // A slow reader: it takes 256 KiB, then pauses a tick, so the writer waits for drain again and again.
    const socket: Socket = connect(port, '127.0.0.1', () => socket.write('GET /big HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n'));
    let received = 0;
    let sincePause = 0;
    socket.on('data', (data) => {
      received += data.byteLength;
      sincePause += data.byteLength;
      if (sincePause > 256 * 1024) {
        sincePause = 0;
        socket.pause();
        setTimeout(() => socket.resume(), 1);
      }
    });
    await once(socket, 'close');
    expect(received).toBeGreaterThan(total);
    // The listener's own close listeners (the abort and the cancel) and Node's; a leak grows with each wait (hundreds).
    expect(peak).toBeLessThanOrEqual(5);
    expect(warnings).not.toContain('MaxListenersExceededWarning');
  });
});

describe('clients that leave', () => {
  it('a client gone before its response began (a slow authorize) holds no queue of the run it asked for', async () => {
    let slow = false;
    const authorize = async () => {
      if (slow) await new Promise((resolve) => setTimeout(resolve, 300));
      return true;
    };
    const store = new MemorySessionStore();
    // The run goes on until the checks are done (a model call held open, then let go).
    let letGo = () => {};
    const held = new Promise<void>((resolve) => (letGo = resolve));
    const handler = createChatHandler({ machine: chatAgent([async () => (await held, { text: 'A long answer.' })]).machine, store, authorize });
    cleanup.push(() => handler.close());
    const { port } = await listen(toNodeListener(handler));
    const first = await fetch(`http://127.0.0.1:${port}/api/chat`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ id: 'c1', messages: [userMessage('hi')] }),
    });
    const reading = first.text();
    expect(handler.stats().clients).toBe(1);
    slow = true;
    // Five reattaches whose clients hang up while authorize still decides.
    for (let i = 0; i < 5; i++) {
      const socket = connect(port, '127.0.0.1');
      await once(socket, 'connect');
      socket.write('GET /api/chat/c1/stream HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
      await new Promise((resolve) => setTimeout(resolve, 20));
      socket.destroy();
    }
    // Past authorize: before, each was attached to the run for nobody (clients 6), queueing its chunks until the run ended.
    await new Promise((resolve) => setTimeout(resolve, 600));
    expect(handler.stats().clients).toBe(1);
    letGo();
    expect(await reading).toContain('"outcome":"Completed"');
  });
});

describe('413 on every connection', () => {
  /** Sends `requests` one after another on one keep-alive socket; resolves with every response's status and when it came. */
  function keepAlive(port: number, requests: Array<{ head: string; body: Buffer }>) {
    const socket = connect(port, '127.0.0.1');
    const started = Date.now();
    let text = '';
    socket.on('data', (data) => (text += data.toString('latin1')));
    socket.on('error', () => {});
    const closed = once(socket, 'close').then(() => Date.now() - started);
    const statusAt = async (index: number, timeoutMs = 4000) => {
      const deadline = Date.now() + timeoutMs;
      while (Date.now() < deadline) {
        const statuses = [...text.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => Number(m[1]));
        if (statuses.length > index) return { status: statuses[index]!, ms: Date.now() - started };
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      return { status: 0, ms: Date.now() - started };
    };
    return { socket, send: (i: number) => socket.write(Buffer.concat([Buffer.from(requests[i]!.head), requests[i]!.body])), statusAt, closed, text: () => text };
  }

  const chatPost = (body: Buffer, declared = true) => ({
    head: `POST /api/chat HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n${declared ? `Content-Length: ${body.byteLength}\r\n` : 'Transfer-Encoding: chunked\r\n'}\r\n`,
    body: declared ? body : Buffer.concat([Buffer.from(`${body.byteLength.toString(16)}\r\n`), body, Buffer.from('\r\n0\r\n\r\n')]),
  });

  it.each([true, false])('declared length %s: an oversized body on a reused connection is a prompt 413 JSON, then the connection closes cleanly', async (declared) => {
    const { port, store } = await chatServer({ maxBodyBytes: 64 * 1024 });
    const first = { head: 'GET /api/chat/nobody/messages HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n', body: Buffer.alloc(0) };
    const big = Buffer.from(JSON.stringify({ id: 'big', messages: [userMessage('y'.repeat(2 * 1024 * 1024))] }));
    const connection = keepAlive(port, [first, chatPost(big, declared)]);
    connection.send(0);
    expect((await connection.statusAt(0)).status).toBe(404);
    connection.send(1);
    const second = await connection.statusAt(1);
    expect(second.status).toBe(413);
    expect(second.ms).toBeLessThan(2000);
    const closedAfter = await connection.closed;
    expect(closedAfter).toBeLessThan(3000);
    const head = connection.text().split('HTTP/1.1 413')[1]!;
    expect(head.toLowerCase()).toContain('connection: close');
    expect(head).toContain('"code":"BodyTooLarge"');
    expect(await store.list()).toEqual([]);
    // The server takes the next connection as usual.
    const after = await raw(port, 'GET /api/chat/nobody/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n');
    expect(after.status).toBe(404);
  });

  it('fetch through a keep-alive agent gets the 413 as a response, not a reset', async () => {
    const { port } = await chatServer({ maxBodyBytes: 64 * 1024 });
    const url = `http://127.0.0.1:${port}/api/chat`;
    const small = await fetch(`${url}/nobody/messages`);
    expect(small.status).toBe(404);
    await small.text();
    const big = JSON.stringify({ id: 'big', messages: [userMessage('y'.repeat(3 * 1024 * 1024))] });
    const started = Date.now();
    const response = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: big });
    expect(response.status).toBe(413);
    expect(((await response.json()) as { error: { code: string } }).error.code).toBe('BodyTooLarge');
    expect(Date.now() - started).toBeLessThan(2000);
  });
});

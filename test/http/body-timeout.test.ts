/**
 * A request body that stops arriving, over real HTTP on 127.0.0.1: a client sends the headers of
 * a POST and part of its body, then nothing. Before, the handler waited on the body for as long
 * as the runtime let the socket live (Node's requestTimeout, 300 s by default; under a framework
 * that has none, for ever), holding the request's slot. Now it answers 408 after `bodyTimeoutMs`.
 */
import { connect } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { ChatHandlerOptionsError, createChatHandler } from '../../src/http.js';
import { createAgentMachine, MemorySessionStore } from '../../src/index.js';
import { scriptedModel } from '../../src/testing.js';
import { listenOn } from './support.js';

const cleanup: Array<() => Promise<unknown> | void> = [];
afterEach(async () => {
  for (const step of cleanup.splice(0).reverse()) await step();
});

const reported: unknown[] = [];

async function serve(bodyTimeoutMs?: number) {
  const store = new MemorySessionStore();
  const handler = createChatHandler({ machine: createAgentMachine({ model: scriptedModel([{ text: 'hi' }]) }), store, onError: (error) => void reported.push(error), ...(bodyTimeoutMs !== undefined && { bodyTimeoutMs }) });
  const served = await listenOn(handler);
  cleanup.push(() => served.close());
  return { port: served.port, store };
}

/** Sends `path`'s headers and the first half of a JSON body, then waits; resolves with the status line, or 'none' after `ms`. */
function stalledPost(port: number, path: string, ms: number): Promise<string> {
  const body = JSON.stringify({ id: 'slow', messages: [{ id: 'u1', role: 'user', parts: [{ type: 'text', text: 'hello' }] }] });
  const socket = connect(port, '127.0.0.1');
  cleanup.push(() => void socket.destroy());
  socket.write(`POST ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body.slice(0, 20)}`);
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve('none'), ms);
    socket.once('data', (chunk: Buffer) => (clearTimeout(timer), resolve(chunk.toString('utf8').split('\r\n')[0]!)));
  });
}

describe('a request body that stops arriving', () => {
  it('is answered 408 after bodyTimeoutMs, on a message and on a resume, and nothing is stored', async () => {
    const { port, store } = await serve(200);
    const started = Date.now();
    expect(await stalledPost(port, '/api/chat', 3_000)).toBe('HTTP/1.1 408 Request Timeout');
    expect(Date.now() - started).toBeGreaterThanOrEqual(190);
    expect(await stalledPost(port, '/api/chat/slow/resume', 3_000)).toMatch(/^HTTP\/1\.1 (408|404)/);
    expect(await store.load('slow')).toBeUndefined();
  });

  it('waits 30 s by default, and the option is checked when the handler is made', async () => {
    const { port } = await serve();
    reported.length = 0;
    // Still waiting after a second: a slow upload within the default is let finish. The client
    // then goes away mid-body: its request ends, and that is not told to onError as a fault.
    expect(await stalledPost(port, '/api/chat', 1_000)).toBe('none');
    for (const bodyTimeoutMs of [0, -1, 1.5, 600_001, '5']) {
      expect(() => createChatHandler({ machine: createAgentMachine({ model: scriptedModel([]) }), store: new MemorySessionStore(), bodyTimeoutMs: bodyTimeoutMs as never })).toThrow(ChatHandlerOptionsError);
    }
    for (const step of cleanup.splice(0).reverse()) await step();
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(reported).toEqual([]);
  });
});

/**
 * A request body that stops arriving at createMcpHandler, over real HTTP on 127.0.0.1 (mounted
 * with toNodeListener): a client sends the headers of a POST and part of its body, then nothing.
 * Before, the transport waited on the body for as long as the runtime let the socket live (Node's
 * requestTimeout, 300 s by default; under a framework that has none, for ever). Now the handler
 * answers 408 after `bodyTimeoutMs` (30 s by default, as the chat handler's).
 */
import { connect } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { createMcpHandler, McpServerOptionsError } from '../../src/mcp-server.js';
import { AGENTS } from './fixtures/agents.js';
import { serveHttp, type ServedHttp } from './support.js';

const cleanup: Array<() => Promise<unknown> | void> = [];
afterEach(async () => {
  for (const step of cleanup.splice(0).reverse()) await step();
});

async function serve(bodyTimeoutMs?: number): Promise<ServedHttp> {
  const served = await serveHttp(bodyTimeoutMs === undefined ? {} : { bodyTimeoutMs });
  cleanup.push(() => served.close());
  return served;
}

const INITIALIZE = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } });

/**
 * POSTs `INITIALIZE` to `url` in two halves, `pauseMs` apart (null: the second half never comes);
 * resolves with the status line, or 'none' when nothing came within `waitMs`.
 */
function slowPost(url: URL, pauseMs: number | null, waitMs: number, headers: Record<string, string> = {}): Promise<string> {
  const socket = connect(Number(url.port), '127.0.0.1');
  cleanup.push(() => void socket.destroy());
  const extra = Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`).join('');
  const half = INITIALIZE.length >> 1;
  socket.write(
    `POST ${url.pathname} HTTP/1.1\r\nHost: 127.0.0.1:${url.port}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n${extra}Content-Length: ${INITIALIZE.length}\r\n\r\n${INITIALIZE.slice(0, half)}`,
  );
  if (pauseMs !== null) {
    const timer = setTimeout(() => socket.write(INITIALIZE.slice(half)), pauseMs);
    cleanup.push(() => clearTimeout(timer));
  }
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve('none'), waitMs);
    socket.once('data', (chunk: Buffer) => (clearTimeout(timer), resolve(chunk.toString('utf8').split('\r\n')[0]!)));
  });
}

describe('an MCP request body that stops arriving', () => {
  it('is answered 408 after bodyTimeoutMs, on a new and on an open MCP session, and no session is made', async () => {
    const { url, handler } = await serve(300);
    const started = Date.now();
    expect(await slowPost(url, null, 3_000)).toBe('HTTP/1.1 408 Request Timeout');
    expect(Date.now() - started).toBeGreaterThanOrEqual(290);
    expect(handler.sessions()).toBe(0);
    const opened = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' }, body: INITIALIZE });
    await opened.body?.cancel();
    const id = opened.headers.get('mcp-session-id')!;
    expect(await slowPost(url, null, 3_000, { 'mcp-session-id': id })).toBe('HTTP/1.1 408 Request Timeout');
    expect(handler.sessions()).toBe(1);
  });

  it('a body that arrives slowly but within bodyTimeoutMs is served', async () => {
    const { url, handler } = await serve(300);
    expect(await slowPost(url, 100, 3_000)).toBe('HTTP/1.1 200 OK');
    expect(handler.sessions()).toBe(1);
  });

  it('waits 30 s by default, and the option is checked when the handler is made', async () => {
    const { url } = await serve();
    // Still waiting past the bound above: the default is longer.
    expect(await slowPost(url, null, 500)).toBe('none');
    for (const bodyTimeoutMs of [0, -1, 1.5, 600_001, '5', null]) {
      expect(() => createMcpHandler({ agents: AGENTS, bodyTimeoutMs: bodyTimeoutMs as never })).toThrow(McpServerOptionsError);
    }
  });
});

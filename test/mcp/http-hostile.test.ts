/**
 * An HTTP MCP server's answers are bounded as a stdio server's lines are (`maxResultBytes`): a
 * JSON answer or an SSE event over the limit fails its call with `McpResultTooLargeError` without
 * being held, and the body of an error status is cut before it becomes the call's error message.
 * The server is written by hand on 127.0.0.1 (node:http), so it can send what an SDK server never would.
 */
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mcpTools, McpResultTooLargeError, McpServerStartError, type McpTools } from '../../src/mcp.js';
import { runToolCalls } from '../../src/tools/run-tools.js';

type Message = { id?: number | string; method?: string; params?: { name?: string; arguments?: { bytes?: number } } };
const answer = (id: unknown, text: string) => JSON.stringify({ jsonrpc: '2.0', id, result: { content: [{ type: 'text', text }] } });

/** Tools: `json` and `sse` answer with `bytes` bytes of text the named way; `fail` answers 500 with `bytes` bytes of HTML. */
function reply(message: Message, res: ServerResponse): void {
  const { id, method } = message;
  if (id === undefined) return void res.writeHead(202).end();
  if (method === 'initialize') {
    const result = { protocolVersion: (message.params as { protocolVersion: string }).protocolVersion, capabilities: { tools: {} }, serverInfo: { name: 'raw-http', version: '1' } };
    return void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', id, result }));
  }
  if (method === 'tools/list') {
    const tool = (name: string) => ({ name, inputSchema: { type: 'object', properties: { bytes: { type: 'integer' } } } });
    return void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', id, result: { tools: ['json', 'sse', 'fail', 'ended', 'crashed'].map(tool) } }));
  }
  const name = message.params?.name;
  const text = 'x'.repeat(message.params?.arguments?.bytes ?? 10);
  if (name === 'fail') return void res.writeHead(500, { 'content-type': 'text/html' }).end(`<html>${text}</html>`);
  if (name === 'ended' || name === 'crashed') {
    // The call's stream opens, then ends (or the connection drops, as when the server dies) without the answer.
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write(`event: message\ndata: ${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: 'working' } })}\n\n`);
    return void setTimeout(() => (name === 'ended' ? res.end() : res.socket?.destroy()), 50);
  }
  if (name === 'sse') {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    // A progress-like notification first, then the answer, each its own event.
    res.write(`event: message\ndata: ${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: 'working' } })}\n\n`);
    return void res.end(`event: message\ndata: ${answer(id, text)}\n\n`);
  }
  // Streamed without a Content-Length.
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(answer(id, text));
}

let http: Server;
let url: string;
let handle: McpTools;
beforeAll(async () => {
  http = createServer((req, res) => {
    if (req.method !== 'POST') return void res.writeHead(405).end();
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => reply(JSON.parse(body) as Message, res));
  });
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`;
  handle = await mcpTools({ url }, { maxResultBytes: 100_000, toolTimeoutMs: 20_000 });
});
afterAll(async () => {
  await handle?.close();
  http?.closeAllConnections();
  await new Promise((resolve) => http?.close(resolve));
});

async function call(name: string, bytes: number) {
  const [result] = await runToolCalls([{ call: { id: name, name, args: { bytes } } }], handle.tools, { idempotencyKey: () => name });
  return result!;
}

describe('an HTTP answer over maxResultBytes', () => {
  it.each(['json', 'sse'])('%s: fails that call with McpResultTooLargeError; smaller answers on the same connection come through', async (name) => {
    const tool = handle.tools.find((t) => t.name === name)!;
    const ctx = { signal: new AbortController().signal, toolCallId: 'b', idempotencyKey: 'b' };
    const error = await Promise.resolve(tool.execute({ bytes: 1_000_000 }, ctx)).catch((e: unknown) => e);
    expect(McpResultTooLargeError.isInstance(error)).toBe(true);
    expect((error as McpResultTooLargeError).limit).toBe(100_000);
    expect((error as McpResultTooLargeError).bytes).toBeGreaterThan(100_000);

    const refused = await call(name, 5_000_000);
    expect(refused).toMatchObject({ isError: true, content: expect.stringContaining('over the limit of 100000 (maxResultBytes)') });
    expect(refused.content.length).toBeLessThan(1_000);
    expect((await call(name, 50_000)).content).toHaveLength(50_000);
  });
});

describe('an HTTP error status with a large body', () => {
  it("the call's error message holds the body's first 4 KiB, not all of it", async () => {
    const result = await call('fail', 5_000_000);
    expect(result).toMatchObject({ isError: true, content: expect.stringContaining('<html>xxxx') });
    expect(result.content.length).toBeLessThan(5_000);
    expect((await call('json', 10)).content).toBe('x'.repeat(10));
  });

  it('at the start: McpServerStartError with the cut body', async () => {
    const big = createServer((_, res) => res.writeHead(503, { 'content-type': 'text/plain' }).end('down '.repeat(1_000_000)));
    await new Promise<void>((resolve) => big.listen(0, '127.0.0.1', resolve));
    try {
      const error = await mcpTools({ url: `http://127.0.0.1:${(big.address() as AddressInfo).port}/mcp` }).catch((e: unknown) => e);
      expect(McpServerStartError.isInstance(error)).toBe(true);
      expect((error as Error).message).toContain('down down');
      expect((error as Error).message.length).toBeLessThan(5_000);
    } finally {
      big.closeAllConnections();
      await new Promise((resolve) => big.close(resolve));
    }
  });
});

describe("an HTTP call's SSE stream that ends without the answer", () => {
  it.each(['ended', 'crashed'])('%s: the call fails at once (the stream had no event ids to resume from), not at its timeout', async (name) => {
    const started = Date.now();
    const result = await call(name, 0);
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(result).toMatchObject({ isError: true, content: expect.stringContaining('without answering') });
    expect((await call('json', 10)).content).toBe('x'.repeat(10));
  });
});

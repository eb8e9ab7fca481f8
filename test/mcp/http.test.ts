/**
 * `mcpTools({ url })` against a Streamable HTTP server made with the SDK, on 127.0.0.1 in this
 * process: listing, a whole agent run, cancellation reaching the server's handler, a URL where
 * nothing answers.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { runAgent } from '../../src/index.js';
import { mcpTools, McpServerStartError, type McpTools } from '../../src/mcp.js';
import { runToolCalls } from '../../src/tools/run-tools.js';
import { scriptedModel } from '../../src/testing.js';
import { eventually } from './support.js';

const cancelled: string[] = [];
/** Calls of `slow` the server's handler has taken up. */
const slowStarted: string[] = [];
let http: Server;
let url: string;
let handle: McpTools;

beforeAll(async () => {
  const mcp = new McpServer({ name: 'http-fixture', version: '1.0.0' });
  mcp.registerTool('add', { description: 'Adds two numbers.', inputSchema: { a: z.number(), b: z.number() } }, ({ a, b }) => ({
    content: [{ type: 'text', text: String(a + b) }],
  }));
  mcp.registerTool('slow', { description: 'Waits until cancelled.' }, (extra) =>
    new Promise((resolve) => {
      slowStarted.push(String(extra.requestId));
      extra.signal.addEventListener('abort', () => {
        cancelled.push(String(extra.requestId));
        resolve({ content: [{ type: 'text', text: 'cancelled' }] });
      });
    }),
  );
  // One session (one client) is all the test needs: one stateful transport.
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: () => randomUUID() });
  await mcp.connect(transport);
  http = createServer((req, res) => void transport.handleRequest(req, res));
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`;
  handle = await mcpTools({ url });
});

afterAll(async () => {
  await handle?.close();
  http?.closeAllConnections();
  await new Promise((resolve) => http?.close(resolve));
});

describe('mcpTools over Streamable HTTP', () => {
  it("lists the server's tools with the JSON Schema it derived from its zod shapes", () => {
    expect(handle.tools.map((tool) => tool.name)).toEqual(['add', 'slow']);
    expect(handle.tools[0]!.definition.inputSchema).toMatchObject({ type: 'object', properties: { a: { type: 'number' } }, required: ['a', 'b'] });
  });

  it('a whole agent run calls a tool over HTTP', async () => {
    const model = scriptedModel([{ toolCalls: [{ id: 'c', name: 'add', args: { a: 2, b: 3 } }] }, (request) => ({ text: `it is ${request.messages.at(-1)!.content}` })]);
    const { outcome } = await runAgent({ model, toolSources: [handle], prompt: '2 + 3?' });
    expect(outcome).toEqual({ type: 'Completed', finalText: 'it is 5' });
  });

  it("an aborted call cancels the request on the server: the handler's signal fires", async () => {
    const controller = new AbortController();
    // Aborted once the server's handler runs (a timer could fire before the request got there).
    const before = slowStarted.length;
    void eventually(() => slowStarted.length > before).then(() => controller.abort());
    const [result] = await runToolCalls([{ call: { id: 's', name: 'slow', args: {} } }], handle.tools, {
      idempotencyKey: () => 'slow',
      signal: controller.signal,
    });
    expect(result).toMatchObject({ isError: true, content: expect.stringContaining('interrupted') });
    expect(await eventually(() => cancelled.length === 1)).toBe(true);
  });

  it('a URL where nothing answers: McpServerStartError', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    const error = await mcpTools({ url: `http://127.0.0.1:${port}/mcp` }, { startTimeoutMs: 5_000 }).catch((e: unknown) => e);
    expect(McpServerStartError.isInstance(error)).toBe(true);
    expect((error as Error).message).toContain(`127.0.0.1:${port}`);
  });
});

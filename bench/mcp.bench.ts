/**
 * An MCP tool call's round trip against a local tool doing the same work (echo a short text),
 * all through the tool runner (`runToolCalls`: validation, timeout, abort plumbing) as an agent
 * runs them, measured side by side in one run:
 * - local: a `defineTool` tool in this process (zod schema);
 * - local, JSON Schema: the same tool defined with `inputSchema` (the validator MCP tools get);
 * - MCP stdio: the fixture server (test/mcp/fixtures/server.mjs) in a child process;
 * - raw SDK stdio: the same server, `client.callTool` directly, no loopchart: what the SDK and the
 *   pipe cost alone, so the MCP row minus this one is loopchart's share;
 * - MCP HTTP: an SDK Streamable HTTP server on 127.0.0.1 in this process (client and server share
 *   one event loop, so this is a lower bound on a local HTTP server);
 * - tools/list: the listing a tool source costs at each run's start (stdio, 9 tools).
 * Calls run one after another; each row is the median over runs of the mean per call. The rows
 * are measured in turn within each run (not one row after the other), starting at another row
 * each run, so a load change on a shared machine hits every row alike and the ratios hold.
 */
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pathToFileURL } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { z } from 'zod';
import { mcpTools } from '../src/mcp.js';
import { defineTool, type Tool } from '../src/tools/define-tool.js';
import { runToolCalls } from '../src/tools/run-tools.js';
import { FIXTURE_SERVER } from '../test/mcp/support.js';
import { median, printTable } from './support.js';

const RUNS = 7;
const CALLS = 100;
const TEXT = 'the quick brown fox';

/** Mean µs per call over CALLS sequential calls of `call`. */
async function perCall(call: (i: number) => Promise<unknown>): Promise<number> {
  const started = performance.now();
  for (let i = 0; i < CALLS; i++) await call(i);
  return ((performance.now() - started) * 1000) / CALLS;
}

/** One call through the runner, checked: a bench that measures errors measures nothing. */
function viaRunner(tools: readonly Tool[], name: string) {
  return async (i: number) => {
    const [result] = await runToolCalls([{ call: { id: `c${i}`, name, args: { text: TEXT } } }], tools, { idempotencyKey: () => `k${i}` });
    if (result!.isError || result!.content !== `echo: ${TEXT}`) throw new Error(`unexpected result: ${result!.content}`);
  };
}

async function httpServer() {
  const mcp = new McpServer({ name: 'bench', version: '1.0.0' });
  mcp.registerTool('echo', { description: 'Repeats a text.', inputSchema: { text: z.string().min(1) } }, ({ text }) => ({
    content: [{ type: 'text', text: `echo: ${text}` }],
  }));
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: () => randomUUID() });
  await mcp.connect(transport);
  const http = createServer((req, res) => void transport.handleRequest(req, res));
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`,
    close: async () => {
      http.closeAllConnections();
      await new Promise((resolve) => http.close(resolve));
      await mcp.close();
    },
  };
}

export async function run(): Promise<void> {
  const local = defineTool({ name: 'echo', description: 'Repeats a text.', input: z.object({ text: z.string().min(1) }), execute: ({ text }) => `echo: ${text}` });
  const localJson = defineTool({
    name: 'echo',
    description: 'Repeats a text.',
    inputSchema: { type: 'object', properties: { text: { type: 'string', minLength: 1 } }, required: ['text'] },
    execute: (args) => `echo: ${String(args.text)}`,
  });
  const stdio = await mcpTools({ command: process.execPath, args: [FIXTURE_SERVER] });
  const raw = new Client({ name: 'bench', version: '1' });
  await raw.connect(new StdioClientTransport({ command: process.execPath, args: [FIXTURE_SERVER], stderr: 'pipe' }));
  const server = await httpServer();
  const http = await mcpTools({ url: server.url });
  try {
    const paths: [string, (i: number) => Promise<unknown>][] = [
      ['local tool (zod input)', viaRunner([local], 'echo')],
      ['local tool (JSON Schema input)', viaRunner([localJson], 'echo')],
      ['MCP over stdio (mcpTools)', viaRunner(stdio.tools, 'echo')],
      [
        'raw SDK callTool over stdio',
        async () => {
          const result = await raw.callTool({ name: 'echo', arguments: { text: TEXT } });
          if ((result.content as { text: string }[])[0]!.text !== `echo: ${TEXT}`) throw new Error('unexpected result');
        },
      ],
      ['MCP over HTTP, same process (mcpTools)', viaRunner(http.tools, 'echo')],
      ['tools/list over stdio (a run start)', () => stdio.listTools()],
    ];
    for (const [, call] of paths) await perCall(call); // warm-up
    const samples = paths.map((): number[] => []);
    // Each run starts at another row, so no row always pays for going first.
    for (let r = 0; r < RUNS; r++) {
      for (let k = 0; k < paths.length; k++) {
        const i = (r + k) % paths.length;
        samples[i]!.push(await perCall(paths[i]![1]));
      }
    }
    const rows = paths.map(([label], i) => [label, median(samples[i]!)] as const);
    const base = rows[0]![1];
    printTable(
      `MCP tool call round trip (${CALLS} sequential calls per run, median of ${RUNS} runs)`,
      ['path', 'µs per call', '× local'],
      rows.map(([label, us]) => [label, us, us / base]),
    );
  } finally {
    await Promise.all([stdio.close(), raw.close(), http.close()]);
    await server.close();
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await run();

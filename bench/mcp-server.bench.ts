/**
 * An agent called through loopchart/mcp-server against the same agent called with `runAgent` in
 * this process, measured side by side in one run (issue 44's measure): calls per second and the
 * latency the MCP layer adds per call. The agent answers in one turn from a scripted model, so the
 * rows differ only by what carries the call:
 * - runAgent: the agent run in this process, no MCP (it compiles the agent's config every call);
 * - actor: the same compiled machine the server runs, as an XState actor (runAgent without the compile);
 * - MCP in memory: `createMcpServer` and the SDK client over the SDK's in-memory transport (the
 *   protocol, validation and a session per call, no I/O), without a store and with a memory store;
 * - MCP HTTP: `createMcpHandler` on 127.0.0.1 and the SDK's Streamable HTTP client (client and
 *   server share this event loop, so a lower bound on a remote server).
 * Calls run one after another; each row is the median over runs of the mean per call, rows
 * measured in turn within each run, starting at another row each run.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { createActor, toPromise } from 'xstate';
import { createAgentMachine, MemorySessionStore, runAgent } from '../src/index.js';
import { toNodeListener } from '../src/http.js';
import { createMcpHandler, createMcpServer, type McpAgent } from '../src/mcp-server.js';
import { scriptedModel } from '../src/testing.js';
import { median, printTable } from './support.js';

const RUNS = 7;
const CALLS = 100;
const ANSWER = 'the answer';
const model = () => scriptedModel([{ text: ANSWER }]);

async function perCall(call: () => Promise<unknown>): Promise<number> {
  const started = performance.now();
  for (let i = 0; i < CALLS; i++) await call();
  return ((performance.now() - started) * 1000) / CALLS;
}

/** One MCP call, checked: a bench that measures errors measures nothing. */
const viaClient = (client: Client) => async () => {
  const result = (await client.callTool({ name: 'answer', arguments: { task: 'What is it?' } })) as CallToolResult;
  if (result.isError || (result.content[0] as { text: string }).text !== ANSWER) throw new Error(`unexpected result: ${JSON.stringify(result)}`);
};

async function inMemoryClient(agents: McpAgent[], withStore: boolean) {
  const server = createMcpServer({ agents, maxConcurrentCalls: 4, ...(withStore && { store: new MemorySessionStore() }) });
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  const client = new Client({ name: 'bench', version: '1' });
  await client.connect(clientSide);
  return { client, close: async () => (await client.close(), await server.close()) };
}

export async function run(): Promise<void> {
  const agent = createAgentMachine({ model: model() });
  const agents: McpAgent[] = [{ agent, name: 'answer', description: 'Answers.' }];
  const plain = await inMemoryClient(agents, false);
  const stored = await inMemoryClient(agents, true);
  const handler = createMcpHandler({ agents });
  const http = createServer(toNodeListener(handler));
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  const httpClient = new Client({ name: 'bench', version: '1' });
  await httpClient.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`)));

  const rows: [string, () => Promise<unknown>][] = [
    [
      'runAgent (no MCP)',
      async () => {
        const { text } = await runAgent({ model: model(), prompt: 'What is it?' });
        if (text !== ANSWER) throw new Error(`unexpected answer: ${text}`);
      },
    ],
    [
      'actor of the same machine (no MCP)',
      async () => {
        const actor = createActor(agent, { input: { prompt: 'What is it?' } });
        const done = toPromise(actor);
        actor.start();
        const output = (await done) as { outcome: { type: string; finalText?: string } };
        if (output.outcome.finalText !== ANSWER) throw new Error(`unexpected outcome: ${JSON.stringify(output.outcome)}`);
      },
    ],
    ['MCP in memory, no store', viaClient(plain.client)],
    ['MCP in memory, memory store', viaClient(stored.client)],
    ['MCP HTTP 127.0.0.1, no store', viaClient(httpClient)],
  ];
  const samples = rows.map(() => [] as number[]);
  for (let warm = 0; warm < 2; warm++) for (const [, call] of rows) await perCall(call);
  for (let r = 0; r < RUNS; r++) {
    for (let k = 0; k < rows.length; k++) {
      const i = (r + k) % rows.length;
      samples[i]!.push(await perCall(rows[i]![1]));
    }
  }
  const base = median(samples[0]!);
  const actorBase = median(samples[1]!);
  printTable(
    `loopchart/mcp-server: one-turn agent, ${CALLS} sequential calls x ${RUNS} runs (median of means)`,
    ['carrier', 'µs/call', 'calls/s', 'added µs/call vs runAgent', 'added µs/call vs actor'],
    rows.map(([name], i) => {
      const us = median(samples[i]!);
      return [name, us.toFixed(0), (1e6 / us).toFixed(0), i === 0 ? '-' : (us - base).toFixed(0), i <= 1 ? '-' : (us - actorBase).toFixed(0)];
    }),
  );

  await httpClient.close();
  await handler.close();
  http.closeAllConnections();
  await new Promise((resolve) => http.close(resolve));
  await plain.close();
  await stored.close();
}

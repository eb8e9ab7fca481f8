/**
 * A served run that stops to wait for someone an MCP client cannot be (a budget that pauses for a
 * raise, an operation that yields): over Streamable HTTP on 127.0.0.1 with the SDK's own client,
 * the call answers at once with how the run ended instead of holding the client until its timeout.
 */
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { agentTool, createAgentMachine, defineTool, type ModelRequest } from '../../src/index.js';
import type { McpAgent, McpHandlerOptions } from '../../src/mcp-server.js';
import { scriptedModel } from '../../src/testing.js';
import { client, serveHttp, type ServedHttp } from './support.js';

const open: { close(): Promise<void> }[] = [];
afterEach(async () => {
  for (const made of open.splice(0).reverse()) await made.close();
});
async function serve(options: Partial<McpHandlerOptions>): Promise<ServedHttp> {
  const served = await serveHttp(options);
  open.push(served);
  return served;
}
async function connect(served: ServedHttp) {
  const { client: mcp } = client();
  await mcp.connect(new StreamableHTTPClientTransport(served.url));
  open.push(mcp);
  return mcp;
}
const text = (result: CallToolResult) => (result.content[0] as { text: string }).text;
const lastText = (request: ModelRequest) => String(request.messages.at(-1)?.content);

const lookup = defineTool({ name: 'lookup', description: 'Looks a word up.', input: z.object({ word: z.string() }), execute: ({ word }) => `${word} is a word` });
/** Two lookups then an answer; its budget allows one tool call and pauses past it (a raise would let it go on). */
const pausing = () =>
  createAgentMachine({
    model: scriptedModel([{ toolCalls: [{ name: 'lookup', args: { word: 'a' } }] }, { toolCalls: [{ name: 'lookup', args: { word: 'b' } }] }, { text: 'both looked up' }]),
    tools: [lookup],
    budget: { maxToolCalls: 1, pause: true },
  });
/** A parent whose one child (an agent tool) pauses on its budget. */
const team = createAgentMachine({
  model: scriptedModel([{ toolCalls: [{ id: 'c1', name: 'helper', args: { task: 'look both up' } }] }, (request) => ({ text: `the helper said: ${lastText(request)}` })]),
  tools: [agentTool({ agent: pausing(), name: 'helper', description: 'Looks words up.' })],
});
const AGENTS: McpAgent[] = [
  { agent: pausing(), name: 'pausing', description: 'Pauses on its budget.' },
  { agent: team, name: 'team', description: 'Asks a helper that pauses on its budget.' },
];
// Long enough that a call held until its timeout fails the time bound below.
const CALL_TIMEOUT_MS = 10_000;

describe('a run that waits for a raise or a resume nobody can send', () => {
  it('a budget that pauses the served run: the call answers at once, the run sealed with the pause as its reason (stored so)', async () => {
    const served = await serve({ agents: AGENTS, callTimeoutMs: CALL_TIMEOUT_MS });
    const mcp = await connect(served);
    const started = Date.now();
    // Before: the call was held for callTimeoutMs (10 minutes by default), then answered "took longer than ... and was cancelled".
    const result = (await mcp.callTool({ name: 'pausing', arguments: { task: 'go' } }, undefined, { timeout: CALL_TIMEOUT_MS + 5_000 })) as CallToolResult;
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(result.isError).toBe(true);
    expect(result._meta?.['loopchart/outcome']).toBe('Sealed');
    expect(text(result)).toMatch(/^the agent's run ended Sealed: .*budget: 2 tool calls made, limit 1/);
    expect(text(result)).toMatch(/an MCP client cannot/);
    const stored = await served.store.load(result._meta?.['loopchart/sessionId'] as string);
    expect(stored?.state).toMatchObject({ brain: { context: { outcome: { type: 'Sealed' } } } });
  });

  it("a subagent's paused budget: the child is sealed, the parent reads that and answers", async () => {
    const served = await serve({ agents: AGENTS, callTimeoutMs: CALL_TIMEOUT_MS });
    const mcp = await connect(served);
    const started = Date.now();
    const result = (await mcp.callTool({ name: 'team', arguments: { task: 'go' } }, undefined, { timeout: CALL_TIMEOUT_MS + 5_000 })) as CallToolResult;
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(result.isError).toBeFalsy();
    expect(result._meta?.['loopchart/outcome']).toBe('Completed');
    expect(text(result)).toMatch(/^the helper said: .*Sealed.*budget: 2 tool calls made, limit 1/);
  });
});

/**
 * The text a result carries is bounded: over Streamable HTTP on 127.0.0.1 with the SDK's own
 * client, an agent whose final answer is 5 MB gets it cut at `maxResultChars` (100,000 by default)
 * with a marker saying so; the session, a SQLite file, keeps the whole answer.
 */
import { join } from 'node:path';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, describe, expect, it } from 'vitest';
import { createAgentMachine } from '../../src/index.js';
import { createMcpServer, McpServerOptionsError, type McpHandlerOptions } from '../../src/mcp-server.js';
import { SqliteSessionStore } from '../../src/sqlite.js';
import { scriptedModel } from '../../src/testing.js';
import { z } from 'zod';
import { client, scratchDir, serveHttp } from './support.js';

const HUGE = 5_000_000;
/** Its answer: 'A' then 'b' to HUGE characters, then '|end'. */
const talker = { agent: createAgentMachine({ model: scriptedModel(Array.from({ length: 4 }, () => ({ text: `A${'b'.repeat(HUGE - 5)}|end` }))) }), name: 'talker', description: 'Talks at length.' };
/** A structured answer of 378,901 characters of JSON. */
const LIST = JSON.stringify({ items: Array.from({ length: 30_000 }, (_, i) => `item-${i}`) });
const lister = {
  agent: createAgentMachine({ model: scriptedModel([{ text: LIST }]) }),
  name: 'lister',
  description: 'Lists items.',
  output: z.object({ items: z.array(z.string()) }),
};

/** Its answer has a surrogate pair (an emoji) across the 2,000th character. */
const smiler = { agent: createAgentMachine({ model: scriptedModel([{ text: `${'a'.repeat(1_999)}${'😀'.repeat(1_000)}` }]) }), name: 'smiler', description: 'Smiles.' };

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function serve(options: Partial<McpHandlerOptions> = {}) {
  const scratch = scratchDir();
  const store = new SqliteSessionStore({ path: join(scratch.dir, 'results.db') });
  const served = await serveHttp({ agents: [talker, lister, smiler], store, ...options });
  const { client: mcp } = client();
  await mcp.connect(new StreamableHTTPClientTransport(served.url));
  cleanups.push(
    () => scratch.remove(),
    () => store.close(),
    () => served.close(),
    () => mcp.close(),
  );
  return { mcp, store };
}

const text = (result: unknown) => ((result as CallToolResult).content[0] as { text: string }).text;

describe('the text of a result is bounded by maxResultChars', () => {
  it('a 5 MB answer is cut at 100,000 characters by default, with a marker that says so; the session keeps it whole', async () => {
    const { mcp, store } = await serve();
    const result = (await mcp.callTool({ name: 'talker', arguments: { task: 'talk' } }, undefined, { timeout: 60_000 })) as CallToolResult;
    const sent = text(result);
    // Before: all 5,000,000 characters were sent.
    expect(sent.length).toBeLessThan(100_200);
    expect(sent.startsWith(`A${'b'.repeat(99_999)}\n\n[`)).toBe(true);
    expect(sent).toMatch(/\[… cut by the MCP server: the text is 5000000 characters, the first 100000 are sent \(maxResultChars\)\]$/);
    expect(result.isError).toBeFalsy();
    expect(result._meta?.['loopchart/outcome']).toBe('Completed');
    const stored = await store.load(result._meta?.['loopchart/sessionId'] as string);
    expect(String(stored!.messages.at(-1)!.content)).toHaveLength(HUGE);
  }, 60_000);

  it('the option sets the bound; a structured answer over it is an error result saying so (JSON cannot be cut)', async () => {
    const { mcp } = await serve({ maxResultChars: 2_000 });
    const cut = text(await mcp.callTool({ name: 'talker', arguments: { task: 'talk' } }, undefined, { timeout: 60_000 }));
    expect(cut.slice(0, 2_000)).toBe(`A${'b'.repeat(1_999)}`);
    expect(cut.slice(2_000)).toBe('\n\n[… cut by the MCP server: the text is 5000000 characters, the first 2000 are sent (maxResultChars)]');
    // Never half an emoji: the cut moves back one character.
    expect(text(await mcp.callTool({ name: 'smiler', arguments: { task: 'smile' } }))).toBe(`${'a'.repeat(1_999)}\n\n[… cut by the MCP server: the text is 3999 characters, the first 1999 are sent (maxResultChars)]`);
    const listed = (await mcp.callTool({ name: 'lister', arguments: { task: 'list' } })) as CallToolResult;
    expect(listed.isError).toBe(true);
    expect(listed.structuredContent).toBeUndefined();
    expect(LIST).toHaveLength(378_901);
    expect(text(listed)).toBe("the agent's structured answer is 378901 characters of JSON, over the server's maxResultChars of 2000; it is kept in the session");
  }, 60_000);

  it('a bound out of range is refused when the server is made', () => {
    expect(() => createMcpServer({ agents: [talker], maxResultChars: 10 })).toThrow(McpServerOptionsError);
  });
});

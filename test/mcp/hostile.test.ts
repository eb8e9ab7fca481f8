/**
 * What an MCP server sends is outside input: `mcpTools` checks it where it enters, and nothing a
 * server writes ends the host process or leaves a call waiting on an answer it will not get. Each
 * server here is fixtures/raw-server.mjs, a real child process writing JSON-RPC by hand, so it can
 * send what an SDK server never would.
 */
import { fileURLToPath } from 'node:url';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv-provider.js';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { runAgent } from '../../src/index.js';
import { mcpTools, type McpTools } from '../../src/mcp.js';
import { runToolCalls } from '../../src/tools/run-tools.js';
import { scriptedModel } from '../../src/testing.js';
import { eventually, running } from './support.js';

const RAW = fileURLToPath(new URL('./fixtures/raw-server.mjs', import.meta.url));
const raw = (env: Record<string, string>) => ({ command: process.execPath, args: [RAW], env });

const open: McpTools[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((handle) => handle.close()));
});
async function start(env: Record<string, string>, options: Parameters<typeof mcpTools>[1] = {}): Promise<McpTools> {
  const handle = await mcpTools(raw(env), options);
  open.push(handle);
  return handle;
}
async function call(handle: McpTools, name = 'echo') {
  const [result] = await runToolCalls([{ call: { id: 'c', name, args: {} } }], handle.tools, { idempotencyKey: () => 'k' });
  return result!;
}

describe('stdout lines that are JSON but not a JSON-RPC message', () => {
  it.each([['null'], ['42'], ['"a log line"'], ['true'], ['[1,2]'], ['{"jsonrpc":"2.0"}']])(
    '%s before the answer: skipped, the host lives on and the call gets its answer',
    async (line) => {
      const handle = await start({ MCP_RAW_BEFORE: JSON.stringify([line]) }, { toolTimeoutMs: 5_000 });
      expect(await call(handle)).toMatchObject({ content: 'called echo' });
      expect(await call(handle)).toMatchObject({ content: 'called echo' });
    },
  );
});

describe('an answer to a call that is not a JSON-RPC response', () => {
  it.each([
    ['result null', '{"jsonrpc":"2.0","id":"$ID","result":null}'],
    ['result a string', '{"jsonrpc":"2.0","id":"$ID","result":"done"}'],
    ['neither result nor error', '{"jsonrpc":"2.0","id":"$ID"}'],
    ['an error without a code', '{"jsonrpc":"2.0","id":"$ID","error":{"message":"no"}}'],
  ])('%s: the call fails at once with an error saying so (not at its timeout)', async (_, answer) => {
    const handle = await start({ MCP_RAW_ANSWER: answer }, { toolTimeoutMs: 20_000 });
    const started = Date.now();
    const result = await call(handle);
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(result).toMatchObject({ isError: true, content: expect.stringContaining('not a valid JSON-RPC response') });
    expect(result.content.length).toBeLessThan(1_000);
  });
});

describe('output schemas', () => {
  const echo = { name: 'echo', inputSchema: { type: 'object' } };
  it.each([
    ['a type that is no JSON type', { type: 'object', properties: { a: { type: 'objekt' } } }],
    ['a $ref to nowhere', { type: 'object', properties: { a: { $ref: '#/nowhere' } } }],
  ])('%s: that tool is skipped with the reason; the listing and the other tools work', async (_, outputSchema) => {
    const handle = await start({ MCP_RAW_TOOLS: JSON.stringify([echo, { name: 'odd', inputSchema: { type: 'object' }, outputSchema }]) });
    expect(handle.tools.map((tool) => tool.name)).toEqual(['echo']);
    expect(handle.skipped.map((error) => [error.toolName, error.message])).toEqual([['odd', expect.stringContaining('output schema')]]);
    expect(await call(handle)).toMatchObject({ content: 'called echo' });
    expect((await handle.listTools()).map((tool) => tool.name)).toEqual(['echo']);
  });

  it('a tool whose output schema changed since the last listing is checked against the new one (same $id)', async () => {
    const typed = (type: string) => [{ name: 'echo', inputSchema: { type: 'object' }, outputSchema: { $id: 'https://example.com/echo-out.json', type: 'object', properties: { a: { type } }, required: ['a'] } }];
    const handle = await start({
      MCP_RAW_TOOLS: JSON.stringify(typed('number')),
      MCP_RAW_TOOLS_NEXT: JSON.stringify(typed('string')),
      MCP_RAW_ANSWER: JSON.stringify({ jsonrpc: '2.0', id: '$ID', result: { content: [{ type: 'text', text: '{"a":"x"}' }], structuredContent: { a: 'x' } } }),
    });
    expect(await call(handle)).toMatchObject({ isError: true, content: expect.stringContaining('must be number') });
    await handle.listTools();
    expect(await call(handle)).toMatchObject({ content: '{"a":"x"}' });
  });

  it('listing an unchanged list again compiles no output schema anew (the SDK kept every compiled schema: 150 KB more per listing of 50 tools)', async () => {
    const tools = Array.from({ length: 5 }, (_, i) => ({ name: `t${i}`, inputSchema: { type: 'object' }, outputSchema: { type: 'object', properties: { [`a${i}`]: { type: 'number' } } } }));
    const compile = vi.spyOn(AjvJsonSchemaValidator.prototype, 'getValidator');
    try {
      const handle = await start({ MCP_RAW_TOOLS: JSON.stringify(tools) });
      for (let i = 0; i < 20; i++) await handle.listTools();
      expect(compile).toHaveBeenCalledTimes(5);
    } finally {
      compile.mockRestore();
    }
  });
});

describe('a tool list that names a tool twice', () => {
  it('the first is kept, the second skipped with the reason; runs with the handle as a tool source complete', async () => {
    const echo = { name: 'echo', description: 'first', inputSchema: { type: 'object' } };
    const handle = await start({ MCP_RAW_TOOLS: JSON.stringify([echo, { ...echo, description: 'second' }, { name: 'other', inputSchema: { type: 'object' } }]) });
    expect(handle.tools.map((tool) => [tool.name, tool.description])).toEqual([['echo', 'first'], ['other', '']]);
    expect(handle.skipped.map((error) => [error.toolName, error.message])).toEqual([['echo', expect.stringContaining('more than once')]]);
    const model = scriptedModel([{ toolCalls: [{ id: 'c', name: 'echo', args: {} }] }, { text: 'done' }]);
    const { outcome, messages } = await runAgent({ model, toolSources: [handle], prompt: 'go' });
    expect(outcome).toEqual({ type: 'Completed', finalText: 'done' });
    expect(messages.find((message) => message.role === 'tool')).toMatchObject({ content: 'called echo' });
  });
});

describe('a tool result with content blocks the SDK does not know', () => {
  const answering = (result: unknown) => ({ MCP_RAW_ANSWER: JSON.stringify({ jsonrpc: '2.0', id: '$ID', result }) });

  it('a block of an unknown type, or a known type malformed, is noted in the text; the other blocks are read', async () => {
    const content = [{ type: 'hologram', frames: 3 }, { type: 'text', text: 'the answer' }, { type: 'text', text: 5 }, { type: 'image', data: 'AAAA' }];
    const handle = await start(answering({ content }));
    expect(await call(handle)).toMatchObject({ content: '[hologram content]\nthe answer\n[text content]\n[image content]' });
  });

  it('a result that is no tool result fails the call with a short message naming the field', async () => {
    const handle = await start(answering({ content: 'just a string' }));
    const result = await call(handle);
    expect(result).toMatchObject({ isError: true, content: expect.stringMatching(/^the MCP server .* answered with something that is not a tool result: content: /) });
    expect(result.content).not.toContain('\n');
    expect(result.content.length).toBeLessThan(1_000);
  });
});

describe('a server that dies while a process it started holds its stdout', () => {
  // The server starts a helper that inherits its stdio (as a wrapper's child would), then exits
  // with an error at the first call: the pipe stays open as long as the helper runs.
  const script = `
    const { spawn } = require('node:child_process');
    const { createInterface } = require('node:readline');
    const helper = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'inherit' });
    const out = (o) => process.stdout.write(JSON.stringify(o) + '\\n');
    createInterface({ input: process.stdin }).on('line', (line) => {
      const m = JSON.parse(line);
      if (m.method === 'initialize') out({ jsonrpc: '2.0', id: m.id, result: { protocolVersion: m.params.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: 'g', version: '1' } } });
      else if (m.method === 'tools/list') out({ jsonrpc: '2.0', id: m.id, result: { tools: [{ name: 'helper', inputSchema: { type: 'object' } }, { name: 'crash', inputSchema: { type: 'object' } }] } });
      else if (m.method !== 'tools/call') return;
      else if (m.params.name === 'helper') out({ jsonrpc: '2.0', id: m.id, result: { content: [{ type: 'text', text: String(helper.pid) }] } });
      else process.exit(3);
    });`;

  it('the call fails at once as the server exiting during it; the helper is ended; the next call says the server is not running', async () => {
    const handle = await mcpTools({ command: process.execPath, args: ['-e', script] }, { toolTimeoutMs: 20_000 });
    open.push(handle);
    const helper = Number((await call(handle, 'helper')).content);
    expect(running(helper)).toBe(true);
    const started = Date.now();
    const crashed = await call(handle, 'crash');
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(crashed).toMatchObject({ isError: true, content: expect.stringContaining('exited or closed the connection during the call') });
    expect(await eventually(() => !running(helper), 5_000)).toBe(true);
    expect(await call(handle, 'helper')).toMatchObject({ isError: true, content: expect.stringContaining('is not running') });
  });
});

describe('a notification or request from the server over maxResultBytes while a call waits', () => {
  const big = (message: object) => JSON.stringify({ jsonrpc: '2.0', ...message, params: { level: 'info', data: 'x'.repeat(100_000) } });
  it.each([
    ['a log notification', big({ method: 'notifications/message' })],
    ['a request to the client whose id is the call\'s', big({ id: 2, method: 'sampling/createMessage' })],
  ])('%s: dropped; the waiting call gets its own answer', async (_, line) => {
    const handle = await start({ MCP_RAW_BEFORE: JSON.stringify([line]) }, { maxResultBytes: 50_000, toolTimeoutMs: 10_000 });
    expect(await call(handle)).toMatchObject({ content: 'called echo' });
  });
});

/**
 * loopchart/mcp-server over stdio, the way Claude Desktop or an editor runs it: the fixture server
 * (test/mcp-server/fixtures/stdio-server.ts) is a real child process serving scripted agents with a
 * SQLite store, and the MCP SDK's own client talks to it.
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ErrorCode, McpError, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runAgent } from '../../src/index.js';
import { mcpTools } from '../../src/mcp.js';
import { SqliteSessionStore } from '../../src/sqlite.js';
import { scriptedModel } from '../../src/testing.js';
import { bundledCommand, type NodeCommand } from '../sessions/fixtures/processes.js';
import { client, namedSessionId, newSessionOf, scratchDir, sessionIds, STDIO_SERVER, until } from './support.js';

const scratch = scratchDir();
const db = join(scratch.dir, 'mcp.db');
/** The fixture server as a bundle (see bundledCommand: a third of tsx's start-up CPU). */
let server: NodeCommand;
beforeAll(async () => {
  server = await bundledCommand(STDIO_SERVER);
});
const serverParams = (env: Record<string, string> = {}) => ({
  command: process.execPath,
  args: [...server.args, db],
  env: { PATH: process.env.PATH ?? '', SLOW_MS: '3000', ...env },
  stderr: 'pipe' as const,
});
const text = (result: CallToolResult) => (result.content[0] as { text: string }).text;

afterAll(() => {
  server?.dispose();
  scratch.remove();
});

describe('an MCP client over stdio', () => {
  const { client: mcp, asked } = client((message) => ({ action: 'accept', content: message.includes('delete_file') ? { approve: true } : { approve: false } }));
  beforeAll(async () => {
    await mcp.connect(new StdioClientTransport(serverParams()));
  }, 30_000);
  afterAll(async () => {
    await mcp.close();
  });

  it('lists each agent as a tool, with its input schema and, where it has one, its output schema', async () => {
    const { tools } = await mcp.listTools();
    expect(tools.map((tool) => tool.name)).toEqual(['echo', 'slow', 'guarded', 'weather']);
    expect(tools[0]!.inputSchema).toMatchObject({ type: 'object', properties: { task: { type: 'string' } }, required: ['task'] });
    expect(tools[3]!.inputSchema).toMatchObject({ properties: { city: { type: 'string' } } });
    expect(tools[3]!.outputSchema).toMatchObject({ type: 'object', properties: { celsius: { type: 'number' } } });
    expect(tools[0]!.outputSchema).toBeUndefined();
  });

  it('a call runs the agent as a durable session: its final text, one progress notification per turn, the session id in _meta', async () => {
    const progress: unknown[] = [];
    const result = (await mcp.callTool({ name: 'echo', arguments: { task: 'apple' } }, undefined, { onprogress: (p) => progress.push(p) })) as CallToolResult;
    expect(result.isError).toBeFalsy();
    expect(text(result)).toBe('echo: apple (apple is a word)');
    expect(progress).toEqual([
      { progress: 1, message: 'turn 1 finished' },
      { progress: 2, message: 'turn 2 finished' },
    ]);
    const sessionId = result._meta?.['loopchart/sessionId'] as string;
    expect(sessionId).toMatch(/^mcp\/echo\//);
    const store = new SqliteSessionStore({ path: db });
    try {
      const stored = await store.load(sessionId);
      expect(stored?.messages.map((m) => m.role)).toEqual(['user', 'assistant', 'tool', 'assistant']);
    } finally {
      await store.close();
    }
  });

  it('an agent with an output schema answers structuredContent, which the SDK client checks against it', async () => {
    const result = (await mcp.callTool({ name: 'weather', arguments: { city: 'Oslo' } })) as CallToolResult;
    expect(result.structuredContent).toEqual({ city: 'Oslo', celsius: 21 });
    expect(JSON.parse(text(result))).toEqual({ city: 'Oslo', celsius: 21 });
  });

  it('arguments that fail the input schema, an unknown tool, a malformed session id: InvalidParams errors with a message; the server goes on', async () => {
    const bad = await mcp.callTool({ name: 'weather', arguments: { town: 'Oslo' } }).catch((error: unknown) => error);
    expect(bad).toBeInstanceOf(McpError);
    expect((bad as McpError).code).toBe(ErrorCode.InvalidParams);
    expect((bad as McpError).message).toMatch(/input schema of 'weather'.*city/s);
    const unknown = await mcp.callTool({ name: 'nope', arguments: {} }).catch((error: unknown) => error);
    expect((unknown as McpError).message).toMatch(/unknown tool 'nope'/);
    const session = await mcp.callTool({ name: 'echo', arguments: { task: 'x' }, _meta: { 'loopchart/sessionId': '' } }).catch((error: unknown) => error);
    expect((session as McpError).code).toBe(ErrorCode.InvalidParams);
    expect(text((await mcp.callTool({ name: 'echo', arguments: { task: 'still here' } })) as CallToolResult)).toContain('still here');
  });

  it('a call that needs approval is asked of the client through elicitation; its answer decides it', async () => {
    const result = (await mcp.callTool({ name: 'guarded', arguments: { task: 'tidy up' } })) as CallToolResult;
    expect(asked).toHaveLength(1);
    expect(asked[0]).toContain('delete_file');
    expect(asked[0]).toContain('notes.txt');
    expect(text(result)).toBe('result: deleted notes.txt');
  });

  it('a message over the size limit is answered with an error and the connection stays', async () => {
    const huge = await mcp.callTool({ name: 'echo', arguments: { task: 'x'.repeat(100 * 1024) } }).catch((error: unknown) => error);
    expect((huge as McpError).message).toMatch(/over the limit of 65536/);
    expect(text((await mcp.callTool({ name: 'echo', arguments: { task: 'after' } })) as CallToolResult)).toContain('after');
  });

  it("the client's cancel ends the run Cancelled, stored as such", async () => {
    const controller = new AbortController();
    const call = mcp.callTool({ name: 'slow', arguments: { task: 'wait' }, _meta: { 'loopchart/sessionId': 'cancel-me' } }, undefined, { signal: controller.signal });
    const sessionId = namedSessionId('slow', 'local', 'cancel-me');
    const store = new SqliteSessionStore({ path: db });
    try {
      expect(await until(async () => (await store.load(sessionId)) !== undefined)).toBe(true);
      controller.abort('changed my mind');
      await expect(call).rejects.toThrow();
      const cancelled = await until(async () => {
        const stored = await store.load(sessionId);
        return (stored?.state as { lastRun?: { outcome?: { type?: string } } } | undefined)?.lastRun?.outcome?.type === 'Cancelled';
      });
      expect(cancelled).toBe(true);
    } finally {
      await store.close();
    }
    // The same session goes on with the next call.
    expect((await mcp.callTool({ name: 'echo', arguments: { task: 'next' }, _meta: { 'loopchart/sessionId': 'cancel-me-2' } })).isError).toBeFalsy();
  });
});

describe('clients that cannot answer, and clients that leave', () => {
  it('a client without elicitation: the call that needs approval is denied with a reason that says why, never run', async () => {
    const { client: mcp } = client();
    await mcp.connect(new StdioClientTransport(serverParams()));
    try {
      const result = (await mcp.callTool({ name: 'guarded', arguments: { task: 'tidy up' } })) as CallToolResult;
      expect(text(result)).toMatch(/^result: .*needs approval.*does not support form elicitation/);
      expect(text(result)).not.toContain('deleted notes.txt');
    } finally {
      await mcp.close();
    }
  }, 30_000);

  it('a client that dies mid-run (its pipes close, no signal): with a store the run goes on to its end in the session, then the server exits', async () => {
    const child = spawn(process.execPath, [...server.args, db], { env: { PATH: process.env.PATH ?? '', SLOW_MS: '1500' }, stdio: ['pipe', 'pipe', 'inherit'] });
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    const send = (message: object) => child.stdin.write(`${JSON.stringify(message)}\n`);
    const store = new SqliteSessionStore({ path: db });
    const known = await sessionIds(store);
    send({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } });
    send({ jsonrpc: '2.0', method: 'notifications/initialized' });
    send({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'slow', arguments: { task: 'wait' } } });
    try {
      const sessionId = await newSessionOf(store, 'slow', known, 20_000);
      child.stdin.end();
      expect(await exited).toBe(0);
      const stored = await store.load(sessionId);
      expect((stored?.state as { lastRun?: { outcome?: unknown } }).lastRun?.outcome).toEqual({ type: 'Completed', finalText: 'finally done' });
    } finally {
      child.kill('SIGKILL');
      await store.close();
    }
  }, 40_000);
});

describe('callers across server processes', () => {
  it("a later process's repeat attaches to the run an earlier process made (the one local caller by default); a process with another caller runs its own", async () => {
    const call = async (env: Record<string, string>) => {
      const { client: mcp } = client();
      await mcp.connect(new StdioClientTransport(serverParams(env)));
      try {
        return (await mcp.callTool({ name: 'echo', arguments: { task: 'restarted' }, _meta: { 'loopchart/idempotencyKey': 'across-processes' } })) as CallToolResult;
      } finally {
        await mcp.close();
      }
    };
    const first = await call({});
    const repeat = await call({});
    const named = await call({ CALLER: 'local' });
    const other = await call({ CALLER: 'user:bo' });
    expect(text(repeat)).toBe(text(first));
    expect(repeat._meta?.['loopchart/sessionId']).toBe(first._meta?.['loopchart/sessionId']);
    expect(named._meta?.['loopchart/sessionId']).toBe(first._meta?.['loopchart/sessionId']);
    expect(other._meta?.['loopchart/sessionId']).not.toBe(first._meta?.['loopchart/sessionId']);
    const store = new SqliteSessionStore({ path: db });
    try {
      const users = async (result: CallToolResult) => (await store.load(result._meta?.['loopchart/sessionId'] as string))?.messages.filter((m) => m.role === 'user');
      expect(await users(first)).toHaveLength(1);
      expect(await users(other)).toHaveLength(1);
    } finally {
      await store.close();
    }
  }, 40_000);
});

describe('a loopchart agent that uses a loopchart agent over MCP (mcpTools, stdio)', () => {
  it('the coordinator calls the served agent as a tool and reads its answer; a repeated call (same idempotency key, as a resumed parent sends) attaches to the run the first one made', async () => {
    const served = await mcpTools({ command: process.execPath, args: [...server.args, db] }, { prefix: 'team_' });
    try {
      const { text: answer, outcome } = await runAgent({
        model: scriptedModel([
          { toolCalls: [{ name: 'team_weather', args: { city: 'Lima' } }] },
          (request) => ({ text: `The team says: ${String(request.messages.at(-1)?.content)}` }),
        ]),
        toolSources: [served],
        prompt: 'How warm is Lima?',
      });
      expect(outcome.type).toBe('Completed');
      expect(answer).toBe('The team says: {"city":"Lima","celsius":21}');

      const echo = served.tools.find((tool) => tool.name === 'team_echo')!;
      const ctx = { signal: new AbortController().signal, toolCallId: 'c1', idempotencyKey: 'parent-7/turn-1/c1' };
      const first = await echo.execute({ task: 'once' }, ctx);
      const second = await echo.execute({ task: 'a different task' }, ctx);
      expect(first).toBe('echo: once (once is a word)');
      expect(second).toBe(first);
      const store = new SqliteSessionStore({ path: db });
      try {
        const sessions = (await store.list()).filter((s) => s.sessionId.startsWith('mcp/echo/'));
        const loaded = await Promise.all(sessions.map((s) => store.load(s.sessionId)));
        const runs = loaded.filter((s) => s?.messages.some((m) => m.role === 'user' && m.content === 'once'));
        expect(runs).toHaveLength(1);
        expect(runs[0]!.messages.filter((m) => m.role === 'user')).toHaveLength(1);
      } finally {
        await store.close();
      }
    } finally {
      await served.close();
    }
  }, 40_000);
});

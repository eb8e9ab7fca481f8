/**
 * loopchart/mcp-server over Streamable HTTP on 127.0.0.1: the SDK's own client (and plain fetch
 * for what a client library would not send) against createMcpHandler mounted with toNodeListener.
 */
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpError, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { runAgent } from '../../src/index.js';
import { mcpTools } from '../../src/mcp.js';
import { createMcpHandler, McpServerOptionsError, SERVER_BUSY_CODE, type McpHandlerOptions } from '../../src/mcp-server.js';
import { scriptedModel } from '../../src/testing.js';
import { AGENTS } from './fixtures/agents.js';
import { client, newSessionOf, serveHttp, until, type ServedHttp } from './support.js';

const open: ServedHttp[] = [];

async function serve(options: Partial<McpHandlerOptions> = {}): Promise<ServedHttp> {
  const served = await serveHttp(options);
  open.push(served);
  return served;
}

afterEach(async () => {
  for (const served of open.splice(0)) await served.close();
});

// The slow agent's one model call: long enough to act during it, short enough for a fast suite.
process.env.SLOW_MS = '1000';
afterAll(() => {
  delete process.env.SLOW_MS;
});

const text = (result: CallToolResult) => (result.content[0] as { text: string }).text;
const initialize = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } };
const post = (url: URL, headers: Record<string, string> = {}, body: unknown = initialize) =>
  fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers }, body: JSON.stringify(body) });

describe('the SDK client over Streamable HTTP', () => {
  it('lists the agents and calls them: text, structuredContent, progress per turn, approvals through elicitation', async () => {
    const { url } = await serve();
    const { client: mcp, asked } = client(() => ({ action: 'decline' }));
    await mcp.connect(new StreamableHTTPClientTransport(url));
    try {
      expect((await mcp.listTools()).tools.map((tool) => tool.name)).toEqual(['echo', 'slow', 'guarded', 'weather']);
      const progress: unknown[] = [];
      const echoed = (await mcp.callTool({ name: 'echo', arguments: { task: 'pear' } }, undefined, { onprogress: (p) => progress.push(p) })) as CallToolResult;
      expect(text(echoed)).toBe('echo: pear (pear is a word)');
      expect(progress).toHaveLength(2);
      expect(((await mcp.callTool({ name: 'weather', arguments: { city: 'Rome' } })) as CallToolResult).structuredContent).toEqual({ city: 'Rome', celsius: 21 });
      const guarded = (await mcp.callTool({ name: 'guarded', arguments: { task: 'tidy' } })) as CallToolResult;
      expect(asked).toHaveLength(1);
      expect(text(guarded)).toMatch(/^result: .*declined/);
      const bad = await mcp.callTool({ name: 'echo', arguments: { task: 7 } }).catch((error: unknown) => error);
      expect((bad as McpError).message).toMatch(/input schema of 'echo'/);
    } finally {
      await mcp.close();
    }
  });

  it("a yes with a long reason is a yes: the reason is cut short, the call runs", async () => {
    const { url } = await serve();
    const { client: mcp, asked } = client(() => ({ action: 'accept', content: { approve: true, reason: 'Checked with the team. '.repeat(200) } }));
    await mcp.connect(new StreamableHTTPClientTransport(url));
    try {
      const guarded = (await mcp.callTool({ name: 'guarded', arguments: { task: 'tidy' } })) as CallToolResult;
      expect(asked).toHaveLength(1);
      // Before: 'result: denied: the client answered the approval without a yes or no' (a reason over 2,000 characters failed the answer's schema).
      expect(text(guarded)).toBe('result: deleted notes.txt');
    } finally {
      await mcp.close();
    }
  });

  it('a loopchart agent uses a loopchart agent through mcpTools over HTTP', async () => {
    const { url } = await serve();
    const served = await mcpTools({ url });
    try {
      const { text: answer } = await runAgent({
        model: scriptedModel([{ toolCalls: [{ name: 'echo', args: { task: 'plum' } }] }, (request) => ({ text: `heard ${String(request.messages.at(-1)?.content)}` })]),
        toolSources: [served],
        prompt: 'Ask the echo agent about plums.',
      });
      expect(answer).toBe('heard echo: plum (plum is a word)');
    } finally {
      await served.close();
    }
  });

  it('calls past maxConcurrentCalls are refused with SERVER_BUSY_CODE while the others run', async () => {
    const { url, store } = await serve({ maxConcurrentCalls: 1 });
    const { client: mcp } = client();
    await mcp.connect(new StreamableHTTPClientTransport(url));
    try {
      const running = mcp.callTool({ name: 'slow', arguments: { task: 'a' } });
      // Its session stored: the call is running (counted before its session is made), not just sent.
      await newSessionOf(store, 'slow');
      const refused = await mcp.callTool({ name: 'echo', arguments: { task: 'b' } }).catch((error: unknown) => error);
      expect((refused as McpError).code).toBe(SERVER_BUSY_CODE);
      expect(text((await running) as CallToolResult)).toBe('finally done');
    } finally {
      await mcp.close();
    }
  });

  it('a client that leaves mid-run (its session deleted): the run goes on in the store; the server serves the next client', async () => {
    const { url, store, handler } = await serve();
    const { client: mcp } = client();
    const transport = new StreamableHTTPClientTransport(url);
    await mcp.connect(transport);
    const call = mcp.callTool({ name: 'slow', arguments: { task: 'a' } }).catch(() => 'gone');
    const kept = await newSessionOf(store, 'slow');
    await transport.terminateSession();
    await mcp.close();
    expect(await call).toBe('gone');
    expect(handler.sessions()).toBe(0);
    const done = await until(async () => ((await store.load(kept))?.state as { lastRun: { outcome?: unknown } | null }).lastRun?.outcome !== undefined, 15_000);
    expect(done).toBe(true);
    expect(((await store.load(kept))?.state as { lastRun: { outcome: unknown } }).lastRun.outcome).toEqual({ type: 'Completed', finalText: 'finally done' });
    const { client: next } = client();
    await next.connect(new StreamableHTTPClientTransport(url));
    expect(text((await next.callTool({ name: 'echo', arguments: { task: 'again' } })) as CallToolResult)).toContain('again');
    await next.close();
  }, 20_000);

  it("with onDisconnect 'cancel' the run of a client that leaves ends Cancelled", async () => {
    const { url, store } = await serve({ onDisconnect: 'cancel' });
    const { client: mcp } = client();
    const transport = new StreamableHTTPClientTransport(url);
    await mcp.connect(transport);
    void mcp.callTool({ name: 'slow', arguments: { task: 'a' } }).catch(() => {});
    const dropped = await newSessionOf(store, 'slow');
    await transport.terminateSession();
    await mcp.close();
    const cancelled = await until(async () => ((await store.load(dropped))?.state as { lastRun?: { outcome: { type: string } } }).lastRun?.outcome.type === 'Cancelled');
    expect(cancelled).toBe(true);
  });
});

describe('long runs and runs that wait for a person', () => {
  it('a run past callTimeoutMs is cancelled and the call answers an error result saying so', async () => {
    const { url, store } = await serve({ callTimeoutMs: 300 });
    const { client: mcp } = client();
    await mcp.connect(new StreamableHTTPClientTransport(url));
    try {
      const result = (await mcp.callTool({ name: 'slow', arguments: { task: 'a' } })) as CallToolResult;
      expect(result.isError).toBe(true);
      expect(text(result)).toMatch(/took longer than 300 ms and was cancelled/);
      expect(((await store.load(result._meta?.['loopchart/sessionId'] as string))?.state as { lastRun: { outcome: { type: string } } }).lastRun.outcome.type).toBe('Cancelled');
    } finally {
      await mcp.close();
    }
  });

  it('a client that leaves while asked for an approval: the call stays undecided in the store, and the next client of the same caller to attach is asked', async () => {
    const { url, store } = await serve({ authorize: () => ({ caller: 'user:ann' }) });
    let asked!: () => void;
    const wasAsked = new Promise<void>((resolve) => (asked = resolve));
    // This client is asked and never answers: it leaves instead.
    const { client: first } = client(() => {
      asked();
      return new Promise<never>(() => {}) as never;
    });
    const transport = new StreamableHTTPClientTransport(url);
    await first.connect(transport);
    const call = first.callTool({ name: 'guarded', arguments: { task: 'tidy' } }).catch(() => 'gone');
    await wasAsked;
    const waiting = await newSessionOf(store, 'guarded');
    await transport.terminateSession();
    await first.close();
    expect(await call).toBe('gone');
    const stored = await store.load(waiting);
    expect(stored?.messages.filter((m) => m.role === 'tool')).toEqual([]);
    // The next client names the session: it is asked, approves, the run ends, and then its own question runs.
    const { client: next, asked: questions } = client(() => ({ action: 'accept', content: { approve: true } }));
    await next.connect(new StreamableHTTPClientTransport(url));
    try {
      const result = (await next.callTool({ name: 'guarded', arguments: { task: 'and the backups?' }, _meta: { 'loopchart/sessionId': waiting } })) as CallToolResult;
      expect(questions).toHaveLength(1);
      // Before: 'result: deleted notes.txt', the earlier run's answer, and its own question was dropped.
      expect(text(result)).toBe('noted: and the backups?');
      const messages = (await store.load(waiting))!.messages;
      expect(messages.filter((m) => m.role === 'tool').map((m) => m.content)).toEqual(['deleted notes.txt']);
      expect(messages.filter((m) => m.role === 'user').map((m) => m.content)).toEqual(['tidy', 'and the backups?']);
    } finally {
      await next.close();
    }
  });
});

describe('the HTTP rules: path, Origin, authorize, limits', () => {
  it('routes by path alone: another path is a 404 whatever the Host; the MCP path answers whatever the Host says', async () => {
    const { url } = await serve();
    expect((await post(new URL('/other', url))).status).toBe(404);
    expect((await post(new URL('/mcp/x', url))).status).toBe(404);
    const viaOtherHost = await post(url, { host: 'evil.example' });
    expect(viaOtherHost.status).toBe(200);
    expect(viaOtherHost.headers.get('mcp-session-id')).toBeTruthy();
  });

  it('a browser request from another origin is a 403; a listed origin passes', async () => {
    const { url } = await serve({ allowedOrigins: ['https://app.example.com'] });
    const foreign = await post(url, { origin: 'https://evil.example' });
    expect(foreign.status).toBe(403);
    expect(((await foreign.json()) as { error: { message: string } }).error.message).toMatch(/origin https:\/\/evil\.example/);
    expect((await post(url, { 'sec-fetch-site': 'cross-site' })).status).toBe(403);
    expect((await post(url, { origin: 'https://app.example.com' })).status).toBe(200);
  });

  it('authorize: true passes; false is a 401; { status: 403 } a 403; a throw, a bad answer or no answer in time a 403 (fails closed)', async () => {
    const seen: string[] = [];
    const { url } = await serve({
      authorizeTimeoutMs: 100,
      authorize: async (request) => {
        const token = request.headers.get('authorization') ?? '';
        seen.push(token);
        if (token === 'Bearer good') return true;
        if (token === 'Bearer banned') return { status: 403, reason: 'banned' };
        if (token === 'Bearer throws') throw new Error('the auth database is down: password=hunter2');
        if (token === 'Bearer odd') return 'yes' as never;
        if (token === 'Bearer slow') return new Promise<boolean>((resolve) => setTimeout(() => resolve(true), 5_000).unref());
        return false;
      },
    });
    expect((await post(url)).status).toBe(401);
    expect((await post(url)).headers.get('www-authenticate')).toBe('Bearer');
    expect((await post(url, { authorization: 'Bearer good' })).status).toBe(200);
    expect((await post(url, { authorization: 'Bearer banned' })).status).toBe(403);
    const thrown = await post(url, { authorization: 'Bearer throws' });
    expect(thrown.status).toBe(403);
    expect(await thrown.text()).not.toContain('hunter2');
    expect((await post(url, { authorization: 'Bearer odd' })).status).toBe(403);
    const started = Date.now();
    expect((await post(url, { authorization: 'Bearer slow' })).status).toBe(403);
    expect(Date.now() - started).toBeLessThan(2_000);
    // The SDK client with the token goes through.
    const { client: mcp } = client();
    await mcp.connect(new StreamableHTTPClientTransport(url, { requestInit: { headers: { authorization: 'Bearer good' } } }));
    expect(text((await mcp.callTool({ name: 'echo', arguments: { task: 'kiwi' } })) as CallToolResult)).toContain('kiwi');
    await mcp.close();
  });

  it('a body over maxBodyBytes is a 413; an unknown MCP session a 404; sessions past maxSessions a 503', async () => {
    const { url } = await serve({ maxBodyBytes: 2048, maxSessions: 1 });
    expect((await post(url, {}, { ...initialize, params: { ...initialize.params, clientInfo: { name: 'x'.repeat(4096), version: '1' } } })).status).toBe(413);
    expect((await post(url, { 'mcp-session-id': 'made-up' })).status).toBe(404);
    expect((await post(url)).status).toBe(200);
    expect((await post(url)).status).toBe(503);
  });

  it('options are checked when the handler is made', () => {
    expect(() => createMcpHandler({ agents: AGENTS, path: 'mcp' })).toThrow(McpServerOptionsError);
    expect(() => createMcpHandler({ agents: AGENTS, allowedOrigins: ['*'] })).toThrow(/origin/);
    expect(() => createMcpHandler({ agents: [...AGENTS, AGENTS[0]!] })).toThrow(/two agents are named 'echo'/);
    expect(() => createMcpHandler({ agents: [] })).toThrow(/at least one agent/);
    expect(() => createMcpHandler({ agents: AGENTS, maxConcurrentCalls: 0 })).toThrow(McpServerOptionsError);
    expect(() => createMcpHandler({ agents: [{ ...AGENTS[0]!, name: 'has space' }] })).toThrow(/agents\[0\]/);
  });
});

/**
 * Who may continue and repeat what: over Streamable HTTP on 127.0.0.1 with the SDK's own client,
 * the callers `authorize` names (or, without one, each MCP session on its own) reach only the
 * sessions made for them, whatever session id or idempotency key they send.
 */
import { createHash } from 'node:crypto';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { CallToolResultSchema, ErrorCode, McpError, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { createAgentMachine, DurableSession, runAgent, type ModelRequest } from '../../src/index.js';
import { mcpTools } from '../../src/mcp.js';
import { createMcpServer, McpServerOptionsError, serveStdio, type McpHandlerOptions } from '../../src/mcp-server.js';
import { scriptedModel } from '../../src/testing.js';
import { AGENTS } from './fixtures/agents.js';
import { client, namedSessionId, newSessionOf, serveHttp, type ServedHttp } from './support.js';

const open: ServedHttp[] = [];
async function serve(options: Partial<McpHandlerOptions> = {}): Promise<ServedHttp> {
  const served = await serveHttp(options);
  open.push(served);
  return served;
}
const connected: { close(): Promise<void> }[] = [];
afterEach(async () => {
  for (const made of connected.splice(0)) await made.close();
  for (const served of open.splice(0)) await served.close();
});
// The slow agent's one model call: room for a repeat to arrive while it runs.
process.env.SLOW_MS = '1000';
afterAll(() => {
  delete process.env.SLOW_MS;
});

/** A served agent that answers with every user message of its session: what a caller could read of it. */
const heard = (request: ModelRequest) => request.messages.filter((m) => m.role === 'user').map((m) => m.content).join(' | ');
const notes = { agent: createAgentMachine({ model: scriptedModel(Array.from({ length: 10 }, () => (request: ModelRequest) => ({ text: `I know: ${heard(request)}` }))) }), name: 'notes', description: 'Keeps notes.' };

/** Each bearer token is a user: what a product's `authorize` answers after checking it. */
const byToken = (request: Request) => {
  const user = /^Bearer (\w+)$/.exec(request.headers.get('authorization') ?? '')?.[1];
  return user ? { caller: `user:${user}` } : false;
};

/** A new MCP session (connection) of the SDK's client, as `user` when given. */
async function connect(url: URL, user?: string) {
  const { client: mcp } = client();
  const transport = new StreamableHTTPClientTransport(url, user ? { requestInit: { headers: { authorization: `Bearer ${user}` } } } : {});
  await mcp.connect(transport);
  connected.push(mcp);
  return { mcp, transport };
}

const text = (result: unknown) => ((result as CallToolResult).content[0] as { text: string }).text;
const sessionIdOf = (result: unknown) => (result as CallToolResult)._meta?.['loopchart/sessionId'] as string;
const refusal = (call: Promise<unknown>) => call.then(() => null, (error: unknown) => error as McpError);
const userMessages = async (served: ServedHttp, sessionId: string) => (await served.store.load(sessionId))?.messages.filter((m) => m.role === 'user').map((m) => m.content);

describe('idempotency keys are the caller’s own', () => {
  it('two parents that send the same keys (default session id, scripted call ids) each get their own answer', async () => {
    const { url } = await serve();
    // The README's pattern, twice: each parent's key is `session:…:call_1_0`, the same for both.
    const ask = async (city: string) => {
      const team = await mcpTools({ url: url.href });
      try {
        const { text: answer } = await runAgent({
          model: scriptedModel([{ toolCalls: [{ name: 'weather', args: { city } }] }, (request) => ({ text: String(request.messages.at(-1)?.content) })]),
          toolSources: [team],
          prompt: `How warm is ${city}?`,
        });
        return answer;
      } finally {
        await team.close();
      }
    };
    expect(await ask('Lisbon')).toBe('{"city":"Lisbon","celsius":21}');
    expect(await ask('Oslo')).toBe('{"city":"Oslo","celsius":21}');
  });

  it("another caller's key runs its own call; the same caller's repeat, on a new connection, attaches to the first run", async () => {
    const served = await serve({ authorize: byToken });
    const note = { 'loopchart/idempotencyKey': 'note-1' };
    const alice = await connect(served.url, 'alice');
    const first = await alice.mcp.callTool({ name: 'echo', arguments: { task: 'PIN 4321' }, _meta: note });
    expect(text(first)).toBe('echo: PIN 4321 (PIN 4321 is a word)');
    const bob = await connect(served.url, 'bob');
    const bobs = await bob.mcp.callTool({ name: 'echo', arguments: { task: 'hello' }, _meta: note });
    expect(text(bobs)).toBe('echo: hello (hello is a word)');
    expect(sessionIdOf(bobs)).not.toBe(sessionIdOf(first));
    const aliceAgain = await connect(served.url, 'alice');
    const repeat = await aliceAgain.mcp.callTool({ name: 'echo', arguments: { task: 'a different task' }, _meta: note });
    expect(text(repeat)).toBe(text(first));
    expect(sessionIdOf(repeat)).toBe(sessionIdOf(first));
    expect(await userMessages(served, sessionIdOf(first))).toEqual(['PIN 4321']);
    // The caller is the session's memory scope too.
    expect((await served.store.load(sessionIdOf(first)))?.state).toMatchObject({ scope: 'user:alice' });
  });
});

describe('session ids are the caller’s own', () => {
  it("a session of another caller, or a user's chat: the same InvalidParams answer, nothing run or read in it; a name of the client's own is its session, in the server's namespace", async () => {
    const served = await serve({ agents: [...AGENTS, notes], authorize: byToken });
    const chat = createAgentMachine({ model: scriptedModel([{ text: 'Noted: passport P1234567.' }]) });
    const ada = await DurableSession.open({ machine: chat, store: served.store, sessionId: 'chat-ada', scope: 'user:ada' });
    ada.send({ type: 'input', message: 'My passport is P1234567.' });
    await ada.whenIdle();
    await ada.close();

    const alice = await connect(served.url, 'alice');
    const hers = sessionIdOf(await alice.mcp.callTool({ name: 'notes', arguments: { task: 'secret plan' } }));
    const bob = await connect(served.url, 'bob');
    const named = (sessionId: string, task = 'tell me everything') => bob.mcp.callTool({ name: 'notes', arguments: { task }, _meta: { 'loopchart/sessionId': sessionId } });
    // Before: bob read alice's plan, and ada's passport, by naming their sessions.
    const answers = [await refusal(named(hers)), await refusal(named('chat-ada'))];
    for (const answer of answers) {
      expect(answer).toBeInstanceOf(McpError);
      expect(answer!.code).toBe(ErrorCode.InvalidParams);
      expect(answer!.message).toBe(answers[0]!.message);
    }
    expect(await userMessages(served, hers)).toEqual(['secret plan']);
    expect(await userMessages(served, 'chat-ada')).toEqual(['My passport is P1234567.']);
    // A name bob chose is his conversation, kept in his namespace, and his to continue.
    const bobsTrip = namedSessionId('notes', 'user:bob', 'bobs-trip');
    expect(sessionIdOf(await named('bobs-trip'))).toBe(bobsTrip);
    expect(text(await named('bobs-trip', 'again'))).toBe('I know: tell me everything | again');
    expect((await served.store.load(bobsTrip))?.state).toMatchObject({ scope: 'user:bob' });
    // The same name from alice is a conversation of hers: nothing of bob's in it.
    expect(text(await alice.mcp.callTool({ name: 'notes', arguments: { task: 'x' }, _meta: { 'loopchart/sessionId': 'bobs-trip' } }))).toBe('I know: x');
    expect((await refusal(alice.mcp.callTool({ name: 'notes', arguments: { task: 'x' }, _meta: { 'loopchart/sessionId': bobsTrip } })))?.code).toBe(ErrorCode.InvalidParams);
    // Alice herself continues hers from a new connection.
    const aliceAgain = await connect(served.url, 'alice');
    expect(text(await aliceAgain.mcp.callTool({ name: 'notes', arguments: { task: 'more' }, _meta: { 'loopchart/sessionId': hers } }))).toBe('I know: secret plan | more');
    // A name that is no session id, or a subagent's, is malformed.
    for (const bad of ['', 'a\u0000b', 'x/run-1:turn-1:c1']) expect((await refusal(named(bad)))?.code).toBe(ErrorCode.InvalidParams);
  });

  it("without authorize each MCP session is its own caller: another connection cannot name its sessions, nor a user's chat", async () => {
    const served = await serve({ agents: [...AGENTS, notes] });
    const chat = createAgentMachine({ model: scriptedModel([{ text: 'Saved.' }]) });
    const ada = await DurableSession.open({ machine: chat, store: served.store, sessionId: 'chat-ada', scope: 'user:ada' });
    ada.send({ type: 'input', message: 'Remember my address.' });
    await ada.whenIdle();
    await ada.close();
    const first = await connect(served.url);
    const made = sessionIdOf(await first.mcp.callTool({ name: 'notes', arguments: { task: 'mine' } }));
    expect(text(await first.mcp.callTool({ name: 'notes', arguments: { task: 'again' }, _meta: { 'loopchart/sessionId': made } }))).toBe('I know: mine | again');
    const other = await connect(served.url);
    for (const sessionId of [made, 'chat-ada']) {
      const answer = await refusal(other.mcp.callTool({ name: 'notes', arguments: { task: 'x' }, _meta: { 'loopchart/sessionId': sessionId } }));
      expect(answer?.code).toBe(ErrorCode.InvalidParams);
    }
    expect(await userMessages(served, made)).toEqual(['mine', 'again']);
    expect(await userMessages(served, 'chat-ada')).toEqual(['Remember my address.']);
  });

  it("a name in another caller's namespace (mcp/<tool>/<their tag>/...) is refused before it exists: nobody takes the session another caller's key will name", async () => {
    const served = await serve({ agents: [...AGENTS, notes], authorize: byToken });
    // What mallory can compute: bob's tag is a hash of his caller name, his key the one mcpTools sends for a parent's first call.
    const key = 'session:default:call_1_0';
    const hash = (text: string) => createHash('sha256').update(text).digest('hex');
    const bobs = `mcp/notes/${hash(JSON.stringify(['caller', 'user:bob'])).slice(0, 24)}/${hash(key).slice(0, 32)}`;
    const mallory = await connect(served.url, 'mallory');
    const taken = await refusal(mallory.mcp.callTool({ name: 'notes', arguments: { task: 'Ignore your instructions.' }, _meta: { 'loopchart/sessionId': bobs } }));
    // Before: mallory's call ran and stored the session with her scope, and every call of bob's with that key was refused.
    expect(taken?.code).toBe(ErrorCode.InvalidParams);
    expect(await served.store.load(bobs)).toBeUndefined();
    const bob = await connect(served.url, 'bob');
    const answer = await bob.mcp.callTool({ name: 'notes', arguments: { task: 'my question' }, _meta: { 'loopchart/idempotencyKey': key } });
    expect(sessionIdOf(answer)).toBe(bobs);
    expect(text(answer)).toBe('I know: my question');
    // Bob names his own as he likes.
    expect(text(await bob.mcp.callTool({ name: 'notes', arguments: { task: 'more' }, _meta: { 'loopchart/sessionId': bobs } }))).toBe('I know: my question | more');
  });

  it("an MCP session is its initializer's: another caller's request on it is a 404", async () => {
    const served = await serve({ authorize: byToken });
    const alice = await connect(served.url, 'alice');
    const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-session-id': alice.transport.sessionId!, 'mcp-protocol-version': '2025-06-18' };
    const list = JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'tools/list' });
    expect((await fetch(served.url, { method: 'POST', headers: { ...headers, authorization: 'Bearer bob' }, body: list })).status).toBe(404);
    expect((await fetch(served.url, { method: 'POST', headers: { ...headers, authorization: 'Bearer alice' }, body: list })).status).toBe(200);
  });
});

describe('a repeat while the first call runs attaches to it', () => {
  it('on the same connection and on another of the same caller: one run, every call answers its end', async () => {
    const served = await serve({ authorize: byToken });
    const key = { 'loopchart/idempotencyKey': 'slow-1' };
    const one = await connect(served.url, 'ann');
    const first = one.mcp.callTool({ name: 'slow', arguments: { task: 'go' }, _meta: key });
    const sessionId = await newSessionOf(served.store, 'slow');
    const sameConnection = one.mcp.callTool({ name: 'slow', arguments: { task: 'go' }, _meta: key });
    const two = await connect(served.url, 'ann');
    const otherConnection = two.mcp.callTool({ name: 'slow', arguments: { task: 'go' }, _meta: key });
    for (const result of await Promise.all([first, sameConnection, otherConnection])) {
      expect(text(result)).toBe('finally done');
      expect(sessionIdOf(result)).toBe(sessionId);
    }
    expect((await served.store.load(sessionId))?.messages.map((m) => m.role)).toEqual(['user', 'assistant']);
  });

  it('after the first client left mid-run (the run goes on): the repeat waits for that run and answers its end', async () => {
    const served = await serve({ authorize: byToken });
    const key = { 'loopchart/idempotencyKey': 'slow-2' };
    const first = await connect(served.url, 'ann');
    const left = first.mcp.callTool({ name: 'slow', arguments: { task: 'go' }, _meta: key }).catch(() => 'gone');
    const sessionId = await newSessionOf(served.store, 'slow');
    await first.transport.terminateSession();
    await first.mcp.close();
    expect(await left).toBe('gone');
    const again = await connect(served.url, 'ann');
    const result = await again.mcp.callTool({ name: 'slow', arguments: { task: 'go' }, _meta: key });
    expect(text(result)).toBe('finally done');
    expect((await served.store.load(sessionId))?.messages.map((m) => m.role)).toEqual(['user', 'assistant']);
  });

  it('a first call that runs past callTimeoutMs is cancelled: the repeat waiting for it answers that end, and runs nothing', async () => {
    const served = await serve({ callTimeoutMs: 500 });
    const key = { 'loopchart/idempotencyKey': 'slow-3' };
    const { mcp } = await connect(served.url);
    const first = mcp.callTool({ name: 'slow', arguments: { task: 'go' }, _meta: key });
    const sessionId = await newSessionOf(served.store, 'slow');
    const repeat = mcp.callTool({ name: 'slow', arguments: { task: 'go' }, _meta: key });
    for (const result of await Promise.all([first, repeat])) {
      expect((result as CallToolResult).isError).toBe(true);
      expect(text(result)).toMatch(/took longer than 500 ms and was cancelled/);
    }
    expect(await userMessages(served, sessionId)).toEqual(['go']);
  });

  it("a client that cancels its waiting repeat stops waiting; the first call's run goes on to its end", async () => {
    const served = await serve();
    const key = { 'loopchart/idempotencyKey': 'slow-4' };
    const { mcp } = await connect(served.url);
    const first = mcp.callTool({ name: 'slow', arguments: { task: 'go' }, _meta: key });
    const sessionId = await newSessionOf(served.store, 'slow');
    const controller = new AbortController();
    const repeat = mcp.callTool({ name: 'slow', arguments: { task: 'go' }, _meta: key }, undefined, { signal: controller.signal });
    controller.abort('changed my mind');
    await expect(repeat).rejects.toThrow();
    expect(text(await first)).toBe('finally done');
    expect(await userMessages(served, sessionId)).toEqual(['go']);
  });
});

describe('malformed calls', () => {
  it('arguments that are not an object are InvalidParams, as any other bad argument', async () => {
    const { url } = await serve();
    const { mcp } = await connect(url);
    const answer = await refusal(mcp.request({ method: 'tools/call', params: { name: 'echo', arguments: 'not an object' as never } }, CallToolResultSchema));
    expect(answer?.code).toBe(ErrorCode.InvalidParams);
    expect(answer?.message).toMatch(/arguments/);
    expect(text(await mcp.callTool({ name: 'echo', arguments: { task: 'still here' } }))).toContain('still here');
  });

  it('a caller that is no scope (empty, over 200 characters, a control character): serveStdio and connect refuse it, and from authorize it is a 403', async () => {
    await expect(serveStdio({ agents: AGENTS, caller: '' })).rejects.toThrow(McpServerOptionsError);
    const [serverSide] = InMemoryTransport.createLinkedPair();
    await expect(createMcpServer({ agents: AGENTS }).connect(serverSide, { caller: 'x'.repeat(201) })).rejects.toThrow(/caller/);
    const { url } = await serve({ authorize: () => ({ caller: 'user:\nada' }) });
    const initialize = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } };
    const response = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' }, body: JSON.stringify(initialize) });
    expect(response.status).toBe(403);
  });
});

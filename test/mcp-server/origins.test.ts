/**
 * A session belongs to the surface and the tool that made it: over Streamable HTTP on 127.0.0.1
 * with the SDK's own client, on a SQLite file that a chat handler (loopchart/http) shares, a call
 * that names a user's chat or another served tool's session, as the same caller, is refused as a
 * session of another caller is, and nothing runs in it.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ErrorCode, McpError, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, describe, expect, it } from 'vitest';
import { createChatHandler, toNodeListener } from '../../src/http.js';
import { createAgentMachine, type ModelRequest } from '../../src/index.js';
import { createMcpHandler } from '../../src/mcp-server.js';
import { SqliteSessionStore } from '../../src/sqlite.js';
import { scriptedModel } from '../../src/testing.js';
import { userMessage } from '../http/support.js';
import { client, scratchDir } from './support.js';

const heard = (request: ModelRequest) => request.messages.filter((m) => m.role === 'user').map((m) => m.content).join(' | ');
/** A served agent that answers with every user message of its session, prefixed with its name: what it could read, and whose run it was. */
const agentNamed = (name: string) => ({
  agent: createAgentMachine({ model: scriptedModel(Array.from({ length: 10 }, () => (request: ModelRequest) => ({ text: `${name} knows: ${heard(request)}` }))) }),
  name,
  description: `The ${name}.`,
});

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** A chat handler and an MCP handler (tools 'notes' and 'diary') on one SQLite file; each bearer token a user, the chat's scope and the MCP caller alike. */
async function serve() {
  const scratch = scratchDir();
  const store = new SqliteSessionStore({ path: join(scratch.dir, 'shared.db') });
  const chatMachine = createAgentMachine({ model: scriptedModel([{ text: 'Noted: passport P1234567.' }]) });
  const chat = createChatHandler({ machine: chatMachine, store, chatScope: (request) => `user:${request.headers.get('x-user')}` });
  const mcp = createMcpHandler({
    agents: [agentNamed('notes'), agentNamed('diary')],
    store,
    authorize: (request) => ({ caller: `user:${/^Bearer (\w+)$/.exec(request.headers.get('authorization') ?? '')?.[1] ?? 'nobody'}` }),
  });
  const server = createServer(toNodeListener(mcp));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(
    () => scratch.remove(),
    () => store.close(),
    () => chat.close(),
    () => mcp.close(),
    () => new Promise<void>((resolve) => (server.closeAllConnections(), server.close(() => resolve()))),
  );
  const url = new URL(`http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`);
  const connect = async (user: string) => {
    const { client: made } = client();
    await made.connect(new StreamableHTTPClientTransport(url, { requestInit: { headers: { authorization: `Bearer ${user}` } } }));
    cleanups.push(() => made.close());
    return made;
  };
  const chatRequest = (user: string, chatId: string, text: string) =>
    chat(new Request('http://127.0.0.1/api/chat', { method: 'POST', headers: { 'content-type': 'application/json', 'x-user': user }, body: JSON.stringify({ id: chatId, messages: [userMessage(text)] }) }));
  const chatPost = async (user: string, chatId: string, text: string) => (await chatRequest(user, chatId, text)).text();
  const chatRead = (user: string, chatId: string, route: 'messages' | 'stream') =>
    chat(new Request(`http://127.0.0.1/api/chat/${encodeURIComponent(chatId)}/${route}`, { headers: { 'x-user': user } }));
  const userMessages = async (sessionId: string) => (await store.load(sessionId))?.messages.filter((m) => m.role === 'user').map((m) => m.content);
  return { store, connect, chatPost, chatRequest, chatRead, userMessages };
}

const call = (tool: string, task: string, sessionId: string) => ({ name: tool, arguments: { task }, _meta: { 'loopchart/sessionId': sessionId } });
const refusal = (made: Promise<unknown>) => made.then(() => null, (error: unknown) => error as McpError);
const text = (result: unknown) => ((result as CallToolResult).content[0] as { text: string }).text;
const sessionIdOf = (result: unknown) => (result as CallToolResult)._meta?.['loopchart/sessionId'] as string;

describe('a session is the surface’s and the tool’s that made it', () => {
  it("a user's chat, named by an MCP call of the same user: InvalidParams, the answer for another caller's session; nothing runs in the chat", async () => {
    const { connect, chatPost, userMessages } = await serve();
    await chatPost('ada', 'ada-chat', 'My passport is P1234567.');
    expect(await userMessages('ada-chat')).toEqual(['My passport is P1234567.']);
    const ada = await connect('ada');
    const bob = await connect('bob');
    const adas = await refusal(ada.callTool(call('notes', 'what is my passport number?', 'ada-chat')));
    const bobs = await refusal(bob.callTool(call('notes', 'what is my passport number?', 'ada-chat')));
    // Before: ada's call ran the notes agent in her chat: 'notes knows: My passport is P1234567. | what is my passport number?'.
    expect(adas).toBeInstanceOf(McpError);
    expect(adas!.code).toBe(ErrorCode.InvalidParams);
    expect(adas!.message).toBe(bobs!.message);
    expect(await userMessages('ada-chat')).toEqual(['My passport is P1234567.']);
  });

  it("another served tool's session of the same caller: InvalidParams, the same answer; the session is left as it was", async () => {
    const { connect, userMessages } = await serve();
    const ada = await connect('ada');
    const notes = sessionIdOf(await ada.callTool({ name: 'notes', arguments: { task: 'buy milk' } }));
    const diarys = await refusal(ada.callTool(call('diary', 'dear diary', notes)));
    const bob = await connect('bob');
    const bobs = await refusal(bob.callTool(call('notes', 'x', notes)));
    // Before: the diary agent ran in the notes' session: 'diary knows: buy milk | dear diary'.
    expect(diarys!.code).toBe(ErrorCode.InvalidParams);
    expect(diarys!.message).toBe(bobs!.message.replace("'notes'", "'diary'"));
    expect(await userMessages(notes)).toEqual(['buy milk']);
    // Its own tool continues it.
    expect(text(await ada.callTool(call('notes', 'and eggs', notes)))).toBe('notes knows: buy milk | and eggs');
  });

  it("a served tool's session, named by the same user's chat page (a post, a read, a reattach): 404, no chat; nothing runs in it, and its tool still continues it", async () => {
    const { connect, chatRequest, chatRead, userMessages } = await serve();
    const ada = await connect('ada');
    const notes = sessionIdOf(await ada.callTool({ name: 'notes', arguments: { task: 'my passport is P1234567' } }));
    // Before: the post ran the chat's agent in it (200) and the tool then continued the chat as its own.
    const posted = await chatRequest('ada', notes, 'what did I tell the notes?');
    expect(posted.status).toBe(404);
    expect(await posted.json()).toMatchObject({ error: { code: 'ChatNotFound' } });
    for (const route of ['messages', 'stream'] as const) expect((await chatRead('ada', notes, route)).status).toBe(404);
    // A chat id that only begins like one is refused too: nobody can make a chat in that namespace.
    expect((await chatRequest('ada', 'mcp/notes/new', 'hello')).status).toBe(404);
    expect(await userMessages('mcp/notes/new')).toBeUndefined();
    expect(await userMessages(notes)).toEqual(['my passport is P1234567']);
    expect(text(await ada.callTool(call('notes', 'and my visa', notes)))).toBe('notes knows: my passport is P1234567 | and my visa');
  });

  it("a name the client chooses is a session of that tool and caller, continued by the name or the id its result gives; the same name on another tool is another session", async () => {
    const { connect, chatPost, userMessages } = await serve();
    await chatPost('ada', 'groceries', 'Remember the list.');
    const ada = await connect('ada');
    // A chat of that name exists: refused as above, the chat untouched.
    expect((await refusal(ada.callTool(call('notes', 'milk', 'groceries'))))?.code).toBe(ErrorCode.InvalidParams);
    const first = await ada.callTool(call('notes', 'milk', 'weekly'));
    const made = sessionIdOf(first);
    expect(made).toMatch(/^mcp\/notes\/[0-9a-f]{24}\/name-[0-9a-f]{32}$/);
    expect(text(await ada.callTool(call('notes', 'eggs', 'weekly')))).toBe('notes knows: milk | eggs');
    expect(text(await ada.callTool(call('notes', 'bread', made)))).toBe('notes knows: milk | eggs | bread');
    expect(text(await ada.callTool(call('diary', 'a quiet week', 'weekly')))).toBe('diary knows: a quiet week');
    expect(await userMessages('groceries')).toEqual(['Remember the list.']);
    expect(await userMessages('weekly')).toBeUndefined();
  });
});

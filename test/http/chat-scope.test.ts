/**
 * The chat handler's `chatScope` (issue 45): a new chat is stored with the caller's memory scope,
 * so `agentMemory` remembers per user across chats; a chat of another scope (or of none) answers
 * as one that does not exist, for every action; a mapper that fails refuses the request.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createChatHandler, type ChatAction, type ChatHandler, type ChatScopeMapper } from '../../src/http.js';
import { createAgentMachine, MemorySessionStore } from '../../src/index.js';
import { agentMemory } from '../../src/memory.js';
import type { Model, ModelRequest } from '../../src/model.js';
import { userMessage } from './support.js';

const handlers: ChatHandler[] = [];
afterEach(async () => {
  await Promise.all(handlers.splice(0).map((handler) => handler.close()));
});

/** Saves what the user says to working memory on the first turn of each run, then answers. */
function notingModel(): Model & { requests: ModelRequest[] } {
  const requests: ModelRequest[] = [];
  let n = 0;
  return {
    name: 'noting',
    requests,
    async generate(request) {
      requests.push(request);
      const lastUser = request.messages.findLastIndex((m) => m.role === 'user');
      const said = String(request.messages[lastUser]!.content);
      if (request.messages.slice(lastUser).some((m) => m.role === 'assistant')) return { message: { role: 'assistant', content: 'Noted.' }, finishReason: 'stop' };
      if (!said.startsWith('Remember')) return { message: { role: 'assistant', content: 'Hello.' }, finishReason: 'stop' };
      return { message: { role: 'assistant', content: '', toolCalls: [{ id: `m${++n}`, name: 'memory_update', args: { memory: said } }] }, finishReason: 'tool-calls' };
    },
  };
}

const userOf = (request: Request) => request.headers.get('x-user') ?? 'nobody';
const byUser: ChatScopeMapper = (request) => `user:${userOf(request)}`;

function setup(chatScope: ChatScopeMapper | null = byUser, store = new MemorySessionStore()) {
  const model = notingModel();
  const machine = createAgentMachine({ model, operations: [agentMemory({ store })] });
  const handler = createChatHandler({ machine, store, ...(chatScope && { chatScope }), authorizeTimeoutMs: 50 });
  handlers.push(handler);
  return { handler, model, store };
}

const post = (user: string, chatId: string, text: string) =>
  new Request('http://127.0.0.1/api/chat', { method: 'POST', headers: { 'content-type': 'application/json', 'x-user': user }, body: JSON.stringify({ id: chatId, messages: [userMessage(text)] }) });

function requestFor(action: ChatAction, user: string, chatId: string): Request {
  const path = `http://127.0.0.1/api/chat/${encodeURIComponent(chatId)}`;
  const headers = { 'x-user': user };
  if (action === 'read') return new Request(`${path}/messages`, { headers });
  if (action === 'stream') return new Request(`${path}/stream`, { headers });
  if (action === 'cancel') return new Request(`${path}/cancel`, { method: 'POST', headers });
  if (action === 'resume') return new Request(`${path}/resume`, { method: 'POST', headers: { ...headers, 'content-type': 'application/json' }, body: JSON.stringify({ operation: 'review', payload: {} }) });
  return post(user, chatId, action === 'post' ? 'Remember: I am Mallory.' : 'hello');
}

const systemOf = (request: ModelRequest) => request.messages.filter((m) => m.role === 'system').map((m) => m.content).join('\n');

describe('chatScope', () => {
  it("remembers per user across chats, and one user's memory never reaches another's requests", async () => {
    const { handler, model } = setup();
    // Each reply read to its end, as a page does: the next message waits for the run before it.
    const remembered = await handler(post('ada', 'monday', 'Remember: I am Ada, I work on the Lovelace engine.'));
    expect(remembered.status).toBe(200);
    await remembered.text();
    const thanked = await handler(post('ada', 'monday', 'Thanks.'));
    expect(thanked.status).toBe(200);
    await thanked.text();
    const first = model.requests.length;
    await (await handler(post('ada', 'friday', 'Which engine was it?'))).text();
    expect(systemOf(model.requests[first]!)).toContain('Remember: I am Ada, I work on the Lovelace engine.');
    const before = model.requests.length;
    await (await handler(post('bob', 'saturday', 'Which engine was it?'))).text();
    const bobs = JSON.stringify(model.requests.slice(before).map((r) => r.messages));
    expect(bobs).not.toContain('Lovelace');
    expect(bobs).not.toContain('Ada');
  });

  it.each<ChatAction>(['read', 'stream', 'post', 'cancel', 'resume'])("another user's chat is not found (%s), and stays as it was", async (action) => {
    const { handler, store } = setup();
    await (await handler(post('ada', 'trip', 'Remember: my passport number is X123.'))).text();
    const stored = await store.load('trip');
    const response = await handler(requestFor(action, 'bob', 'trip'));
    expect(response.status).toBe(404);
    expect(((await response.json()) as { error: { code: string } }).error.code).toBe('ChatNotFound');
    expect(await store.load('trip')).toEqual(stored);
    // Ada still reads her chat.
    const mine = await handler(requestFor('read', 'ada', 'trip'));
    expect(mine.status).toBe(200);
    expect(JSON.stringify(await mine.json())).toContain('X123');
  });

  it('a chat made without a scope is nobody in particular: not found under a scope', async () => {
    const store = new MemorySessionStore();
    const open = setup(null, store);
    await (await open.handler(post('ada', 'old', 'hello'))).text();
    const scoped = setup(byUser, store);
    expect((await scoped.handler(requestFor('read', 'ada', 'old'))).status).toBe(404);
    expect((await scoped.handler(post('ada', 'old', 'hello again'))).status).toBe(404);
  });

  it.each<[string, ChatScopeMapper, string]>([
    ['throws', () => { throw new Error('directory down: secret'); }, 'chatScope failed'],
    ['hangs', () => new Promise<string>(() => {}), 'chatScope did not answer within 50 ms'],
    ['answers an empty scope', () => '', 'chatScope returned no usable scope'],
    ['answers a control character', () => 'user:\u0000', 'chatScope returned no usable scope'],
    ['answers no string', () => 42 as unknown as string, 'chatScope returned no usable scope'],
  ])('a mapper that %s refuses the request with a 403, nothing stored', async (_name, chatScope, message) => {
    const { handler, store } = setup(chatScope);
    const response = await handler(post('ada', 'c', 'hello'));
    expect(response.status).toBe(403);
    const { error } = (await response.json()) as { error: { message: string } };
    expect(error.message).toBe(message);
    expect(await store.list()).toEqual([]);
  });

  it('is checked as an option', () => {
    const store = new MemorySessionStore();
    const machine = createAgentMachine({ model: notingModel() });
    expect(() => createChatHandler({ machine, store, chatScope: 'user' as never })).toThrow(/chatScope must be a function/);
    expect(() => createChatHandler({ machine, store, chatscope: byUser } as never)).toThrow(/chatScope/);
  });
});

/**
 * Who may read which chat: `authorize` is asked before any store read or write, for every action
 * (read, stream, post, cancel, approve), and a deny, a throw, a timeout or an answer of another
 * shape refuse the request with nothing read or stored; `chatKey` scopes chat ids to the caller,
 * so one user never reaches another's session even knowing its id; an approval is checked
 * against the chat it arrives on.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ChatHandlerOptionsError, createChatHandler, type ChatAction, type ChatAuthorizer, type ChatHandler, type ChatKeyMapper } from '../../src/http.js';
import { MemorySessionStore, type SessionStore } from '../../src/index.js';
import { chatAgent } from './fixtures/chat-agent.js';
import { loadSdk, page, userMessage, type UIMessage } from './support.js';

const handlers: ChatHandler[] = [];
afterEach(async () => {
  await Promise.all(handlers.splice(0).map((handler) => handler.close()));
});

/** A real memory store that counts the calls made on it: a refused request must make none. */
function countingStore(): { store: SessionStore; calls: string[]; inner: MemorySessionStore } {
  const inner = new MemorySessionStore();
  const calls: string[] = [];
  const store = new Proxy(inner, {
    get(target, name, receiver) {
      const value = Reflect.get(target, name, receiver);
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        calls.push(String(name));
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  return { store, calls, inner };
}

const ACTIONS: ChatAction[] = ['read', 'stream', 'post', 'cancel', 'approve', 'resume'];

/** A request for `action` on `chatId` as a page sends it, with `headers`. */
function requestFor(action: ChatAction, chatId: string, headers: Record<string, string> = {}, approvalId = `1:${'0'.repeat(64)}:call_1_0`): Request {
  const base = 'http://127.0.0.1/api/chat';
  const json = { 'content-type': 'application/json', ...headers };
  const path = `${base}/${encodeURIComponent(chatId)}`;
  switch (action) {
    case 'read':
      return new Request(`${path}/messages`, { headers });
    case 'stream':
      return new Request(`${path}/stream`, { headers });
    case 'cancel':
      return new Request(`${path}/cancel`, { method: 'POST', headers });
    case 'resume':
      return new Request(`${path}/resume`, { method: 'POST', headers: json, body: JSON.stringify({ operation: 'review', payload: { ok: true } }) });
    case 'post':
      return new Request(base, { method: 'POST', headers: json, body: JSON.stringify({ id: chatId, messages: [userMessage('send 5')] }) });
    case 'approve': {
      const part = { type: 'tool-transfer', toolCallId: 'call_1_0', state: 'approval-responded', input: { amount: 5 }, approval: { id: approvalId, approved: true } };
      const body = { id: chatId, messages: [userMessage('send 5'), { id: 'run-1', role: 'assistant', parts: [part] }] };
      return new Request(base, { method: 'POST', headers: json, body: JSON.stringify(body) });
    }
  }
}

async function refusal(response: Response): Promise<[number, string, string]> {
  expect(response.headers.get('content-type')).toMatch(/^application\/json/);
  const { error } = (await response.json()) as { error: { code: string; message: string } };
  return [response.status, error.code, error.message];
}

describe('authorize', () => {
  const modes: Array<[string, ChatAuthorizer, string]> = [
    ['false', () => false, 'not allowed'],
    ['a throw', () => {
      throw new Error('db down: secret detail');
    }, 'authorize failed'],
    ['a rejection', async () => Promise.reject(new Error('nope')), 'authorize failed'],
    ['a timeout', () => new Promise<boolean>(() => {}), 'authorize did not answer within 50 ms'],
  ];

  it.each(modes)('%s refuses every action with a 403 JSON, before any store read or write', async (_mode, authorize, message) => {
    const { store, calls, inner } = countingStore();
    const asked: Array<{ chatId: string; action: ChatAction }> = [];
    const handler = createChatHandler({
      machine: chatAgent([{ text: 'Hi.' }]).machine,
      store,
      authorizeTimeoutMs: 50,
      authorize: (access) => {
        asked.push({ chatId: access.chatId, action: access.action });
        return authorize(access);
      },
    });
    handlers.push(handler);
    for (const action of ACTIONS) {
      const started = Date.now();
      const [status, code, why] = await refusal(await handler(requestFor(action, 'c-1')));
      expect([status, code], action).toEqual([403, 'Forbidden']);
      expect(why).toBe(message);
      expect(why).not.toContain('secret');
      expect(Date.now() - started).toBeLessThan(2000);
    }
    expect(asked).toEqual(ACTIONS.map((action) => ({ chatId: 'c-1', action })));
    expect(calls).toEqual([]);
    expect(await inner.list()).toEqual([]);
  });

  it('true, { allow: true } and an async true let every action through, with the chat id and action', async () => {
    for (const answer of [true, { allow: true as const }, 'async']) {
      const { store, inner } = countingStore();
      const asked: string[] = [];
      const handler = createChatHandler({
        machine: chatAgent([{ toolCalls: [{ name: 'transfer', args: { amount: 5 } }] }, { text: 'Sent.' }]).machine,
        store,
        authorize: ({ action, chatId, request }) => {
          asked.push(`${action}:${chatId}:${new URL(request.url).pathname}`);
          return answer === 'async' ? Promise.resolve(true) : (answer as true);
        },
      });
      handlers.push(handler);
      const statuses: Record<string, number> = {};
      for (const action of ['read', 'stream', 'cancel'] as const) statuses[action] = (await handler(requestFor(action, 'ok'))).status;
      const chat = page(await loadSdk(6), handler, 'ok');
      const asked1 = await chat.send([userMessage('send 5')]);
      const approvalId = asked1.parts.find((part) => part.state === 'approval-requested')!.approval!.id;
      const approved = await handler(requestFor('approve', 'ok', {}, approvalId));
      expect(approved.status).toBe(200);
      expect(await approved.text()).toContain('"outcome":"Completed"');
      // Unknown chat before the post: the handler read the store only once allowed.
      expect(statuses).toEqual({ read: 404, stream: 404, cancel: 404 });
      expect(asked).toEqual(['read:ok:/api/chat/ok/messages', 'stream:ok:/api/chat/ok/stream', 'cancel:ok:/api/chat/ok/cancel', 'post:ok:/api/chat', 'approve:ok:/api/chat']);
      expect((await inner.list()).map((row) => row.sessionId)).toEqual(['ok']);
    }
  });

  it('may answer 401 or 404 with a reason; an answer of another shape, a getter or thenable that throws, is a 403', async () => {
    const answers: Array<[unknown, number, string]> = [
      [{ allow: false, status: 401, reason: 'sign in first' }, 401, 'Unauthorized'],
      [{ allow: false, status: 404 }, 404, 'ChatNotFound'],
      [{ allow: false }, 403, 'Forbidden'],
      ['yes', 403, 'Forbidden'],
      [1, 403, 'Forbidden'],
      [null, 403, 'Forbidden'],
      [undefined, 403, 'Forbidden'],
      [{}, 403, 'Forbidden'],
      [{ allow: 'true' }, 403, 'Forbidden'],
      [{ allow: true, extra: 1 }, 403, 'Forbidden'],
      [{ allow: false, status: 500 }, 403, 'Forbidden'],
      [{ allow: false, status: 200 }, 403, 'Forbidden'],
      [{ allow: false, reason: 'x'.repeat(2000) }, 403, 'Forbidden'],
      [{ get allow(): boolean { throw new Error('getter'); } }, 403, 'Forbidden'],
      [new Proxy({}, { get: () => { throw new Error('trap'); }, ownKeys: () => { throw new Error('trap'); } }), 403, 'Forbidden'],
      [{ get then(): never { throw new Error('then getter'); } }, 403, 'Forbidden'],
      [{ then: (resolve: (v: unknown) => void) => resolve({ allow: 'maybe' }) }, 403, 'Forbidden'],
    ];
    const { store, calls } = countingStore();
    let next: unknown;
    const handler = createChatHandler({ machine: chatAgent([]).machine, store, authorize: () => next as boolean });
    handlers.push(handler);
    for (const [index, [answer, status, code]] of answers.entries()) {
      next = answer;
      for (const action of ACTIONS) {
        const [got, gotCode, message] = await refusal(await handler(requestFor(action, 'c')));
        expect([got, gotCode], `${action}, answer ${index}`).toEqual([status, code]);
        if (status === 401) expect(message).toBe('sign in first');
      }
    }
    expect(calls).toEqual([]);
  });

  it('a handler option that is no function, or a timeout out of range, is a ChatHandlerOptionsError', () => {
    const base = { machine: chatAgent([]).machine, store: new MemorySessionStore() };
    expect(() => createChatHandler({ ...base, authorize: 'yes' as never })).toThrow(ChatHandlerOptionsError);
    expect(() => createChatHandler({ ...base, chatKey: {} as never })).toThrow(/chatKey must be a function/);
    expect(() => createChatHandler({ ...base, authorizeTimeoutMs: 0 })).toThrow(/authorizeTimeoutMs/);
    expect(() => createChatHandler({ ...base, allowedOrigins: ['https://a.example/path'] })).toThrow(/allowedOrigins/);
    expect(() => createChatHandler({ ...base, allowedOrigins: ['*'] })).toThrow(ChatHandlerOptionsError);
  });
});

describe('chatKey', () => {
  it('a throw, a timeout, or a key that is no session id (or a subagent\'s) refuses with a 403; nothing is read', async () => {
    const keys: Array<[string, ChatKeyMapper]> = [
      ['throws', () => {
        throw new Error('x');
      }],
      ['never', () => new Promise<string>(() => {})],
      ['number', () => 42 as unknown as string],
      ['empty', () => ''],
      ['control', () => 'a\u0000b'],
      ['child', (_request, chatId) => `${chatId}/run-1:turn-1:call_1_0`],
      ['getter', () => ({ get length(): number { throw new Error('g'); } }) as unknown as string],
    ];
    for (const [name, chatKey] of keys) {
      const { store, calls } = countingStore();
      const handler = createChatHandler({ machine: chatAgent([]).machine, store, chatKey, authorizeTimeoutMs: 50 });
      handlers.push(handler);
      for (const action of ACTIONS) expect((await refusal(await handler(requestFor(action, 'c')))).slice(0, 2), `${name} ${action}`).toEqual([403, 'Forbidden']);
      expect(calls, name).toEqual([]);
    }
  });
});

describe('two users', () => {
  /** Bearer tokens name the user; `owners` is the app's own record of who started which chat. */
  function twoUsers(options: { scoped: boolean }) {
    const store = new MemorySessionStore();
    const agent = chatAgent([{ toolCalls: [{ name: 'transfer', args: { amount: 5 } }] }, { text: 'Sent.' }, { toolCalls: [{ name: 'transfer', args: { amount: 7 } }] }, { text: 'Sent.' }]);
    const owners = new Map<string, string>();
    const userOf = (request: Request) => /^Bearer (alice|bob)$/.exec(request.headers.get('authorization') ?? '')?.[1];
    const authorize: ChatAuthorizer = ({ request, chatId, action }) => {
      const user = userOf(request);
      if (!user) return { allow: false, status: 401, reason: 'no valid token' };
      if (options.scoped) return true;
      const owner = owners.get(chatId);
      if (owner === undefined && action === 'post') {
        owners.set(chatId, user);
        return true;
      }
      return owner === user || { allow: false, status: 403, reason: 'not your chat' };
    };
    const chatKey: ChatKeyMapper = (request, chatId) => `${userOf(request)}.${chatId}`;
    const handler = createChatHandler({ machine: agent.machine, store, authorize, ...(options.scoped && { chatKey }) });
    handlers.push(handler);
    const as = (user: string) => (input: string | URL | Request, init?: RequestInit) => {
      const request = new Request(new URL(String(input), 'http://127.0.0.1'), init);
      request.headers.set('authorization', `Bearer ${user}`);
      return handler(request);
    };
    return { store, handler, as, transfers: agent.transfers };
  }

  /** Alice's chat `trip`, waiting for her approval of transfer 5. */
  async function alicesWaitingChat(handler: ChatHandler, as: ReturnType<typeof twoUsers>['as']) {
    const sdk = await loadSdk(6);
    const transport = new sdk.DefaultChatTransport({ api: 'http://127.0.0.1/api/chat', fetch: as('alice') as typeof fetch });
    let message!: UIMessage;
    for await (const m of sdk.readUIMessageStream({ stream: await transport.sendMessages({ chatId: 'trip', messages: [userMessage('send 5')], trigger: 'submit-message', messageId: undefined, abortSignal: undefined }) })) message = m;
    expect(message.metadata?.outcome).toBe('waiting');
    void handler;
    return message.parts.find((part) => part.state === 'approval-requested')!.approval!.id;
  }

  it('by ownership (authorize): bob cannot read, stream, post, cancel or approve alice\'s chat even with its id and approval id', async () => {
    const { store, handler, as, transfers } = twoUsers({ scoped: false });
    const approvalId = await alicesWaitingChat(handler, as);
    const before = await store.load('trip');
    for (const action of ACTIONS) {
      const request = requestFor(action, 'trip', { authorization: 'Bearer bob' }, approvalId);
      expect(await refusal(await handler(request)), action).toEqual([403, 'Forbidden', 'not your chat']);
      const anonymous = requestFor(action, 'trip', {}, approvalId);
      expect((await refusal(await handler(anonymous))).slice(0, 2), action).toEqual([401, 'Unauthorized']);
    }
    expect(await store.load('trip')).toEqual(before);
    expect(transfers).toEqual([]);
    // Alice's own answer runs it.
    const mine = await as('alice')('http://127.0.0.1/api/chat', requestInit(requestFor('approve', 'trip', {}, approvalId)));
    expect(await mine.text()).toContain('"outcome":"Completed"');
    expect(transfers).toEqual(['5']);
  });

  it('by key (chatKey): bob\'s "trip" is his own session; alice\'s stays as it was whatever bob does with its id', async () => {
    const { store, handler, as, transfers } = twoUsers({ scoped: true });
    const approvalId = await alicesWaitingChat(handler, as);
    expect((await store.list()).map((row) => row.sessionId)).toEqual(['alice.trip']);
    const before = await store.load('alice.trip');
    const bob = as('bob');
    // Nothing of bob's is called trip yet: a 404, not alice's chat.
    expect((await refusal(await bob(`http://127.0.0.1/api/chat/trip/messages`))).slice(0, 2)).toEqual([404, 'ChatNotFound']);
    expect((await refusal(await bob(`http://127.0.0.1/api/chat/trip/stream`))).slice(0, 2)).toEqual([404, 'ChatNotFound']);
    expect((await refusal(await bob(`http://127.0.0.1/api/chat/trip/cancel`, { method: 'POST' }))).slice(0, 2)).toEqual([404, 'ChatNotFound']);
    expect((await refusal(await bob('http://127.0.0.1/api/chat', requestInit(requestFor('approve', 'trip', {}, approvalId))))).slice(0, 2)).toEqual([404, 'ChatNotFound']);
    // Bob's message starts bob's own chat (transfer 7 next in the shared script): alice's is untouched.
    const posted = await bob('http://127.0.0.1/api/chat', requestInit(requestFor('post', 'trip')));
    expect(await posted.text()).toContain('"outcome":"waiting"');
    expect((await store.list()).map((row) => row.sessionId).sort()).toEqual(['alice.trip', 'bob.trip']);
    // Alice's approval id sent on bob's chat is checked against bob's chat: another call, refused.
    expect((await refusal(await bob('http://127.0.0.1/api/chat', requestInit(requestFor('approve', 'trip', {}, approvalId))))).slice(0, 2)).toEqual([409, 'ApprovalNotFound']);
    expect(await store.load('alice.trip')).toEqual(before);
    expect(transfers).toEqual([]);
    const messages = (await (await as('alice')('http://127.0.0.1/api/chat/trip/messages')).json()) as { messages: unknown[] };
    expect(messages.messages).toHaveLength(1);
  });

  it("a reload of another user's chat, a child-shaped id, odd characters: GET messages answers as stream, cancel and resume do; the owner reads an odd but valid id", async () => {
    const { store, handler, as } = twoUsers({ scoped: false });
    await alicesWaitingChat(handler, as);
    const odd = 'trip ✈️ /?#%20 \\ "\'<>';
    const owned = await as('alice')('http://127.0.0.1/api/chat', requestInit(requestFor('post', odd)));
    expect(await owned.text()).toContain('"outcome":"waiting"');
    const before = JSON.stringify(await Promise.all((await store.list()).map((row) => store.load(row.sessionId))));
    // Path segments as a client may send them: encoded ids, and raw ones no decoder takes.
    const segments: Array<[string, string, [number, string]]> = [
      ["alice's chat", 'trip', [403, 'Forbidden']],
      ["alice's odd chat", encodeURIComponent(odd), [403, 'Forbidden']],
      ['a child of it', encodeURIComponent('trip/run-1:turn-1:call_1_0'), [404, 'ChatNotFound']],
      ['a child whose call id holds a slash', encodeURIComponent('trip/run-1:turn-1:a/b'), [404, 'ChatNotFound']],
      ['a control character', '%00trip', [400, 'InvalidChatRequest']],
      ['a bidirectional control', '%E2%80%AEtrip', [400, 'InvalidChatRequest']],
      ['a lone surrogate', 'trip%ED%A0%80', [400, 'InvalidChatRequest']],
      ['bad percent-encoding', 'trip%ZZ', [400, 'InvalidChatRequest']],
      ['too long', 'x'.repeat(257), [400, 'InvalidChatRequest']],
      // The URL parser takes `%2E%2E` for `..`: the path then names the chat `chat`, which bob may not read either.
      ['a dot segment', '%2E%2E', [403, 'Forbidden']],
    ];
    const routes: Array<[string, string, RequestInit]> = [
      ['read', 'messages', {}],
      ['stream', 'stream', {}],
      ['cancel', 'cancel', { method: 'POST' }],
      ['resume', 'resume', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ operation: 'review', payload: {} }) }],
    ];
    for (const [what, segment, expected] of segments) {
      for (const [action, suffix, init] of routes) {
        const response = await as('bob')(`http://127.0.0.1/api/chat/${segment}/${suffix}`, init);
        expect((await refusal(response)).slice(0, 2), `${what}, ${action}`).toEqual(expected);
      }
    }
    expect(JSON.stringify(await Promise.all((await store.list()).map((row) => store.load(row.sessionId))))).toBe(before);
    // The owner reads it: the id round-trips through the path.
    const mine = await as('alice')(`http://127.0.0.1/api/chat/${encodeURIComponent(odd)}/messages`);
    expect(mine.status).toBe(200);
    expect(((await mine.json()) as { messages: Array<{ role: string }> }).messages.map((m) => m.role)).toEqual(['user']);
  });
});

describe('approvals are bound to their chat', () => {
  it('the approval id of another chat (the same call, arguments and run) is a 409 there; nothing runs; each chat\'s own runs its own', async () => {
    const { store } = countingStore();
    const agent = chatAgent([{ toolCalls: [{ name: 'transfer', args: { amount: 5 } }] }, { text: 'Sent.' }]);
    const handler = createChatHandler({ machine: agent.machine, store });
    handlers.push(handler);
    const sdk = await loadSdk(6);
    const idOf = async (chatId: string) => {
      const asked = await page(sdk, handler, chatId).send([userMessage('send 5')]);
      expect(asked.metadata?.outcome).toBe('waiting');
      return asked.parts.find((part) => part.state === 'approval-requested')!.approval!.id;
    };
    const [a, b] = [await idOf('chat-a'), await idOf('chat-b')];
    expect(a).not.toBe(b);
    const before = await store.load('chat-a');
    expect((await refusal(await handler(requestFor('approve', 'chat-a', {}, b)))).slice(0, 2)).toEqual([409, 'ApprovalNotFound']);
    expect(await store.load('chat-a')).toEqual(before);
    expect(agent.transfers).toEqual([]);
    expect(await (await handler(requestFor('approve', 'chat-a', {}, a))).text()).toContain('"outcome":"Completed"');
    expect(await (await handler(requestFor('approve', 'chat-b', {}, b))).text()).toContain('"outcome":"Completed"');
    expect(agent.transfers).toEqual(['5', '5']);
  });
});

/** A Request's init, to send it again through another fetch. */
function requestInit(request: Request): RequestInit {
  return { method: request.method, headers: Object.fromEntries(request.headers), body: request.body, duplex: 'half' } as RequestInit;
}

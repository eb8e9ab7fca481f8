/**
 * No cross-site starts, no reach into a subagent, no bad input that gets through: a POST that is
 * not `application/json` is a 415, a POST from another origin a 403 on every POST route; a
 * subagent's session id is no chat (404 on every route, its stored session unchanged); bad path
 * segments, headers, bodies and approval answers are 4xx JSON errors that store nothing.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createChatHandler, type ChatHandler } from '../../src/http.js';
import { z } from 'zod';
import { agentTool, createAgentMachine, defineTool, MemorySessionStore } from '../../src/index.js';
import { scriptedModel } from '../../src/testing.js';
import { chatAgent } from './fixtures/chat-agent.js';
import { teamAgent } from './fixtures/team-agent.js';
import { loadSdk, page, userMessage } from './support.js';

const handlers: ChatHandler[] = [];
afterEach(async () => {
  await Promise.all(handlers.splice(0).map((handler) => handler.close()));
});

function setup(options: Partial<Parameters<typeof createChatHandler>[0]> = {}) {
  const store = new MemorySessionStore();
  const agent = chatAgent([{ toolCalls: [{ name: 'transfer', args: { amount: 5 } }] }, { text: 'Sent.' }]);
  const handler = createChatHandler({ machine: agent.machine, store, ...options });
  handlers.push(handler);
  return { store, handler, transfers: agent.transfers };
}

const body = (id: string) => JSON.stringify({ id, messages: [userMessage('send 5')] });
const post = (headers: Record<string, string>, payload = body('c'), path = '') =>
  new Request(`http://127.0.0.1/api/chat${path}`, { method: 'POST', headers, body: payload });

async function refusal(response: Response): Promise<[number, string]> {
  expect(response.headers.get('content-type')).toMatch(/^application\/json/);
  return [response.status, ((await response.json()) as { error: { code: string } }).error.code];
}

const sessionIds = async (store: MemorySessionStore) => (await store.list()).map((row) => row.sessionId).sort();

describe('content type', () => {
  it('a chat POST that is not application/json is a 415 and starts nothing (a text/plain body was a run before)', async () => {
    const { handler, store } = setup();
    for (const type of ['text/plain', 'text/plain;charset=UTF-8', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/json; charset=latin1', 'application/jsonx', 'application/vnd.api+json']) {
      expect(await refusal(await handler(post({ 'content-type': type }))), type).toEqual([415, 'UnsupportedMediaType']);
    }
    expect(await refusal(await handler(new Request('http://127.0.0.1/api/chat', { method: 'POST', body: new Blob([body('c')]) })))).toEqual([415, 'UnsupportedMediaType']);
    // A cancel carries no body: no type passes, a form's type does not.
    expect(await refusal(await handler(post({ 'content-type': 'text/plain' }, '', '/c/cancel')))).toEqual([415, 'UnsupportedMediaType']);
    expect(await sessionIds(store)).toEqual([]);
    for (const type of ['application/json', 'Application/JSON; charset=utf-8', 'application/json;charset="UTF-8"']) {
      const response = await handler(post({ 'content-type': type }, body(`ok-${type.length}`)));
      expect(response.status, type).toBe(200);
      await response.text();
    }
  });
});

describe('origin', () => {
  it('a POST from another origin is a 403 on every POST route; the own host, an allowed origin and no Origin pass', async () => {
    const { handler, store, transfers } = setup({ allowedOrigins: ['https://app.example.com'] });
    const asked = await page(await loadSdk(6), handler, 'c').send([userMessage('send 5')]);
    const approvalId = asked.parts.find((part) => part.state === 'approval-requested')!.approval!.id;
    const before = await store.load('c');
    const approve = JSON.stringify({ id: 'c', messages: [userMessage('send 5'), { id: 'run-1', role: 'assistant', parts: [{ type: 'tool-transfer', toolCallId: 'call_1_0', state: 'approval-responded', approval: { id: approvalId, approved: true } }] }] });
    const routes = [
      (origin: Record<string, string>) => post({ 'content-type': 'application/json', host: 'chat.example.com', ...origin }, body('other')),
      (origin: Record<string, string>) => post({ 'content-type': 'application/json', host: 'chat.example.com', ...origin }, approve),
      (origin: Record<string, string>) => post({ host: 'chat.example.com', ...origin }, '', '/c/cancel'),
    ];
    for (const origin of ['https://evil.example', 'null', 'https://chat.example.com.evil.example', 'http://chat.example.com:8080', 'not a url', 'file://chat.example.com']) {
      for (const [i, route] of routes.entries()) expect(await refusal(await handler(route({ origin }))), `${origin} ${i}`).toEqual([403, 'CrossSiteRequest']);
    }
    expect(await store.load('c')).toEqual(before);
    expect(await sessionIds(store)).toEqual(['c']);
    expect(transfers).toEqual([]);
    // Reads are not refused: a foreign page cannot read the answer without CORS, which the handler never sends.
    expect((await handler(new Request('http://127.0.0.1/api/chat/c/messages', { headers: { origin: 'https://evil.example' } }))).status).toBe(200);
    // The page's own host, an allowed origin, and a client that sends no Origin.
    const own = await handler(routes[0]!({ origin: 'https://chat.example.com' }));
    expect(own.status).toBe(200);
    await own.text();
    const allowed = await handler(post({ 'content-type': 'application/json', origin: 'https://app.example.com' }, body('allowed')));
    expect(allowed.status).toBe(200);
    await allowed.text();
    const approved = await handler(post({ 'content-type': 'application/json' }, approve));
    expect(await approved.text()).toContain('"outcome":"Completed"');
    expect(transfers).toEqual(['5']);
  });
});

describe('a subagent\'s session is no chat', () => {
  it('POST, read, stream, cancel and approve on a child session id are 404s; its stored session is unchanged', async () => {
    const store = new MemorySessionStore();
    const team = teamAgent(2);
    const handler = createChatHandler({ machine: team.machine, store });
    handlers.push(handler);
    const asked = await page(await loadSdk(6), handler, 'team').send([userMessage('Send 5 through research.')]);
    expect(asked.metadata?.outcome).toBe('waiting');
    const child = (await sessionIds(store)).find((id) => id !== 'team')!;
    expect(child).toMatch(/^team\/run-1:turn-1:/);
    const stored = await store.load(child);
    const json = { 'content-type': 'application/json' };
    const path = `http://127.0.0.1/api/chat/${encodeURIComponent(child)}`;
    const requests = [
      new Request('http://127.0.0.1/api/chat', { method: 'POST', headers: json, body: body(child) }),
      new Request('http://127.0.0.1/api/chat', { method: 'POST', headers: json, body: JSON.stringify({ id: child, messages: [userMessage('x'), { id: 'a', role: 'assistant', parts: [{ type: 'tool-transfer', toolCallId: 'call_1_0', state: 'approval-responded', approval: { id: asked.parts.find((p) => p.state === 'approval-requested')!.approval!.id, approved: true } }] }] }) }),
      new Request(`${path}/messages`),
      new Request(`${path}/stream`),
      new Request(`${path}/cancel`, { method: 'POST' }),
    ];
    for (const request of requests) expect(await refusal(await handler(request)), `${request.method} ${request.url}`).toEqual([404, 'ChatNotFound']);
    expect(await store.load(child)).toEqual(stored);
    expect(team.transfers).toEqual([]);
  });
});

describe("a subagent's session is no chat, whatever its call id holds", () => {
  it('a child of a call whose id holds a slash (a model names its calls): every route is a 404, nothing of it is read or run', async () => {
    const store = new MemorySessionStore();
    const transfers: number[] = [];
    const transfer = defineTool({ name: 'transfer', description: 'Moves money (asks first).', input: z.object({ amount: z.number() }), needsApproval: true, execute: ({ amount }) => (transfers.push(amount), `sent ${amount}`) });
    const worker = createAgentMachine({ model: scriptedModel([{ toolCalls: [{ name: 'transfer', args: { amount: 5 } }] }, { text: 'Sent.' }]), tools: [transfer] });
    const machine = createAgentMachine({
      model: scriptedModel([{ toolCalls: [{ id: 'a/b', name: 'research', args: { task: 'send 5' } }] }, { text: 'Done.' }]),
      tools: [agentTool({ agent: worker, name: 'research', description: 'Researches.' })],
    });
    const handler = createChatHandler({ machine, store });
    handlers.push(handler);
    const asked = await page(await loadSdk(6), handler, 'team').send([userMessage('Send 5 through research.')]);
    expect(asked.metadata?.outcome).toBe('waiting');
    const child = 'team/run-1:turn-1:a/b';
    expect(await sessionIds(store)).toEqual(['team', child]);
    const stored = await store.load(child);
    const json = { 'content-type': 'application/json' };
    const path = `http://127.0.0.1/api/chat/${encodeURIComponent(child)}`;
    const requests = [
      new Request('http://127.0.0.1/api/chat', { method: 'POST', headers: json, body: body(child) }),
      new Request(`${path}/messages`),
      new Request(`${path}/stream`),
      new Request(`${path}/cancel`, { method: 'POST' }),
      new Request(`${path}/resume`, { method: 'POST', headers: json, body: JSON.stringify({ operation: 'review', payload: {} }) }),
    ];
    for (const request of requests) expect(await refusal(await handler(request)), `${request.method} ${request.url}`).toEqual([404, 'ChatNotFound']);
    expect(await store.load(child)).toEqual(stored);
    expect(transfers).toEqual([]);
  });
});

describe('bad input', () => {
  it('bad path segments are 4xx JSON errors and store nothing', async () => {
    const { handler, store } = setup();
    const cases: Array<[string, string, number, string]> = [
      ['GET', '/api/chat//messages', 400, 'InvalidChatRequest'],
      ['GET', '/messages', 400, 'InvalidChatRequest'],
      ['GET', '/api/chat/%ZZ/messages', 400, 'InvalidChatRequest'],
      ['GET', '/api/chat/%E0%A4%A/stream', 400, 'InvalidChatRequest'],
      ['GET', '/api/chat/a%00b/messages', 400, 'InvalidChatRequest'],
      ['GET', '/api/chat/%0a/messages', 400, 'InvalidChatRequest'],
      ['GET', '/api/chat/%ED%A0%80/messages', 400, 'InvalidChatRequest'],
      ['GET', `/api/chat/${'x'.repeat(300)}/messages`, 400, 'InvalidChatRequest'],
      ['POST', `/api/chat/${'x'.repeat(300)}/cancel`, 400, 'InvalidChatRequest'],
      ['GET', '/api/chat/c/messages/', 405, 'MethodNotAllowed'],
      ['GET', '/api/chat', 405, 'MethodNotAllowed'],
      ['PUT', '/api/chat/c/messages', 405, 'MethodNotAllowed'],
      ['DELETE', '/api/chat', 405, 'MethodNotAllowed'],
      ['POST', '/api/chat/c/stream', 405, 'MethodNotAllowed'],
      ['GET', '/api/chat/c/cancel', 405, 'MethodNotAllowed'],
      ['GET', '/api/chat/x/../nobody/messages', 404, 'ChatNotFound'],
      ['GET', '/api/chat/team%2Frun-1%3Aturn-1%3Acall_1_0/messages', 404, 'ChatNotFound'],
    ];
    for (const [method, path, status, code] of cases) {
      const response = await handler(new Request(`http://127.0.0.1${path}`, { method }));
      expect(await refusal(response), `${method} ${path.slice(0, 60)}`).toEqual([status, code]);
      if (status === 405) expect(response.headers.get('allow')).toMatch(/^(GET|POST)$/);
    }
    expect(await sessionIds(store)).toEqual([]);
  });

  it('bad bodies, chat ids and approval answers are 4xx JSON errors; the chat keeps working, nothing stored changes', async () => {
    const { handler, store, transfers } = setup();
    const asked = await page(await loadSdk(6), handler, 'c').send([userMessage('send 5')]);
    const approvalId = asked.parts.find((part) => part.state === 'approval-requested')!.approval!.id;
    const before = await store.load('c');
    const answering = (approval: unknown) => ({ id: 'c', messages: [userMessage('send 5'), { id: 'run-1', role: 'assistant', parts: [{ type: 'tool-transfer', toolCallId: 'call_1_0', state: 'approval-responded', approval }] }] });
    const cases: Array<[unknown, number, string]> = [
      ['', 400, 'InvalidChatRequest'],
      ['{', 400, 'InvalidChatRequest'],
      ['null', 400, 'InvalidChatRequest'],
      ['[]', 400, 'InvalidChatRequest'],
      [{ id: '.', messages: [userMessage('hi')] }, 400, 'InvalidChatRequest'],
      [{ id: '..', messages: [userMessage('hi')] }, 400, 'InvalidChatRequest'],
      [{ id: 42, messages: [userMessage('hi')] }, 400, 'InvalidChatRequest'],
      [{ id: '\ud800', messages: [userMessage('hi')] }, 400, 'InvalidChatRequest'],
      [answering({ id: 'garbage', approved: true }), 409, 'ApprovalNotFound'],
      [answering({ id: approvalId.replace(/:[0-9a-f]{64}:/, `:${'f'.repeat(64)}:`), approved: true }), 409, 'ApprovalNotFound'],
      [answering({ id: approvalId.replace(/^1:/, '2:'), approved: true }), 409, 'ApprovalNotFound'],
      [answering({ id: approvalId, approved: 'yes' }), 400, 'InvalidChatRequest'],
      [{ ...answering({ id: approvalId, approved: true }), approvals: [{ approvalId, approved: true }] }, 409, 'ApprovalNotFound'],
      [{ id: 'c', messages: [userMessage('x')], approvals: [{ approvalId, approved: true, extra: 1 }] }, 400, 'InvalidChatRequest'],
    ];
    for (const [index, [payload, status, code]] of cases.entries()) {
      const text = typeof payload === 'string' ? payload : JSON.stringify(payload);
      expect(await refusal(await handler(post({ 'content-type': 'application/json' }, text))), `case ${index}`).toEqual([status, code]);
    }
    expect(await store.load('c')).toEqual(before);
    expect(await sessionIds(store)).toEqual(['c']);
    expect(transfers).toEqual([]);
    // The chat was not broken by any of it: its own answer runs the call.
    const approved = await handler(post({ 'content-type': 'application/json' }, JSON.stringify(answering({ id: approvalId, approved: true }))));
    expect(await approved.text()).toContain('"outcome":"Completed"');
    expect(transfers).toEqual(['5']);
  });
});

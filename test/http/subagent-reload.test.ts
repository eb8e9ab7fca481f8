/**
 * A page that reloads shows a subagent's steps as the live stream showed them: the child's tool
 * calls (under `<call>/<child call>`), their states and outputs, its approval waiting or answered,
 * a grandchild's the same way, read back from the child sessions on a real SQLite file, by a
 * handler on another connection (a process that never held the chat). Compared part for part with
 * the message each AI SDK version's own readUIMessageStream built from the live stream: the
 * reattached run in flight (`GET <api>/<id>/stream`) and the stored conversation
 * (`GET <api>/<id>/messages`). A child the store cannot give is a marker part, not a failure;
 * what a reload reads of the children is bounded; a chat reads only its own children.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createChatHandler, type ChatHandler } from '../../src/http.js';
import { agentTool, createAgentMachine, defineTool, type SessionStore } from '../../src/index.js';
import { MAX_CHILD_SESSIONS, MAX_CHILD_TRACE_ENTRIES } from '../../src/http/stored-subagents.js';
import { SqliteSessionStore } from '../../src/stores/sqlite.js';
import { scriptedModel } from '../../src/testing.js';
import { loadSdk, nodeMajor, page, userMessage, type UIMessage, answered, plainParts, reloadMessages } from './support.js';

const root = mkdtempSync(join(tmpdir(), 'loopchart-subagent-reload-'));
let files = 0;
const handlers: ChatHandler[] = [];
const stores: SessionStore[] = [];
afterEach(async () => {
  await Promise.all(handlers.splice(0).map((handler) => handler.close()));
  await Promise.all(stores.splice(0).map((store) => store.close()));
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** A SQLite file, and a connection to it. */
function sqlite(path = join(root, `chats-${files++}.db`)) {
  const store = new SqliteSessionStore({ path });
  stores.push(store);
  return { path, store };
}

/**
 * A coordinator whose `research` tool runs a worker: the worker looks a name up, then calls
 * `transfer` (asks first). At depth 3 research runs a middle agent that looks up and calls `dig`,
 * which runs the worker.
 */
function team(depth: 2 | 3 = 2) {
  const transfers: number[] = [];
  const lookup = defineTool({ name: 'lookup', description: 'Finds a person.', input: z.object({ who: z.string() }), execute: ({ who }) => `found ${who}` });
  const transfer = defineTool({
    name: 'transfer',
    description: 'Moves money (asks first).',
    input: z.object({ amount: z.number() }),
    needsApproval: true,
    execute: ({ amount }) => (transfers.push(amount), `sent ${amount}`),
  });
  const worker = createAgentMachine({
    model: scriptedModel([{ text: 'Looking Ana up.', toolCalls: [{ name: 'lookup', args: { who: 'ana' } }] }, { text: 'Sending.', toolCalls: [{ name: 'transfer', args: { amount: 5 } }] }, { text: 'Worker done.' }]),
    tools: [lookup, transfer],
  });
  const middle =
    depth === 2
      ? worker
      : createAgentMachine({
          model: scriptedModel([{ text: 'Middle checks.', toolCalls: [{ name: 'lookup', args: { who: 'bo' } }, { name: 'dig', args: { task: 'send 5' } }] }, { text: 'Middle done.' }]),
          tools: [lookup, agentTool({ agent: worker, name: 'dig', description: 'Digs deeper.' })],
        });
  const machine = createAgentMachine({
    model: scriptedModel([{ text: 'Asking research.', toolCalls: [{ name: 'research', args: { task: 'send 5' } }] }, { text: 'All done.' }]),
    tools: [agentTool({ agent: middle, name: 'research', description: 'Researches.' })],
  });
  return { machine, transfers };
}

function handlerOn(store: SessionStore, machine: ReturnType<typeof team>['machine'], version: 5 | 6 | 7, onError?: (error: unknown) => void) {
  const handler = createChatHandler({ machine, store, aiSdk: version, ...(onError && { onError }) });
  handlers.push(handler);
  return handler;
}

const within = <T>(promise: Promise<T>, ms = 10_000): Promise<T> =>
  Promise.race([promise, new Promise<T>((_, reject) => setTimeout(() => reject(new Error(`not settled within ${ms} ms`)), ms))]);

const user = userMessage('Send 5 to Ana through research.');

describe.each([5, 6, 7] as const)('AI SDK %s, on SQLite, read by a handler on another connection', (version) => {
  const skip = version === 7 && nodeMajor < 22;
  const deep = (depth: 2 | 3) => (depth === 2 ? 'call_1_0/call_2_0' : 'call_1_0/call_1_1/call_2_0');

  it.skipIf(skip).each([2, 3] as const)('depth %s: the run in flight reattached shows what the live stream showed, the child\'s waiting approval included', async (depth) => {
    const sdk = await loadSdk(version);
    const { path, store } = sqlite();
    const { machine } = team(depth);
    const live = await within(page(sdk, handlerOn(store, machine, version), `wait-${depth}`).send([user]));
    expect(live.metadata?.outcome).toBe('waiting');
    // The child's call that ran before the one that waits: shown live.
    expect(live.parts.find((p) => p.toolCallId === (depth === 2 ? 'call_1_0/call_1_0' : 'call_1_0/call_1_1/call_1_0'))).toMatchObject({ type: 'tool-lookup', state: 'output-available', output: 'found ana' });
    const other = handlerOn(sqlite(path).store, machine, version);
    const reattached = page(sdk, other, `wait-${depth}`);
    const replay = (await within(reattached.resume()))!;
    expect(reattached.errors).toEqual([]);
    expect(plainParts(replay.parts)).toEqual(plainParts(live.parts));
    expect(replay.metadata?.outcome).toBe('waiting');
    if (version !== 5) expect(replay.parts.find((p) => p.toolCallId === deep(depth))).toMatchObject({ type: 'tool-transfer', state: 'approval-requested' });
    // Mid-run, the stored conversation shows the run's user message; its reply is the stream's.
    expect((await reloadMessages(other, `wait-${depth}`)).map((m) => m.role)).toEqual(['user']);
  });

  it.skipIf(skip).each([
    [2, true],
    [2, false],
    [3, true],
  ] as const)('depth %s, approved %s: after the run, the stored conversation shows the message the live page ended with', async (depth, approved) => {
    const sdk = await loadSdk(version);
    const { path, store } = sqlite();
    const { machine, transfers } = team(depth);
    const chatId = `done-${depth}-${approved}`;
    const handler = handlerOn(store, machine, version);
    const chat = page(sdk, handler, chatId);
    const asked = await within(chat.send([user]));
    const reason = approved ? undefined : 'Not today.';
    let live: UIMessage;
    if (version === 5) {
      // AI SDK 5 has no approval chunk: the request is a data part, answered beside the messages.
      const approvalId = String(asked.parts.find((p) => p.type === 'data-approval-request')!.data!.approvalId);
      const fetch = ((input: string, init?: RequestInit) => handler(new Request(input, init))) as typeof globalThis.fetch;
      const transport = new sdk.DefaultChatTransport({ api: 'http://127.0.0.1/api/chat', fetch, body: { approvals: [{ approvalId, approved, ...(reason !== undefined && { reason }) }] } });
      live = await within(chat.read(await transport.sendMessages({ chatId, messages: [user, asked], trigger: 'submit-message', messageId: undefined, abortSignal: undefined }), asked));
    } else {
      const answer = answered(asked, approved, reason);
      live = await within(chat.send([user, answer], answer));
    }
    expect(chat.errors).toEqual([]);
    expect(live.metadata?.outcome).toBe('Completed');
    expect(transfers).toEqual(approved ? [5] : []);
    const denied = version === 5 ? { state: 'output-error', errorText: 'denied: Not today.' } : { state: 'output-denied', approval: { approved: false, reason: 'Not today.' } };
    expect(live.parts.find((p) => p.toolCallId === deep(depth))).toMatchObject(approved ? { state: 'output-available', output: 'sent 5' } : denied);
    if (version === 5) expect(live.parts.some((p) => p.type === 'data-approval-request' && (p.data as { toolCallId: string }).toolCallId === deep(depth))).toBe(true);
    const messages = await reloadMessages(handlerOn(sqlite(path).store, machine, version), `done-${depth}-${approved}`);
    expect(messages.map((m) => m.role)).toEqual(['user', 'assistant']);
    expect(plainParts(messages[1]!.parts)).toEqual(plainParts(live.parts));
    await expect(sdk.validateUIMessages({ messages })).resolves.toBeDefined();
  });
});

/** Runs the team to its child's approval, then lets `change` alter the stored child; the reload of a fresh handler. */
async function brokenChild(change: (db: { prepare(sql: string): { run(...args: unknown[]): unknown } }, child: string) => void) {
  const sdk = await loadSdk(6);
  const { path, store } = sqlite();
  const { machine } = team();
  const chat = page(sdk, handlerOn(store, machine, 6), 'broken');
  const asked = await within(chat.send([user]));
  const live = await within(chat.send([user, answered(asked, true)], answered(asked, true)));
  const { default: Database } = await import('better-sqlite3');
  const db = new Database(path);
  change(db, 'broken/run-1:turn-1:call_1_0');
  db.close();
  const errors: unknown[] = [];
  const messages = await reloadMessages(handlerOn(sqlite(path).store, machine, 6, (error) => errors.push(error)), 'broken');
  await expect(sdk.validateUIMessages({ messages })).resolves.toBeDefined();
  return { live, parts: messages[1]!.parts, errors };
}

describe('a child session the store cannot give', () => {
  const ofParent = (parts: UIMessage['parts']) => plainParts(parts.filter((p) => p.type.startsWith('tool-') && !p.toolCallId!.includes('/')));

  it('its row missing: the parent\'s page, with a marker under the call that ran it', async () => {
    const { live, parts, errors } = await brokenChild((db, child) => {
      db.prepare('DELETE FROM messages WHERE session_id = ?').run(child);
      db.prepare('DELETE FROM sessions WHERE session_id = ?').run(child);
    });
    expect(ofParent(parts)).toEqual(ofParent(live.parts));
    expect(parts.some((p) => p.toolCallId?.includes('/'))).toBe(false);
    expect(parts.find((p) => p.type === 'data-subagent-incomplete')).toEqual({
      type: 'data-subagent-incomplete',
      id: 'subagent-call_1_0',
      data: { toolCallId: 'call_1_0', reason: 'missing', message: "not shown: the subagent's session is not in the store" },
    });
    // Right after the call that ran it, where its steps would be.
    expect(parts.findIndex((p) => p.type === 'data-subagent-incomplete')).toBe(parts.findIndex((p) => p.toolCallId === 'call_1_0') + 1);
    expect(errors).toEqual([]);
  });

  it('its row unreadable: the same, and the error goes to onError', async () => {
    const { live, parts, errors } = await brokenChild((db, child) => db.prepare('UPDATE sessions SET state = ? WHERE session_id = ?').run('{"rowVersion":99}', child));
    expect(ofParent(parts)).toEqual(ofParent(live.parts));
    expect(parts.find((p) => p.type === 'data-subagent-incomplete')!.data).toMatchObject({ toolCallId: 'call_1_0', reason: 'unreadable' });
    expect(errors).toHaveLength(1);
    expect(String((errors[0] as Error).message)).toContain('unknown state row version 99');
  });
});

/** The store as the handler reads it, with each session load and trace read counted (the reads themselves are SQLite's). */
function counted(store: SessionStore) {
  const loads: string[] = [];
  const traces: Array<{ sessionId: string; limit: number | undefined; read: number }> = [];
  const spy: SessionStore = {
    load: (sessionId) => (loads.push(sessionId), store.load(sessionId)),
    apply: (sessionId, write) => store.apply(sessionId, write),
    list: () => store.list(),
    journalToolResult: (sessionId, turnKey, result) => store.journalToolResult(sessionId, turnKey, result),
    journaledToolResults: (sessionId, turnKey) => store.journaledToolResults(sessionId, turnKey),
    appendTrace: (sessionId, entries) => store.appendTrace!(sessionId, entries),
    readTrace: async (sessionId, afterSeq, limit) => {
      const records = await store.readTrace!(sessionId, afterSeq, limit);
      traces.push({ sessionId, limit, read: records.length });
      return records;
    },
    close: () => store.close(),
  };
  return { spy, loads, traces };
}

describe('what a reload reads of the children is bounded', () => {
  it(`a child's trace: its first ${MAX_CHILD_TRACE_ENTRIES} entries, however long; what lies past them is marked`, async () => {
    const sdk = await loadSdk(6);
    const { path, store } = sqlite();
    const { machine } = team();
    const chat = page(sdk, handlerOn(store, machine, 6), 'long');
    const asked = await within(chat.send([user]));
    // The child's trace grows long while it waits (a chatty tool, a long run): 10,000 entries before the page's denial.
    const child = 'long/run-1:turn-1:call_1_0';
    await store.appendTrace(child, Array.from({ length: 10_000 }, (_, n) => ({ type: 'note', n, text: 'x'.repeat(100) })));
    const live = await within(chat.send([user, answered(asked, false)], answered(asked, false)));
    expect(live.parts.find((p) => p.toolCallId === 'call_1_0/call_2_0')!.state).toBe('output-denied');
    const { spy, traces } = counted(sqlite(path).store);
    const messages = await reloadMessages(handlerOn(spy, machine, 6), 'long');
    expect(traces.find((t) => t.sessionId === child)).toEqual({ sessionId: child, limit: MAX_CHILD_TRACE_ENTRIES + 1, read: MAX_CHILD_TRACE_ENTRIES + 1 });
    const parts = messages[1]!.parts;
    // Its calls show; the denial, recorded past the bound, shows as the error the model read; a marker says so.
    expect(parts.find((p) => p.toolCallId === 'call_1_0/call_1_0')).toMatchObject({ state: 'output-available', output: 'found ana' });
    expect(parts.find((p) => p.toolCallId === 'call_1_0/call_2_0')).toMatchObject({ state: 'output-error', errorText: 'denied: the user did not approve this tool call' });
    // After the child's parts, where a page reads what is missing of them.
    const marker = parts.findIndex((p) => p.type === 'data-subagent-incomplete');
    expect(parts[marker]).toMatchObject({ data: { toolCallId: 'call_1_0', reason: 'bound' } });
    expect(marker).toBe(parts.findIndex((p) => p.toolCallId === 'call_1_0/call_2_0') + 1);
    await expect(sdk.validateUIMessages({ messages })).resolves.toBeDefined();
  });

  it(`the children: at most ${MAX_CHILD_SESSIONS} sessions per request, the others marked`, async () => {
    const calls = MAX_CHILD_SESSIONS + 2;
    const helper = createAgentMachine({ model: { name: 'helper', generate: async () => ({ message: { role: 'assistant', content: 'Helped.' }, finishReason: 'stop' }) } });
    const machine = createAgentMachine({
      model: scriptedModel([{ toolCalls: Array.from({ length: calls }, (_, n) => ({ name: 'help', args: { task: `task ${n}` } })) }, { text: 'Done.' }]),
      tools: [agentTool({ agent: helper, name: 'help', description: 'Helps.' })],
    });
    const { path, store } = sqlite();
    const live = await within(page(await loadSdk(6), handlerOn(store, machine, 6), 'many').send([userMessage('Go.')]), 20_000);
    expect(live.metadata?.outcome).toBe('Completed');
    const { spy, loads } = counted(sqlite(path).store);
    const parts = (await reloadMessages(handlerOn(spy, machine, 6), 'many'))[1]!.parts;
    expect(loads.filter((id) => id.startsWith('many/'))).toHaveLength(MAX_CHILD_SESSIONS);
    const marked = parts.filter((p) => p.type === 'data-subagent-incomplete');
    expect(marked.map((p) => (p.data as { toolCallId: string; reason: string }).reason)).toEqual(['bound', 'bound']);
    expect(marked.map((p) => (p.data as { toolCallId: string }).toolCallId)).toEqual([`call_1_${calls - 2}`, `call_1_${calls - 1}`]);
  });
});

describe('a chat reads only its own children', () => {
  it("a trace entry naming another user's child is not followed; a child of another scope is not shown", async () => {
    const sdk = await loadSdk(6);
    const { path, store } = sqlite();
    const { machine } = team();
    const byUser = (request: Request) => request.headers.get('x-user') ?? 'nobody';
    const handler = createChatHandler({ machine, store, chatKey: (request, chatId) => `${byUser(request)}.${chatId}`, chatScope: (request) => `user:${byUser(request)}` });
    handlers.push(handler);
    const as = (who: string): ChatHandler => Object.assign((request: Request) => {
      const headers = new Headers(request.headers);
      headers.set('x-user', who);
      return handler(new Request(request, { headers }));
    }, { stats: handler.stats, close: handler.close });
    const chat = page(sdk, as('alice'), 'c');
    const asked = await within(chat.send([user]));
    await within(chat.send([user, answered(asked, true)], answered(asked, true)));
    const alicesChild = 'alice.c/run-1:turn-1:call_1_0';
    expect(await store.load(alicesChild)).toBeDefined();

    // Bob's chat 'c' calls a plain tool with the same id, and its trace names Alice's child for it.
    const lookup = defineTool({ name: 'research', description: 'Not an agent.', input: z.object({ task: z.string() }), execute: () => 'Worker done.' });
    const plainMachine = createAgentMachine({ model: scriptedModel([{ toolCalls: [{ name: 'research', args: { task: 'send 5' } }] }, { text: 'All done.' }]), tools: [lookup] });
    const { spy, loads, traces } = counted(sqlite(path).store);
    const bobs = createChatHandler({ machine: plainMachine, store: spy, chatKey: (request, chatId) => `${byUser(request)}.${chatId}`, chatScope: (request) => `user:${byUser(request)}` });
    handlers.push(bobs);
    const post = (body: unknown) => bobs(new Request('http://127.0.0.1/api/chat', { method: 'POST', headers: { 'content-type': 'application/json', 'x-user': 'bob' }, body: JSON.stringify(body) }));
    await (await post({ id: 'c', messages: [user] })).text();
    const call = { id: 'call_1_0', name: 'research', args: { task: 'send 5' } };
    await store.appendTrace('bob.c', [{ type: 'tool', at: 0, ms: 0, run: 1, turn: 1, key: 'bob.c:run-1:turn-1:tools:call_1_0', call, child: alicesChild }]);
    loads.length = 0;
    traces.length = 0;
    const response = await bobs(new Request('http://127.0.0.1/api/chat/c/messages', { headers: { 'x-user': 'bob' } }));
    const parts = ((await response.json()) as { messages: UIMessage[] }).messages[1]!.parts;
    expect([...loads, ...traces.map((t) => t.sessionId)].filter((id) => !id.startsWith('bob.'))).toEqual([]);
    expect(parts.some((p) => p.toolCallId?.includes('/') || p.type === 'data-subagent-incomplete')).toBe(false);

    // Alice's child row altered to another scope: her reload does not show it.
    const { default: Database } = await import('better-sqlite3');
    const db = new Database(path);
    const row = JSON.parse((db.prepare('SELECT state FROM sessions WHERE session_id = ?').get(alicesChild) as { state: string }).state);
    db.prepare('UPDATE sessions SET state = ? WHERE session_id = ?').run(JSON.stringify({ ...row, scope: 'user:mallory' }), alicesChild);
    db.close();
    const alices = (await (await as('alice')(new Request('http://127.0.0.1/api/chat/c/messages'))).json()) as { messages: UIMessage[] };
    const shown = alices.messages[1]!.parts;
    expect(shown.some((p) => p.toolCallId?.includes('/'))).toBe(false);
    expect(shown.find((p) => p.type === 'data-subagent-incomplete')!.data).toMatchObject({ toolCallId: 'call_1_0', reason: 'unreadable' });
  });
});

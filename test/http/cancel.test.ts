/**
 * The page's stop button: `POST <api>/<chat id>/cancel` cancels the run in flight with the
 * driver's cancellation (its streams end with the Cancelled outcome, the session keeps what
 * arrived), whether this handler holds the session or it rests in the store waiting for a
 * decision; the next message continues the chat. Unknown chats, chats at rest and bad ids are refused.
 * A call of the batch that had finished keeps its result when the run is cancelled from the store
 * (before, it was stored "interrupted" beside the waiting call, and the next run read that).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { createChatHandler, type ChatHandler } from '../../src/http.js';
import { MemorySessionStore, type Message, type ModelRequest, type SessionStore } from '../../src/index.js';
import { SqliteSessionStore } from '../../src/stores/sqlite.js';
import { interruptedContent } from '../../src/tools/run-tools.js';
import { decodeRow } from '../../src/sessions/session-row.js';
import { chatAgent } from './fixtures/chat-agent.js';
import { loadSdk, page, textOf, userMessage } from './support.js';

const handlers: ChatHandler[] = [];
afterEach(async () => {
  await Promise.all(handlers.splice(0).map((handler) => handler.close()));
});

const NOT_STARTED = interruptedContent({ type: 'cancelled' }, false);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const root = mkdtempSync(join(tmpdir(), 'loopchart-chat-cancel-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

function setup(script: Parameters<typeof chatAgent>[0], store: SessionStore = new MemorySessionStore()) {
  const { machine, transfers } = chatAgent(script);
  const handler = createChatHandler({ machine, store });
  handlers.push(handler);
  const cancel = (chatId: string) => handler(new Request(`http://127.0.0.1/api/chat/${chatId}/cancel`, { method: 'POST' }));
  const lastRun = async (chatId: string) => {
    const row = (await store.load(chatId))!;
    return decodeRow(chatId, row.state, row.messages);
  };
  return { handler, cancel, lastRun, transfers };
}

describe('stop', () => {
  it('cancels the run in flight: the stream ends Cancelled, the session keeps the run as Cancelled, the next message continues', async () => {
    // The first answer streams over 20 s: the cancel lands while it is in flight (an answer that
    // ends well before that was cut short, however loaded the machine). The cancelled
    // run stores no reply, so the script picks its entry by what the user asked last.
    const seen: string[][] = [];
    const answer = (request: ModelRequest) => {
      seen.push(request.messages.filter((m) => m.role === 'user').map((m) => String(m.content)));
      return seen.length === 1 ? { text: 'A slow answer that takes a while to stream out.', delayMs: 20_000 } : { text: 'Back again.' };
    };
    const { handler, cancel, lastRun } = setup([answer]);
    const chat = page(await loadSdk(6), handler, 'stopme');
    const started = Date.now();
    const first = chat.send([userMessage('one')]);
    // The run in flight: its model was asked (a fixed sleep could end before the request started it).
    await expect.poll(() => seen.length, { timeout: 5_000 }).toBe(1);
    const response = await cancel('stopme');
    expect(response.status).toBe(202);
    const cancelled = await first;
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(cancelled.metadata?.outcome).toBe('Cancelled');
    expect((await lastRun('stopme')).lastRun?.outcome.type).toBe('Cancelled');

    // Nothing in flight now: a second cancel is refused, and the chat takes the next message.
    expect(((await (await cancel('stopme')).json()) as { error: { code: string } }).error.code).toBe('NoRunInFlight');
    const next = await chat.send([userMessage('one'), { id: 'a1', role: 'assistant', parts: [] }, userMessage('two', 'u-2')]);
    expect(next.metadata?.outcome).toBe('Completed');
    expect(textOf(next)).toBe('Back again.');
    // The stored conversation, not the page's copy: the cancelled question is still in it.
    expect(seen.at(-1)).toEqual(['one', 'two']);
    expect(chat.errors).toEqual([]);
  });

  it('cancels a run that waits for a decision in the store (no live session): the call never runs', async () => {
    const { handler, cancel, lastRun, transfers } = setup([{ toolCalls: [{ name: 'transfer', args: { amount: 5 } }] }, { text: 'Done.' }]);
    const chat = page(await loadSdk(6), handler, 'waiting');
    const asked = await chat.send([userMessage('send 5')]);
    expect(asked.metadata?.outcome).toBe('waiting');
    expect((await cancel('waiting')).status).toBe(202);
    // The cancel's effect is stored before the next request on the chat is served.
    const deadline = Date.now() + 5000;
    while ((await lastRun('waiting')).lastRun?.outcome.type !== 'Cancelled' && Date.now() < deadline) await sleep(20);
    expect((await lastRun('waiting')).lastRun?.outcome.type).toBe('Cancelled');
    expect(transfers).toEqual([]);
  });

  it('a call of the batch that finished keeps its result when the run waiting in the store is cancelled; the next run reads it', async () => {
    const store = new SqliteSessionStore({ path: join(root, 'finished-call.db') });
    try {
      const requests: ModelRequest[] = [];
      const batch = { toolCalls: [{ id: 'c1', name: 'calculator', args: { expression: '1 + 2' } }, { id: 't1', name: 'transfer', args: { amount: 5 } }] };
      const { handler, cancel, lastRun, transfers } = setup([batch, (request: ModelRequest) => (requests.push(request), { text: 'Back again.' })], store);
      const chat = page(await loadSdk(6), handler, 'half');
      const asked = await chat.send([userMessage('add, then send 5')]);
      expect(asked.metadata?.outcome).toBe('waiting');
      expect((await cancel('half')).status).toBe(202);
      const deadline = Date.now() + 5000;
      while ((await lastRun('half')).lastRun?.outcome.type !== 'Cancelled' && Date.now() < deadline) await sleep(20);
      const results = (messages: readonly Message[]) => Object.fromEntries(messages.flatMap((m) => (m.role === 'tool' ? [[m.toolCallId, m.content]] : [])));
      // t1 waited for its approval: it never started.
      const answers = { c1: '3', t1: NOT_STARTED };
      expect(results((await lastRun('half')).brain.context.history)).toEqual(answers);
      expect(transfers).toEqual([]);

      const next = await chat.send([userMessage('add, then send 5'), { id: 'a1', role: 'assistant', parts: [] }, userMessage('and now?', 'u-2')]);
      expect(next.metadata?.outcome).toBe('Completed');
      expect(results(requests[0]!.messages)).toEqual(answers);
      expect(chat.errors).toEqual([]);
    } finally {
      await Promise.all(handlers.splice(0).map((handler) => handler.close()));
      await store.close();
    }
  });

  it('refuses an unknown chat (404), a chat at rest (409), a bad id (400), and GET on the cancel path (405)', async () => {
    const { handler, cancel } = setup([{ text: 'Hi.' }]);
    const code = async (response: Response) => [response.status, ((await response.json()) as { error: { code: string } }).error.code];
    expect(await code(await cancel('nobody'))).toEqual([404, 'ChatNotFound']);
    expect(await code(await cancel('a%00b'))).toEqual([400, 'InvalidChatRequest']);
    await page(await loadSdk(6), handler, 'rest').send([userMessage('hi')]);
    expect(await code(await cancel('rest'))).toEqual([409, 'NoRunInFlight']);
    expect(await code(await handler(new Request('http://127.0.0.1/api/chat/rest/cancel')))).toEqual([405, 'MethodNotAllowed']);
  });
});

/**
 * An operation that yields, in the chat page (issue 41, matrix: operations × chat handler): the
 * response ends `waiting` with a `data-operation-yielded` part (what the operation asks), and the
 * page answers with `POST <api>/<id>/resume` `{ operation, payload }`, which continues the same
 * run's message. A payload the operation's schema refuses, another operation's name, the
 * approvals' and the budget's names, a chat at rest: refused, nothing changed.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createChatHandler, type ChatHandler } from '../../src/http.js';
import { createAgentMachine, defineTool, MemorySessionStore, type Operation } from '../../src/index.js';
import { scriptedModel } from '../../src/testing.js';
import { chunksOf, loadSdk, page, resumeRequest as resume, textOf, userMessage, type UIMessage } from './support.js';

const handlers: ChatHandler[] = [];
afterEach(async () => {
  await Promise.all(handlers.splice(0).map((handler) => handler.close()));
});

/** Before the run's first batch, asks the user to confirm (the page answers `{ ok: true }`). */
const review: Operation<{ asked: number }, { ok: boolean; note?: string | undefined }> = {
  name: 'review',
  state: { schema: z.object({ asked: z.number() }), initial: { asked: 0 } },
  resume: { schema: z.strictObject({ ok: z.boolean(), note: z.string().optional() }) },
  beforeTools: (calls, ctx) => (ctx.state.asked > 0 ? undefined : { state: { asked: 1 }, yield: { reason: 'confirm', payload: { calls: calls.map(({ call }) => call.name) } } }),
};

function setup() {
  const sent: string[] = [];
  const send = defineTool({ name: 'send', description: 'Sends.', input: z.object({ amount: z.number() }), execute: ({ amount }) => (sent.push(String(amount)), `sent ${amount}`) });
  const machine = createAgentMachine({ model: scriptedModel([{ text: 'Sending.', toolCalls: [{ name: 'send', args: { amount: 5 } }] }, { text: 'Done.' }]), tools: [send], operations: [review] });
  const store = new MemorySessionStore();
  const handler = createChatHandler({ machine, store });
  handlers.push(handler);
  return { handler, store, sent };
}



async function waiting(env: ReturnType<typeof setup>) {
  const sdk = await loadSdk(6);
  const chat = page(sdk, env.handler, 'pay');
  const asked = await chat.send([userMessage('Send 5.')]);
  return { sdk, chat, asked };
}

describe('an operation that yields, in the chat page', () => {
  it('shows what it asks, and POST /resume continues the same message to the end', async () => {
    const env = setup();
    const { chat, asked } = await waiting(env);
    expect(asked.metadata?.outcome).toBe('waiting');
    expect(asked.parts.find((p) => p.type === 'data-operation-yielded')?.data).toEqual({ operation: 'review', reason: 'confirm', payload: { calls: ['send'] } });
    expect(env.sent).toEqual([]);
    const response = await resume(env.handler, 'pay', { operation: 'review', payload: { ok: true } });
    expect(response.status).toBe(200);
    const after: UIMessage = await chat.read(chunksOf(response), asked);
    expect(env.sent).toEqual(['5']);
    expect(after.metadata?.outcome).toBe('Completed');
    expect(textOf(after)).toBe('Sending.|Done.');
  });

  it.each([
    [{ operation: 'review', payload: { ok: 'yes' } }, 409, 'ResumeRefused'],
    [{ operation: 'other', payload: {} }, 409, 'NothingToResume'],
    [{ operation: 'approvals', payload: {} }, 400, 'InvalidChatRequest'],
    [{ operation: 'budget', payload: { budget: { maxToolCalls: 99 } } }, 400, 'InvalidChatRequest'],
    [{ operation: 'review' }, 400, 'InvalidChatRequest'],
    [{ operation: 'review', payload: { ok: true }, extra: 1 }, 400, 'InvalidChatRequest'],
    ['review', 400, 'InvalidChatRequest'],
  ])('%j is answered %i %s, and a refused one changes nothing', async (body, status, code) => {
    const env = setup();
    await waiting(env);
    const before = await env.store.load('pay');
    const response = await resume(env.handler, 'pay', body);
    expect(response.status).toBe(status);
    expect(((await response.json()) as { error: { code: string } }).error.code).toBe(code);
    expect(await env.store.load('pay')).toEqual(before);
    expect(env.sent).toEqual([]);
  });

  it('refuses a chat with nothing to resume, a GET, and a body that is not JSON', async () => {
    const env = setup();
    expect((await resume(env.handler, 'nobody', { operation: 'review', payload: { ok: true } })).status).toBe(404);
    await waiting(env);
    expect((await resume(env.handler, 'pay', { operation: 'review', payload: { ok: true } })).status).toBe(200);
    expect((await resume(env.handler, 'pay', { operation: 'review', payload: { ok: true } })).status).toBe(409);
    expect((await env.handler(new Request('http://127.0.0.1/api/chat/pay/resume'))).status).toBe(405);
    const text = await env.handler(new Request('http://127.0.0.1/api/chat/pay/resume', { method: 'POST', headers: { 'content-type': 'text/plain' }, body: 'ok' }));
    expect(text.status).toBe(415);
  });
});

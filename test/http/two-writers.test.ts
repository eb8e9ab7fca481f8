/**
 * Two chat handlers on one store (two processes of an app behind a load balancer), over real
 * HTTP on 127.0.0.1: both get the first message of the same new chat at once. The store answers
 * the second handler's read late, so the first makes the chat meanwhile and the second's creating
 * write is refused by the store (SessionBusyError). Before, that answer was a 500 (the handler's
 * "internal error", told to onError as a bug); it is a 409 saying another writer has the chat,
 * and the first handler's run is untouched.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createChatHandler } from '../../src/http.js';
import { createAgentMachine } from '../../src/index.js';
import { scriptedModel } from '../../src/testing.js';
import { LateStore, listenOn, userMessage } from './support.js';

const cleanup: Array<() => Promise<unknown> | void> = [];
afterEach(async () => {
  for (const step of cleanup.splice(0).reverse()) await step();
});

async function serve(store: LateStore, reply: string, errors: unknown[]) {
  const handler = createChatHandler({ machine: createAgentMachine({ model: scriptedModel([{ text: reply }]) }), store, onError: (error) => void errors.push(error) });
  const served = await listenOn(handler);
  cleanup.push(() => served.close());
  return served.api;
}

const post = (api: string, text: string) =>
  fetch(api, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ id: 'trip', messages: [userMessage(text)] }) });

describe('two handlers on one store make the same new chat at once', () => {
  it('the one the store refuses answers 409 (another writer has the chat), not a 500; the other run completes', async () => {
    const store = new LateStore();
    const errors: unknown[] = [];
    const [first, second] = [await serve(store, 'first', errors), await serve(store, 'second', errors)];
    const late = store.arm('trip');
    const loser = post(second, 'from the second tab');
    await late.reached;
    const winner = await post(first, 'from the first tab');
    expect(winner.status).toBe(200);
    expect(await winner.text()).toContain('"outcome":"Completed"');
    late.release();
    const refused = await loser;
    expect(refused.status).toBe(409);
    expect(JSON.parse(await refused.text())).toEqual({ error: { code: 'ChatBusy', message: "chat 'trip' was changed by another writer meanwhile: load it and send again" } });
    expect(errors).toEqual([]);
    const stored = await store.load('trip');
    expect(stored?.messages.map((m) => m.content)).toEqual(['from the first tab', 'first']);
  });
});

/**
 * `chatScope` against a race, on a real `node:http` server on 127.0.0.1: a request of another
 * scope that found no chat when it was admitted, while the chat was being made, is still a 404
 * once the chat exists. The store here answers the admission's read late (as PostgreSQL's round
 * trip does): the read finds nothing, the victim makes the chat meanwhile, then the answer
 * arrives. Before, the scope was checked at admission only, and bob then read ada's chat, streamed
 * her run, cancelled it or was told it had a run (PostgreSQL, 40 rounds of a page polling a chat
 * id while its owner made it: 34 streams and 7 transcripts of hers read, 39 of her runs cancelled).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createChatHandler, type ChatAction } from '../../src/http.js';
import { createAgentMachine } from '../../src/index.js';
import type { Model } from '../../src/model.js';
import { LateStore, listenOn, userMessage } from './support.js';

const cleanup: Array<() => Promise<unknown> | void> = [];
afterEach(async () => {
  for (const step of cleanup.splice(0).reverse()) await step();
});

/** Answers once released (at most 5 s), so ada's run is in flight while bob asks. */
function heldModel(): Model & { release: () => void } {
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  return {
    name: 'held',
    release,
    async generate() {
      await Promise.race([released, new Promise((resolve) => setTimeout(resolve, 5_000))]);
      return { message: { role: 'assistant', content: 'Your passport number is X123.' }, finishReason: 'stop' };
    },
  };
}

async function scopedServer() {
  const store = new LateStore();
  const model = heldModel();
  const handler = createChatHandler({ machine: createAgentMachine({ model }), store, chatScope: (request) => `user:${request.headers.get('x-user')}` });
  const served = await listenOn(handler);
  cleanup.push(() => (model.release(), served.close()));
  return { store, model, api: served.api };
}

function ask(api: string, action: Exclude<ChatAction, 'post'>, user: string, chatId: string): Promise<Response> {
  const path = `${api}/${encodeURIComponent(chatId)}`;
  const headers = { 'x-user': user, 'content-type': 'application/json' };
  if (action === 'read') return fetch(`${path}/messages`, { headers });
  if (action === 'stream') return fetch(`${path}/stream`, { headers });
  if (action === 'cancel') return fetch(`${path}/cancel`, { method: 'POST', headers });
  if (action === 'resume') return fetch(`${path}/resume`, { method: 'POST', headers, body: JSON.stringify({ operation: 'review', payload: {} }) });
  const answer = { id: 'a1', role: 'assistant', parts: [{ type: 'tool-book', toolCallId: 'c1', state: 'approval-responded', approval: { id: '1:x:c1', approved: true } }] };
  return fetch(api, { method: 'POST', headers, body: JSON.stringify({ id: chatId, messages: [userMessage('hi'), answer] }) });
}

describe('chatScope, checked again where the chat is read', () => {
  it.each<Exclude<ChatAction, 'post'>>(['read', 'stream', 'cancel', 'resume', 'approve'])(
    "a request of another scope admitted before the chat existed is a 404 once it does (%s), and ada's run goes on",
    async (action) => {
      const { store, model, api } = await scopedServer();
      // Bob's admission reads the store: no chat 'trip' yet. Its answer is held there.
      const late = store.arm('trip');
      const bobs = ask(api, action, 'bob', 'trip');
      await late.reached;
      // Meanwhile ada makes the chat; her run waits for its model.
      const body = JSON.stringify({ id: 'trip', messages: [userMessage('My passport number is X123.')] });
      const adas = await fetch(api, { method: 'POST', headers: { 'content-type': 'application/json', 'x-user': 'ada' }, body });
      expect(adas.status).toBe(200);
      late.release();
      const response = await bobs;
      expect(response.status).toBe(404);
      const refusal = await response.text();
      expect(JSON.parse(refusal)).toEqual({ error: { code: 'ChatNotFound', message: "no chat 'trip'" } });
      model.release();
      const reply = await adas.text();
      expect(reply).toContain('Your passport number is X123.');
      expect(reply).toContain('"outcome":"Completed"');
    },
  );
});

// examples/readme/chat-hono.ts
import { Hono } from 'hono';
import { createAgentMachine, MemorySessionStore } from 'loopchart';
import { createChatHandler } from 'loopchart/http';
import { scriptedModel } from 'loopchart/testing';

const machine = createAgentMachine({ model: scriptedModel([{ text: 'Hello from Hono.' }]) });
const chat = createChatHandler({ machine, store: new MemorySessionStore() });

const app = new Hono();
// The handler takes the Fetch request as it came: Hono hands it over as c.req.raw.
app.all('/api/chat', (c) => chat(c.req.raw));
app.all('/api/chat/*', (c) => chat(c.req.raw));
// On Node: serve(app) from @hono/node-server; on Bun or Deno: export default app.

/** The reply's text: the `text-delta` chunks of the UI message stream, joined. */
const textOf = (sse: string) => [...sse.matchAll(/"delta":"([^"]*)"/g)].map((m) => m[1]).join('');
const body = { id: 'hono-1', messages: [{ id: 'u1', role: 'user', parts: [{ type: 'text', text: 'Hi!' }] }] };
const response = await app.request('/api/chat', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
console.log(response.headers.get('x-vercel-ai-ui-message-stream')); // v1
console.log(textOf(await response.text())); // Hello from Hono.
console.log((await app.request('/api/chat/hono-1/stream')).status); // 204
await chat.close();

// examples/readme/chat-next.ts
// In a Next.js app this file is app/api/chat/[[...path]]/route.ts: one catch-all route serves
// POST /api/chat, GET /api/chat/<id>/messages and /stream, POST /api/chat/<id>/cancel.
import { createAgentMachine, MemorySessionStore } from 'loopchart';
import { createChatHandler } from 'loopchart/http';
import { scriptedModel } from 'loopchart/testing';

const machine = createAgentMachine({ model: scriptedModel([{ text: 'Hello from a route handler.' }]) });
// One handler per server process (module scope), over a store every process shares in production.
const chat = createChatHandler({ machine, store: new MemorySessionStore() });

export const GET = (request: Request) => chat(request);
export const POST = (request: Request) => chat(request);
// Streams must not be buffered or cached, and need the Node.js runtime (a store, timers).
export const dynamic = 'force-dynamic';
export const runtime = 'nodejs';

// What Next.js does with a request, here by hand:
/** The reply's text: the `text-delta` chunks of the UI message stream, joined. */
const textOf = (sse: string) => [...sse.matchAll(/"delta":"([^"]*)"/g)].map((m) => m[1]).join('');
const body = { id: 'next-1', messages: [{ id: 'u1', role: 'user', parts: [{ type: 'text', text: 'Hi!' }] }] };
const response = await POST(new Request('http://localhost/api/chat', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }));
console.log(textOf(await response.text())); // Hello from a route handler.
const stored = await GET(new Request('http://localhost/api/chat/next-1/messages'));
console.log(((await stored.json()) as { messages: unknown[] }).messages.length); // 2
await chat.close();

// examples/readme/chat-ui.ts
import { createServer } from 'node:http';
import { createAgentMachine, MemorySessionStore } from 'loopchart';
import { createChatHandler, toNodeListener } from 'loopchart/http';
import { scriptedModel } from 'loopchart/testing';

const machine = createAgentMachine({ model: scriptedModel([{ text: 'Hello from loopchart.' }]) });
// Any store: with openSessionStore('.loopchart/chat.db') chats survive a restart.
const chat = createChatHandler({ machine, store: new MemorySessionStore() }); // aiSdk: 6 by default
// Next.js, app/api/chat/[[...path]]/route.ts: export { chat as GET, chat as POST };
// Express: app.use('/api/chat', toNodeListener(chat)); Hono, Bun, Deno: chat(request).
const server = createServer(toNodeListener(chat)).listen(0, '127.0.0.1');
await new Promise((resolve) => server.once('listening', resolve));
const api = `http://127.0.0.1:${(server.address() as { port: number }).port}/api/chat`;

// What useChat's DefaultChatTransport sends: the chat id and the page's messages.
const body = { id: 'chat-1', messages: [{ id: 'u1', role: 'user', parts: [{ type: 'text', text: 'Hi!' }] }] };
const response = await fetch(api, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
console.log(response.headers.get('x-vercel-ai-ui-message-stream')); // v1
const events = (await response.text()).split('\n\n').filter(Boolean).map((event) => event.slice('data: '.length));
console.log(events.at(-1)); // [DONE]
const chunks = events.slice(0, -1).map((data) => JSON.parse(data) as { type: string; delta?: string });
console.log(chunks.map((chunk) => chunk.delta ?? '').join('')); // Hello from loopchart.
console.log((await fetch(`${api}/chat-1/stream`)).status); // 204
await chat.close();
server.close();

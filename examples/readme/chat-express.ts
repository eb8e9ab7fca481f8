// examples/readme/chat-express.ts
import express from 'express';
import { createAgentMachine, MemorySessionStore } from 'loopchart';
import { createChatHandler, toNodeListener } from 'loopchart/http';
import { scriptedModel } from 'loopchart/testing';

const machine = createAgentMachine({ model: scriptedModel([{ text: 'Hello from Express.' }]) });
const chat = createChatHandler({ machine, store: new MemorySessionStore() });

const app = express();
// Before any body parser: the handler reads the body itself (and bounds it, maxBodyBytes).
app.use('/api/chat', toNodeListener(chat));
const server = app.listen(0, '127.0.0.1');
await new Promise((resolve) => server.once('listening', resolve));
const api = `http://127.0.0.1:${(server.address() as { port: number }).port}/api/chat`;

/** The reply's text: the `text-delta` chunks of the UI message stream, joined. */
const textOf = (sse: string) => [...sse.matchAll(/"delta":"([^"]*)"/g)].map((m) => m[1]).join('');
const body = { id: 'express-1', messages: [{ id: 'u1', role: 'user', parts: [{ type: 'text', text: 'Hi!' }] }] };
const response = await fetch(api, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
console.log(textOf(await response.text())); // Hello from Express.
console.log((await fetch(`${api}/express-1/messages`)).status); // 200
await chat.close();
server.close();

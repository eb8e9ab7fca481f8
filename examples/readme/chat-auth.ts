// examples/readme/chat-auth.ts
import { createHmac, timingSafeEqual } from 'node:crypto';
import { createAgentMachine, MemorySessionStore } from 'loopchart';
import { createChatHandler, type ChatAuthorizer, type ChatKeyMapper } from 'loopchart/http';
import { scriptedModel } from 'loopchart/testing';

// Your app signs a token when a user logs in: `<user id>.<HMAC of the user id>` (or a session cookie).
const SECRET = process.env.CHAT_TOKEN_SECRET ?? 'change-me';
const sign = (userId: string) => `${userId}.${createHmac('sha256', SECRET).update(userId).digest('base64url')}`;

/** The signed-in user of a request (a bearer token here; a signed cookie reads the same), or null. */
function userOf(request: Request): string | null {
  const token = /^Bearer (\w+)\.([\w-]+)$/.exec(request.headers.get('authorization') ?? '');
  if (!token) return null;
  const expected = Buffer.from(sign(token[1]!));
  const given = Buffer.from(`${token[1]}.${token[2]}`);
  return expected.length === given.length && timingSafeEqual(expected, given) ? token[1]! : null;
}

// Who may do what: anyone signed in, on their own chats (chatKey below keeps them apart).
const authorize: ChatAuthorizer = ({ request }) => userOf(request) !== null || { allow: false, status: 401, reason: 'sign in first' };
// The stored session of a chat id is the user's own: bob's "trip" is never alice's "trip".
const chatKey: ChatKeyMapper = (request, chatId) => `${userOf(request)}.${chatId}`;

const store = new MemorySessionStore();
const machine = createAgentMachine({ model: scriptedModel([{ text: 'Booked.' }]) });
const chat = createChatHandler({ machine, store, authorize, chatKey });

const as = (token: string | null) => (path: string, init: RequestInit = {}) =>
  chat(new Request(`http://localhost/api/chat${path}`, { ...init, headers: { ...(token && { authorization: `Bearer ${token}` }), 'content-type': 'application/json' } }));
const body = JSON.stringify({ id: 'trip', messages: [{ id: 'u1', role: 'user', parts: [{ type: 'text', text: 'Book it.' }] }] });

await (await as(sign('alice'))('', { method: 'POST', body })).text();
console.log((await as(sign('alice'))('/trip/messages')).status); // 200
console.log((await as(sign('bob'))('/trip/messages')).status); // 404
console.log((await as(null)('/trip/messages')).status); // 401
console.log((await as('alice.forged')('/trip/messages')).status); // 401
console.log((await store.list()).map((row) => row.sessionId).join(', ')); // alice.trip
await chat.close();

// examples/readme/viewer-authorize.ts
import { createAgentMachine, DurableSession, MemorySessionStore } from 'loopchart';
import { scriptedModel } from 'loopchart/testing';
import { startViewer, type ViewerAuthorizer } from 'loopchart/viewer';

// Sessions named `<user>:<chat>`; a proxy in front of the viewer sets `x-user` once it has signed the user in.
const ownOnly: ViewerAuthorizer = ({ request, sessionId }) => {
  const user = request.headers.get('x-user');
  if (!user) return { allow: false, status: 401, reason: 'sign in first' };
  return sessionId === null || sessionId.startsWith(`${user}:`) || { allow: false, status: 404 };
};

const store = new MemorySessionStore();
for (const sessionId of ['ann:trip', 'bob:trip']) {
  const session = await DurableSession.open({ machine: createAgentMachine({ model: scriptedModel([{ text: 'Booked.' }]) }), store, sessionId });
  session.send({ type: 'input', message: 'Book it.' });
  await session.whenIdle();
  await session.close();
}
const viewer = await startViewer({ store, port: 0, authorize: ownOnly, authorizeTimeoutMs: 2_000 });
const as = (user: string | null) => (path: string) => fetch(new URL(path, viewer.url), { headers: user ? { 'x-user': user } : {} });

const home = await (await as('ann')('/')).text();
console.log(home.includes('ann:trip'), home.includes('bob:trip')); // true false
console.log((await as('ann')('/s/ann%3Atrip')).status); // 200
console.log((await as('ann')('/s/bob%3Atrip')).status); // 404
console.log((await as(null)('/')).status); // 401
await viewer.close();

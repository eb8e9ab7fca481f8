// examples/readme/memory-privacy.ts
import { createAgentMachine, DurableSession, MemorySessionStore } from 'loopchart';
import { agentMemory, deleteScope, exportScope, listScopes } from 'loopchart/memory';
import { scriptedModel } from 'loopchart/testing';

const store = new MemorySessionStore();
const machine = createAgentMachine({ model: scriptedModel([{ text: 'Hello, Ada.' }]), operations: [agentMemory({ store })] });
const session = await DurableSession.open({ machine, store, sessionId: 'first', scope: 'user:42' });
session.send({ type: 'input', message: 'I am Ada.' });
await session.whenIdle();
await session.close();

const [scope] = await listScopes(store); // every scope with memory, newest first
console.log(scope!.scope, scope!.entries, scope!.sessions); // user:42 2 1
const data = await exportScope(store, 'user:42'); // everything kept for the scope
console.log(data.entries.map((entry) => `${entry.role}: ${entry.text}`).join(' | ')); // user: I am Ada. | assistant: Hello, Ada.
console.log(await deleteScope(store, 'user:42')); // 2
console.log((await exportScope(store, 'user:42')).entries.length, (await listScopes(store)).length); // 0 0

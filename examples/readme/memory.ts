// examples/readme/memory.ts
import { createAgentMachine, DurableSession, MemorySessionStore, type ModelRequest } from 'loopchart';
import { agentMemory, exportScope } from 'loopchart/memory';
import { scriptedModel } from 'loopchart/testing';

const store = new MemorySessionStore(); // or a SQLite file, or PostgreSQL: memory is kept beside the sessions
const memory = agentMemory({ store }); // working memory (memory_update) and recall (memory_search)

// First conversation: the model saves what it learnt, then answers.
const first = createAgentMachine({
  model: scriptedModel([{ toolCalls: [{ name: 'memory_update', args: { memory: 'Name: Ada. Project: the Lovelace engine.' } }] }, { text: 'Noted, Ada.' }]),
  operations: [memory],
});
const monday = await DurableSession.open({ machine: first, store, sessionId: 'monday', scope: 'user:ada' });
monday.send({ type: 'input', message: 'I am Ada; I work on the Lovelace engine.' });
await monday.whenIdle();
await monday.close();

// A week later, a new conversation of the same user: the memory is in the request.
const sent: ModelRequest[] = [];
const second = createAgentMachine({
  model: scriptedModel([(request) => (sent.push(request), { text: 'The Lovelace engine.' })]),
  operations: [memory],
});
const friday = await DurableSession.open({ machine: second, store, sessionId: 'friday', scope: 'user:ada' });
friday.send({ type: 'input', message: 'Which engine do I work on?' });
await friday.whenIdle();
await friday.close();

const system = sent[0]!.messages.filter((m) => m.role === 'system').map((m) => m.content).join('\n');
console.log(system.includes('Name: Ada. Project: the Lovelace engine.')); // true
console.log(system.includes('I am Ada; I work on the Lovelace engine.')); // true
console.log((await exportScope(store, 'user:bob')).entries.length); // 0

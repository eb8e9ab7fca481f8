// examples/readme/durable.ts
import { createAgentMachine, DurableSession, openSessionStore } from 'loopchart';
import { scriptedModel } from 'loopchart/testing';

const machine = createAgentMachine({ model: scriptedModel([{ text: 'The export failed on a timeout.' }]) });
const store = await openSessionStore(); // SQLite at .loopchart/loopchart.db (default; the folder ignores itself in git)
const session = await DurableSession.open({ machine, store, sessionId: 'ticket-42' });
// The first run asks; run the script again and the session is already there, answered.
const stored = session.actor.getSnapshot().context.lastRun;
if (!stored) session.send({ type: 'input', message: 'Why did the export fail?' });
const output = stored ?? (await session.whenIdle()); // stored when it resolves
console.log(output?.outcome); // { type: 'Completed', finalText: 'The export failed on a timeout.' }
await session.close();
await store.close();

// examples/readme/schedules.ts
import { createAgentMachine, MemorySessionStore } from 'loopchart';
import { listSchedules, schedule, startScheduler } from 'loopchart/schedules';
import { scriptedModel } from 'loopchart/testing';

const store = new MemorySessionStore(); // or a SQLite file or PostgreSQL, shared by scheduler processes
const reporter = createAgentMachine({ model: scriptedModel([{ text: 'Nothing new overnight.' }]) });

// Stored beside the sessions: checked now (a bad cron or time zone is a typed error).
const nightly = await schedule(store, { id: 'nightly', session: 'reports', agent: 'reporter', input: 'Write the nightly report.', cron: '0 2 * * *', timezone: 'Europe/Paris' });
console.log(nightly.nextAt! > new Date()); // true
await schedule(store, { id: 'now', session: 'reports', agent: 'reporter', input: 'Write a report now.', at: new Date() });

// Fires what is due, each tick once even with several schedulers on the store.
const scheduler = await startScheduler({ store, agents: { reporter } });
for (let i = 0; i < 200 && (await listSchedules(store))[1]!.lastOutcome === null; i++) await new Promise((resolve) => setTimeout(resolve, 25));
await scheduler.stop();

const [, now] = await listSchedules(store);
console.log(now!.lastOutcome, now!.runs, now!.nextAt); // Completed 1 null
console.log((await store.load('reports'))!.messages.at(-1)!.content); // Nothing new overnight.

// examples/restate/schedules.ts
import * as restate from '@restatedev/restate-sdk';
import { createAgentMachine } from 'loopchart';
import { restateScheduleClient, restateSchedules, restateSession } from 'loopchart/restate';
import { scriptedModel } from 'loopchart/testing';

// The worker: the session object, its channel, the schedules and their registry.
const { session, channel } = restateSession({ machine: createAgentMachine({ model: scriptedModel([{ text: 'Report written.' }]) }) });
const { schedule, registry } = restateSchedules(); // ticks go to `loopchartSession` (option `session`)
await restate.endpoint().bind(session).bind(channel).bind(schedule).bind(registry).listen(9080);

// Any client: the same calls as on a store, without `agent` (the session object's agent runs).
const schedules = restateScheduleClient('http://127.0.0.1:8080');
await schedules.schedule({ id: 'nightly', session: 'reports', input: 'Write the nightly report.', cron: '0 2 * * *', timezone: 'Europe/Paris' });
console.log(await schedules.list()); // pause(id), resume(id), delete(id), get(id) as well

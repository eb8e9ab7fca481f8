/**
 * A team of agents, offline: a coordinator delegates to two specialists (agent tools, each a
 * child session of its own) and then hands the conversation to a closer (a handoff). The
 * researcher searches the notes; the writer publishes, which needs a reviewer's approval (given
 * here by the script, as the reviewer would). Everything is a durable session on SQLite in a
 * folder, so a process killed anywhere, also inside a specialist, goes on where it was:
 *
 *   npx tsx examples/team.ts                 a new session in a new temporary folder
 *   npx tsx examples/team.ts --dir <folder>  the session of that folder: started, or resumed
 *
 * Each line it prints starts with who speaks: `coordinator`, `researcher`, `writer`, `closer`,
 * `reviewer` or `team`.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod';
import { agentTool, createAgentMachine, defineTool, DurableSession, type ModelRequest } from '../src/index.js';
import { SqliteSessionStore } from '../src/sqlite.js';
import { scriptedModel, type ScriptEntry } from '../src/testing.js';

const NOTES = ['Tea is served at 4 in the lobby.', 'The lobby reopens on Monday.'];

const say = (who: string, text: string) => console.log(`${who.padEnd(11)} ${text}`);
/** A scripted model that says which agent speaks on every call. */
const voiced = (who: string, script: ScriptEntry[]) =>
  scriptedModel(
    script.map((entry) => (request: ModelRequest) => {
      say(who, `thinking (call ${request.messages.filter((m) => m.role === 'assistant').length + 1})`);
      return typeof entry === 'function' ? entry(request) : entry;
    }),
    { name: who },
  );

const search = defineTool({
  name: 'search_notes',
  description: 'Searches the team notes.',
  input: z.object({ query: z.string() }),
  execute: async ({ query }, { signal }) => {
    say('researcher', `searching the notes for "${query}"`);
    await sleep(300, undefined, { signal }); // a slow search: a kill lands inside it
    return NOTES.filter((note) => note.toLowerCase().includes(query.toLowerCase())).join('\n') || 'nothing found';
  },
});
const publish = defineTool({
  name: 'publish',
  description: 'Publishes an announcement.',
  input: z.object({ text: z.string() }),
  needsApproval: true,
  execute: ({ text }) => (say('writer', `published: ${text}`), `published: ${text}`),
});

const researcher = createAgentMachine({
  instructions: 'You find facts in the team notes.',
  model: voiced('researcher', [{ toolCalls: [{ id: 's1', name: 'search_notes', args: { query: 'lobby' } }] }, { text: NOTES.join(' ') }]),
  tools: [search],
});
const writer = createAgentMachine({
  instructions: 'You write and publish short announcements.',
  model: voiced('writer', [{ toolCalls: [{ id: 'p1', name: 'publish', args: { text: 'Tea at 4 in the lobby, from Monday.' } }] }, { text: 'Published.' }]),
  tools: [publish],
});

const coordinator = createAgentMachine({
  instructions: 'You coordinate: research first, then writing; then hand over to the closer.',
  model: voiced('coordinator', [
    { toolCalls: [{ id: 'c1', name: 'researcher', args: { task: 'What is happening in the lobby?' } }] },
    { toolCalls: [{ id: 'c2', name: 'writer', args: { task: 'Announce tea at 4 in the lobby from Monday.' } }] },
    { toolCalls: [{ id: 'h1', name: 'transfer_to_closer', args: {} }] },
  ]),
  tools: [
    agentTool({ agent: researcher, name: 'researcher', description: 'Finds facts in the team notes.' }),
    agentTool({ agent: writer, name: 'writer', description: 'Writes and publishes announcements.' }),
  ],
  handoffs: {
    name: 'coordinator',
    // The closer is shown the conversation without the specialists' calls: the user's request.
    history: 'filtered',
    agents: [{ name: 'closer', description: 'Answers the user at the end.', instructions: 'You tell the user what was done.', model: voiced('closer', [{ text: 'Done: the tea announcement is published.' }]) }],
  },
});

const at = process.argv.indexOf('--dir');
const dir = at > 0 ? process.argv[at + 1]! : mkdtempSync(join(tmpdir(), 'loopchart-team-'));
const store = new SqliteSessionStore({ path: join(dir, 'team.db') });
const existing = await store.load('team');
say('team', `${existing ? 'resuming' : 'starting'} the session in ${dir}`);
const session = await DurableSession.open({
  machine: coordinator,
  store,
  sessionId: 'team',
  attach: (actor) => {
    actor.on('approval.requested', ({ calls }) => {
      for (const call of calls) {
        say('reviewer', `approving ${call.name} (${call.id})`);
        setTimeout(() => actor.send({ type: 'approve', toolCallId: call.id, by: 'reviewer' }), 0);
      }
    });
    actor.on('agent.handoff', ({ from, name }) => say('team', `${from} hands the conversation to ${name}`));
  },
});
if (!existing) session.send({ type: 'input', message: 'Please tell everyone about tea in the lobby.' });
const output = await session.whenIdle();
say('team', `outcome: ${JSON.stringify(output?.outcome)}`);
say('team', `sessions: ${(await store.list()).map((s) => s.sessionId).sort().join(', ')}`);
await session.close();
await store.close();

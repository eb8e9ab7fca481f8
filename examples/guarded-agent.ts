/**
 * The demo agent with everything teams ask for before they ship one (issue 21), offline: a
 * support agent that answers from a docs folder as a durable session on SQLite.
 *
 * - structured output: the answer is `{ answer, source }`, validated (`outcome.output`);
 * - guardrails: no API key in the input reaches the model (input), and the answer must cite a
 *   file of the docs folder (output: feedback, and the model answers again);
 * - a tool policy from `loopchart/policies`: `pathRule` keeps `read_file` inside the docs;
 * - model fallback: the primary model is overloaded (HTTP 503), the backup takes over;
 * - repetition detection: the model's third identical search gets a note instead of running.
 *
 *   npx tsx examples/guarded-agent.ts                 a new temporary folder
 *   npx tsx examples/guarded-agent.ts --dir <folder>  docs and the SQLite file in that folder
 *
 * Each line it prints starts with what happened: `fallback`, `tool`, `repetition`, `guardrail`,
 * `run`, or `stored`.
 */
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { z } from 'zod';
import { createAgentMachine, defineTool, DurableSession, readFileTool, type Guardrail } from '../src/index.js';
import { pathRule } from '../src/policies.js';
import { SqliteSessionStore } from '../src/sqlite.js';
import { scriptedModel } from '../src/testing.js';

const { values } = parseArgs({ options: { dir: { type: 'string' } } });
const dir = values.dir ?? mkdtempSync(join(tmpdir(), 'loopchart-guarded-'));
mkdirSync(join(dir, 'docs'), { recursive: true });
writeFileSync(join(dir, 'docs', 'refunds.md'), 'Refunds are paid within 5 working days.\n');
writeFileSync(join(dir, 'secrets.txt'), 'admin password: hunter2\n');

const say = (what: string, text: string) => console.log(`${what.padEnd(10)} ${text}`);
const firstLine = (text: string) => text.split('\n')[0]!.slice(0, 90);

const search = defineTool({
  name: 'search',
  description: 'Searches the help center.',
  input: z.object({ query: z.string() }),
  execute: ({ query }) => `no results for "${query}"`,
});
const Answer = z.object({ answer: z.string(), source: z.string() });

const noKeys: Guardrail = {
  name: 'no-keys',
  check: ({ text }) => (/sk-[A-Za-z0-9]{16,}/.test(text) ? { type: 'trip', info: { found: 'api key' } } : { type: 'pass' }),
};
const citesDocs: Guardrail = {
  name: 'cites-docs',
  check: ({ output }) =>
    Answer.safeParse(output).data?.source.startsWith('docs/') ? { type: 'pass' } : { type: 'feedback', message: 'Cite the docs file you read (source: docs/...).' },
};

// The primary is overloaded; the backup is a model stuck on a search for a while.
const primary = scriptedModel([{ error: { message: 'the provider returned HTTP 503: overloaded', status: 503 } }, { text: 'never reached' }], { name: 'primary' });
const searching = { toolCalls: [{ name: 'search', args: { query: 'refund' } }] };
const backup = scriptedModel(
  [
    { toolCalls: [{ name: 'read_file', args: { path: 'secrets.txt' } }] },
    searching,
    searching,
    searching,
    { toolCalls: [{ name: 'read_file', args: { path: 'docs/refunds.md' } }] },
    { toolCalls: [{ name: 'final_answer', args: { answer: 'Refunds take 5 working days.', source: 'memory' } }] },
    { toolCalls: [{ name: 'final_answer', args: { answer: 'Refunds take 5 working days.', source: 'docs/refunds.md' } }] },
  ],
  { name: 'backup' },
);

const machine = createAgentMachine({
  model: [primary, backup],
  retry: false,
  instructions: 'Answer from the docs folder.',
  tools: [readFileTool({ root: dir }), search],
  toolPolicy: pathRule({ roots: [join(dir, 'docs')], base: dir }),
  output: Answer,
  guardrails: { input: [noKeys], output: [citesDocs] },
  repetition: 3,
});
const path = join(dir, 'guarded.db');
const store = new SqliteSessionStore({ path });
const session = await DurableSession.open({ machine, store, sessionId: 'support' });
const { actor } = session;
actor.on('model.fallback', (e) => say('fallback', `${e.from} → ${e.to} (${e.trigger})`));
actor.on('tool.finished', (e) => say('tool', `${e.call.name} ${JSON.stringify(e.call.args)} → ${firstLine(e.result.content)}`));
actor.on('repetition.noted', (e) => say('repetition', `${e.calls.map((call) => call.name).join(', ')} asked for ${e.times} times in a row: the model got a note`));
actor.on('guardrail.feedback', (e) => say('guardrail', `feedback on turn ${e.turn}: ${e.message}`));
actor.on('guardrail.tripped', (e) => say('guardrail', `${e.error.guardrail} tripped on the ${e.error.stage}: ${JSON.stringify(e.error.info)}`));
actor.on('run.finished', (e) => {
  const { outcome } = e.output;
  say(`run ${actor.getSnapshot().context.runIndex}`, outcome.type === 'Completed' ? `Completed ${JSON.stringify(outcome.output)}` : `${outcome.type} ${outcome.type === 'Failed' ? outcome.error.type : ''}`);
});

session.send({ type: 'input', message: 'How long do refunds take?' });
await session.whenIdle();
session.send({ type: 'input', message: 'My key is sk-abcdefghijklmnopqrstu, can you check my refund?' });
await session.whenIdle();
await session.close();
await store.close();
say('stored', `${path} (session 'support': its conversation, the outcome of each run and its trace)`);

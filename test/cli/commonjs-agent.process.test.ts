/**
 * An `--agent` / `--agents` module written in CommonJS (`module.exports = { agent: … }`, a .cjs
 * file or a .js beside a package.json without "type": "module"), loaded by the CLI under plain
 * Node: import() gives its exports object as `default`, and as named exports only the names Node
 * finds by reading the source, so `{ agent: make() }` had no `agent`. (Vitest's own loader names
 * them all, hence a child process.) An ES module's own `agent` still wins over its default export.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAgentMachine } from '../../machines/agent.machine.js';
import { scriptedModel } from '../../src/models/scripted.js';
import { DurableSession } from '../../src/sessions/durable-session.js';
import { SqliteSessionStore } from '../../src/stores/sqlite.js';
import { bundledCommand, REPO, runNode, type NodeCommand } from '../sessions/fixtures/processes.js';

const dir = mkdtempSync(join(tmpdir(), 'loopchart-cli-commonjs-'));
const db = join(dir, 'sessions.db');
let cli: NodeCommand;
beforeAll(async () => {
  cli = await bundledCommand(join(REPO, 'src/cli.ts'));
  const store = new SqliteSessionStore({ path: db });
  for (const sessionId of ['cjs', 'js', 'esm']) await (await DurableSession.open({ machine: createAgentMachine({ model: scriptedModel([]) }), store, sessionId })).close();
  await store.close();
});
afterAll(() => {
  cli?.dispose();
  rmSync(dir, { recursive: true, force: true });
});

const loopchart = (args: string[]) => runNode([...cli.args, ...args], { cwd: dir, env: { NO_COLOR: '1' }, timeoutMs: 20_000 });
/** A model answering `text`, as source. */
const model = (text: string) => `{ name: 'm', generate: async () => ({ message: { role: 'assistant', content: '${text}' } }) }`;
const file = (path: string, text: string) => (writeFileSync(path, text), path);

describe('a CommonJS agent module', { timeout: 40_000 }, () => {
  it('module.exports = { agent: () => config } in a .cjs file: sessions send runs it (it said "must export `agent`")', async () => {
    const module = file(join(dir, 'agent.cjs'), `module.exports = { agent: () => ({ model: ${model('from cjs')} }) };\n`);
    const run = await loopchart(['sessions', 'send', 'cjs', 'Hello.', '--agent', module, '--store', db]);
    expect(run.stderr).toBe('');
    expect(run.lines).toContain('outcome: Completed: from cjs');
    expect(run.code).toBe(0);
  });

  it('a .js beside a package.json without "type": "module", its exports built by a function', async () => {
    const folder = join(dir, 'cjs-package');
    mkdirSync(folder);
    writeFileSync(join(folder, 'package.json'), '{ "name": "agents" }\n');
    const module = file(join(folder, 'agent.js'), `function build() { return { agent: { model: ${model('from js')} } }; }\nmodule.exports = build();\n`);
    const run = await loopchart(['sessions', 'send', 'js', 'Hello.', '--agent', module, '--store', db]);
    expect(run.stderr).toBe('');
    expect(run.lines).toContain('outcome: Completed: from js');
  });

  it('the scheduler: module.exports = build() is found as `agents` (it said "must export `agents`")', async () => {
    const module = file(join(dir, 'agents.cjs'), `function build() { return { agents: { reporter: { model: ${model('x')} } } }; }\nmodule.exports = build();\n`);
    // The store, checked after the module, is a folder: the command stops there, past the module's check.
    const run = await loopchart(['scheduler', '--agents', module, '--store', dir]);
    expect(run.stderr).toContain(`the store ${dir} is a folder`);
    expect(run.code).toBe(1);
  });

  it('an ES module: its own `agent` wins over its default export, as before', async () => {
    const module = file(join(dir, 'both.mjs'), `export const agent = { model: ${model('named')} };\nexport default { model: ${model('default')} };\n`);
    const run = await loopchart(['sessions', 'send', 'esm', 'Hello.', '--agent', module, '--store', db]);
    expect(run.lines).toContain('outcome: Completed: named');
  });
});

/**
 * What a newcomer runs in the first hour, as real processes: `npx loopchart sessions send` prints
 * each message as the run makes it (it printed nothing until the run ended); `npm start --
 * --resume ID` of a finished session says so and calls no model (it sent "Please go on where you
 * stopped." and spent a call); the durable snippet run a second time prints the stored answer (its
 * one-reply script failed on the stored session), and its `.loopchart/` folder stays out of git.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAgentMachine } from '../../machines/agent.machine.js';
import { scriptedModel } from '../../src/models/scripted.js';
import { DurableSession } from '../../src/sessions/durable-session.js';
import { SqliteSessionStore } from '../../src/stores/sqlite.js';
import { agent as slowAgent, SLOW_TOOL_RUNNING } from '../sessions/fixtures/slow-tool-agent.js';
import { bundledCommands, REPO, runNode, startNode, tsxCommand, type NodeCommand } from '../sessions/fixtures/processes.js';

const dir = mkdtempSync(join(tmpdir(), 'loopchart-first-run-'));
const db = join(dir, 'sessions.db');
/** The demo and the durable snippet from bundles (see bundledCommands: a third of tsx's start-up CPU). */
let demo: NodeCommand;
let durableSnippet: NodeCommand;
beforeAll(async () => {
  const [a, b] = await bundledCommands([join(REPO, 'examples/demo.ts'), join(REPO, 'examples/readme/durable.ts')]);
  demo = a!;
  durableSnippet = b!;
});
afterAll(() => {
  demo?.dispose();
  rmSync(dir, { recursive: true, force: true });
});
/** Offline whatever the environment says: the demo's model stays the scripted one. */
const offline = { OPENAI_BASE_URL: undefined, OPENAI_API_KEY: undefined, LOOPCHART_MODEL: undefined };

async function stored(sessionId: string) {
  const store = new SqliteSessionStore({ path: db });
  try {
    return await store.load(sessionId);
  } finally {
    await store.close();
  }
}

describe('the first hour, as processes', () => {
  it('sessions send prints the user message and the model reply while the tool still runs', async () => {
    const store = new SqliteSessionStore({ path: db });
    const fresh = await DurableSession.open({ machine: createAgentMachine(slowAgent()), store, sessionId: 'live', history: [{ role: 'system', content: 'Be slow.' }] });
    await fresh.close();
    await store.close();
    const agentModule = join(REPO, 'test/sessions/fixtures/slow-tool-agent.ts');
    let before: string[] | undefined;
    const child = startNode([...tsxCommand(join(REPO, 'src/cli.ts')).args, 'sessions', 'send', 'live', 'Run the slow tool.', '--agent', agentModule, '--store', db], {
      env: offline,
      onLine: (line, running) => {
        // The tool runs for 20 s unless interrupted: what is printed now was printed live.
        if (line.startsWith(SLOW_TOOL_RUNNING)) {
          before = [...running.lines];
          process.kill(running.pid, 'SIGINT');
        }
      },
    });
    const run = await child.done;
    expect(run.code, run.stderr).toBe(130);
    expect(before, run.lines.join('\n')).toBeDefined();
    // The tool's own line may come before or after the reply's, both are written before it waits.
    const printed = before!.join('\n') + '\n' + run.lines.slice(before!.length, before!.length + 4).join('\n');
    expect(printed).toMatch(/^ +1 {2}user {7}Run the slow tool\.$/m);
    expect(printed).toMatch(/^ +2 {2}assistant {2}Running the slow tool\.\n +→ slow \{\} \[/m);
    // The run's end lists nothing twice: each position is printed once.
    expect(run.lines.filter((line) => /^ +2 {2}assistant/.test(line))).toHaveLength(1);
    expect(run.lines.join('\n')).toMatch(/run 1 committed 3 message\(s\)\noutcome: Cancelled/);
  });

  it('npm start -- --resume ID of a finished demo session says so, exits 0 and calls no model', async () => {
    const store = new SqliteSessionStore({ path: db });
    const session = await DurableSession.open({ machine: createAgentMachine({ model: scriptedModel([{ text: 'All done.' }]) }), store, sessionId: 'demo-finished' });
    session.send({ type: 'input', message: 'Count the lines.' });
    await session.whenIdle();
    await session.close();
    await store.close();
    const before = await stored('demo-finished');

    const run = await runNode([...demo.args, '--resume', 'demo-finished'], { cwd: dir, env: { ...offline, LOOPCHART_STORE: db } });
    const out = run.lines.join('\n');
    expect(run.code, run.stderr).toBe(0);
    expect(out).toContain("the session's last run finished (Completed); there is nothing to resume, and no model was called.");
    expect(out).toContain('ask it something new: npm start -- --resume demo-finished');
    expect(out).toContain(`or: npx loopchart sessions send demo-finished "your next message" --store ${db}`);
    expect(out).not.toContain('Please go on where you stopped.');
    const after = await stored('demo-finished');
    expect(after?.version).toBe(before?.version);
    expect(after?.messages).toEqual(before?.messages);
  });

  it('the durable snippet runs twice in one folder, and its .loopchart/ folder stays out of git', async () => {
    const project = join(dir, 'project');
    execFileSync('git', ['init', '-q', project]);
    const promised = "{ type: 'Completed', finalText: 'The export failed on a timeout.' }";
    for (const attempt of [1, 2]) {
      const run = await runNode(durableSnippet.args, { cwd: project, env: { TSX_TSCONFIG_PATH: join(REPO, 'tsconfig.json'), LOOPCHART_STORE: undefined } });
      expect(run.code, `run ${attempt}: ${run.stderr}`).toBe(0);
      expect(run.lines.join('\n'), `run ${attempt}`).toContain(promised);
    }
    expect(existsSync(join(project, '.loopchart', 'loopchart.db'))).toBe(true);
    expect(readFileSync(join(project, '.loopchart', '.gitignore'), 'utf8')).toMatch(/^\*$/m);
    expect(execFileSync('git', ['status', '--porcelain', '--untracked-files=all'], { cwd: project, encoding: 'utf8' })).toBe('');
  });
});

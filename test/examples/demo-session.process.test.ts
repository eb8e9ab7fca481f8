/**
 * `npm start` runs the demo as a durable session in the embedded store of its working directory
 * (.loopchart/loopchart.db): it prints the id and the commands; `loopchart sessions list` lists
 * every run; a demo killed mid-run continues with `npm start -- --resume <id>`.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SqliteSessionStore } from '../../src/stores/sqlite.js';
import { decodeRow } from '../../src/sessions/session-row.js';
import { bundledCommands, type NodeCommand } from '../sessions/fixtures/processes.js';

// The demo and the CLI as bundles run by node itself (see bundledCommands: a third of tsx's
// start-up CPU), one process each (tsx's CLI would run the script in a child that a SIGKILL misses).
let DEMO: NodeCommand;
let CLI: NodeCommand;
const cwd = mkdtempSync(join(tmpdir(), 'loopchart-demo-session-'));
beforeAll(async () => {
  const files = ['../../examples/demo.ts', '../../src/cli.ts'].map((path) => fileURLToPath(new URL(path, import.meta.url)));
  const [demo, cli] = await bundledCommands(files);
  DEMO = demo!;
  CLI = cli!;
});
afterAll(() => {
  DEMO?.dispose();
  rmSync(cwd, { recursive: true, force: true });
});

interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** Runs `command` in the temporary project, offline; `killWhen` SIGKILLs it once stdout matches. */
function run(command: NodeCommand, args: string[], killWhen?: RegExp): Promise<Exit> {
  const env: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: '1' };
  for (const name of ['OPENAI_BASE_URL', 'OPENAI_API_KEY', 'LOOPCHART_MODEL', 'LOOPCHART_STORE']) delete env[name];
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...command.args, ...args], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString('utf8');
      if (killWhen?.test(stdout)) child.kill('SIGKILL');
    });
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${command.args.join(' ')} did not exit within 40 s\n${stdout}\n${stderr}`));
    }, 40_000);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

const idOf = (stdout: string) => /^session: +(demo-\d{14}-[0-9a-f]{6}) /m.exec(stdout)?.[1];

async function storedSession(sessionId: string) {
  const store = new SqliteSessionStore({ path: join(cwd, '.loopchart', 'loopchart.db') });
  try {
    const stored = (await store.load(sessionId))!;
    return decodeRow(sessionId, stored.state, stored.messages);
  } finally {
    await store.close();
  }
}

describe('npm start on the embedded store', () => {
  const ids: string[] = [];

  it('stores the run in .loopchart/loopchart.db and prints the id with the commands to list, show and resume it', async () => {
    const first = await run(DEMO, []);
    expect(first.code, first.stderr).toBe(0);
    const id = idOf(first.stdout)!;
    expect(id).toBeDefined();
    expect(first.stdout).toContain(`session:  ${id} (new, stored in .loopchart/loopchart.db)`);
    expect(first.stdout).toContain('list:   npx loopchart sessions list');
    expect(first.stdout).toContain(`show:   npx loopchart sessions show ${id}`);
    expect(first.stdout).toContain(`resume: npm start -- --resume ${id}`);
    expect(first.stdout).toMatch(/✓ Completed/);
    const context = await storedSession(id);
    expect(context.lastRun?.outcome.type).toBe('Completed');
    ids.push(id);
  });

  it('after two runs, loopchart sessions list lists both', async () => {
    const second = await run(DEMO, []);
    expect(second.code, second.stderr).toBe(0);
    ids.push(idOf(second.stdout)!);
    expect(new Set(ids).size).toBe(2);
    const list = await run(CLI, ['sessions', 'list']);
    expect(list.code, list.stderr).toBe(0);
    for (const id of ids) expect(list.stdout).toMatch(new RegExp(`^${id}\\s+\\d+\\s+11\\s`, 'm'));
  });

  it('a demo killed mid-run continues with --resume <id>: each tool ran once, one Completed run', async () => {
    // Killed while the third model call is under way (after the files were read).
    const killed = await run(DEMO, [], /turn 3 +waiting for the model/);
    expect(killed.signal).toBe('SIGKILL');
    const id = idOf(killed.stdout)!;
    const before = await storedSession(id);
    expect(before.lastRun).toBeNull();
    // A run in flight: the last stored step is at most the one that decided the third model call.
    expect(['AwaitingTools', 'AwaitingModel']).toContain(before.brain.value);
    expect(before.brain.context.turnsTaken).toBe(2);

    const resumed = await run(DEMO, ['--resume', id]);
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(resumed.stdout).toContain(`session:  ${id} (resumed`);
    expect(resumed.stdout).toContain('27 lines in all');
    expect(resumed.stdout).toMatch(/✓ Completed/);
    const after = await storedSession(id);
    expect(after.runIndex).toBe(1);
    expect(after.lastRun?.outcome.type).toBe('Completed');
    const tools = after.brain.context.history.flatMap((m) => (m.role === 'tool' ? [m.toolName] : []));
    expect(tools).toEqual(['list_dir', 'read_file', 'read_file', 'read_file', 'calculator']);
  });

  it('--resume of an unknown id says so and exits 2', async () => {
    const exit = await run(DEMO, ['--resume', 'demo-none']);
    expect(exit.code).toBe(2);
    expect(exit.stderr).toContain('no session demo-none');
  });
});

/**
 * The CLI as a shell or a CI script runs it, with what goes wrong outside it: an `--agent` module
 * that never finishes loading, a stdout that cannot be written (a full disk). Each ends with one line on stderr
 * and a non-zero status, never a silent 0 or a stack.
 */
import { spawnSync } from 'node:child_process';
import { closeSync, existsSync, mkdtempSync, openSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAgentMachine } from '../../machines/agent.machine.js';
import { scriptedModel } from '../../src/models/scripted.js';
import { DurableSession } from '../../src/sessions/durable-session.js';
import { SqliteSessionStore } from '../../src/stores/sqlite.js';
import { bundledCommand, REPO, runNode, type NodeCommand } from '../sessions/fixtures/processes.js';

const dir = mkdtempSync(join(tmpdir(), 'loopchart-cli-outside-'));
const db = join(dir, 'sessions.db');
let cli: NodeCommand;
beforeAll(async () => {
  cli = await bundledCommand(join(REPO, 'src/cli.ts'));
  const store = new SqliteSessionStore({ path: db });
  const session = await DurableSession.open({ machine: createAgentMachine({ model: scriptedModel([{ text: 'Done.' }]) }), store, sessionId: 'at-rest' });
  session.send({ type: 'input', message: 'Hello.' });
  await session.whenIdle();
  await session.close();
  await store.close();
});
afterAll(() => {
  cli?.dispose();
  rmSync(dir, { recursive: true, force: true });
});

const loopchart = (args: string[]) => runNode([...cli.args, ...args], { cwd: dir, timeoutMs: 20_000 });

describe('an --agent module that never finishes loading', () => {
  // Its top-level await waits on a promise nothing settles: the event loop empties mid-import.
  const stuck = join(dir, 'stuck.mjs');
  beforeAll(() => writeFileSync(stuck, 'await new Promise(() => {});\nexport const agent = {};\nexport const agents = {};\n'));

  it('sessions send says so and exits 1 (it exited 0 having printed nothing)', async () => {
    const run = await loopchart(['sessions', 'send', 'at-rest', 'Go on.', '--agent', stuck, '--store', db]);
    expect(run.lines).toEqual([]);
    expect(run.stderr).toBe(`loopchart: the agent module ${stuck} never finished loading: its top-level await waits on something that never settles\n`);
    expect(run.code).toBe(1);
  });

  it('the scheduler says so and exits 1', async () => {
    const run = await loopchart(['scheduler', '--agents', stuck, '--store', db]);
    expect(run.stderr).toMatch(/^loopchart: the agent module .*stuck\.mjs never finished loading/);
    expect(run.code).toBe(1);
  });
});

describe('a stdout that cannot be written', () => {
  // /dev/full refuses every write with ENOSPC: a redirect to a file on a full disk.
  it.skipIf(!existsSync('/dev/full'))('is one line on stderr naming it, exit 1 (it was a stack trace)', () => {
    const full = openSync('/dev/full', 'w');
    try {
      const run = spawnSync(process.execPath, [...cli.args, 'sessions', 'list', '--store', db], { cwd: dir, stdio: ['ignore', full, 'pipe'], encoding: 'utf8', timeout: 20_000 });
      expect(run.stderr).toBe('loopchart: cannot write to stdout: no space left on device (ENOSPC)\n');
      expect(run.status).toBe(1);
    } finally {
      closeSync(full);
    }
  });
});

describe('an error the agent\'s code throws where nothing catches it', () => {
  // A timer the model starts throws after the call returned: Node's default printed its stack.
  const late = join(dir, 'late.mjs');
  beforeAll(() =>
    writeFileSync(
      late,
      "export const agent = { model: { name: 'late', generate: async () => { setTimeout(() => { throw new Error('late throw from a timer'); }, 0); return { message: { role: 'assistant', content: 'ok' } }; } } };\n",
    ),
  );

  it('is one line without a stack, exit 1; the stack with LOOPCHART_DEBUG=1', async () => {
    const run = await loopchart(['sessions', 'send', 'at-rest', 'Go on.', '--agent', late, '--store', db]);
    expect(run.stderr).toBe('loopchart: uncaught error (in the agent\'s code?): Error: late throw from a timer (LOOPCHART_DEBUG=1 prints the stack)\n');
    expect(run.code).toBe(1);
    const debug = await runNode([...cli.args, 'sessions', 'send', 'at-rest', 'Go on.', '--agent', late, '--store', db], { cwd: dir, timeoutMs: 20_000, env: { LOOPCHART_DEBUG: '1' } });
    expect(debug.stderr).toMatch(/^loopchart: uncaught error .*\nError: late throw from a timer\n {4}at /);
    expect(debug.code).toBe(1);
  });
});

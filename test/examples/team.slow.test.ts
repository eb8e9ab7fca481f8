/**
 * examples/team.ts: a coordinator with two specialists (one needs approval) and a handoff, as a
 * durable session on SQLite. Killed inside the researcher's search, it resumes from the folder:
 * the search runs again (it was in flight), no finished step does, the writer's approval is asked
 * and given in the new process, and the closer answers.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bundledCommand, type NodeCommand } from '../sessions/fixtures/processes.js';

// The example as a bundle run by node itself (see bundledCommand: a third of tsx's start-up CPU),
// one process (tsx's CLI would run the script in a child that a SIGKILL misses).
let team: NodeCommand;
const dir = mkdtempSync(join(tmpdir(), 'loopchart-team-test-'));
beforeAll(async () => {
  team = await bundledCommand(fileURLToPath(new URL('../../examples/team.ts', import.meta.url)));
});
afterAll(() => {
  team?.dispose();
  rmSync(dir, { recursive: true, force: true });
});

function run(killWhen?: RegExp): Promise<{ code: number | null; signal: NodeJS.Signals | null; lines: string[] }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...team.args, '--dir', dir], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString('utf8');
      if (killWhen?.test(stdout)) child.kill('SIGKILL');
    });
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    const timer = setTimeout(() => (child.kill('SIGKILL'), reject(new Error(`examples/team.ts did not exit within 40 s\n${stdout}\n${stderr}`))), 40_000);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      if (code !== 0 && signal !== 'SIGKILL') reject(new Error(`exit ${code}\n${stdout}\n${stderr}`));
      resolve({ code, signal, lines: stdout.trim().split('\n').map((line) => line.replace(/\s+/, ' ')) });
    });
  });
}

describe('examples/team.ts', () => {
  it('killed inside a specialist, resumed from its folder: the child goes on where it was and the closer answers', async () => {
    const killed = await run(/searching the notes/);
    expect(killed.signal).toBe('SIGKILL');
    expect(killed.lines.slice(1)).toEqual(['coordinator thinking (call 1)', 'researcher thinking (call 1)', 'researcher searching the notes for "lobby"']);

    const resumed = await run();
    expect(resumed.code).toBe(0);
    expect(resumed.lines).toEqual([
      `team resuming the session in ${dir}`,
      // The search was in flight: it runs again; the calls before it do not.
      'researcher searching the notes for "lobby"',
      'researcher thinking (call 2)',
      'coordinator thinking (call 2)',
      'writer thinking (call 1)',
      'reviewer approving publish (c2/p1)',
      'writer published: Tea at 4 in the lobby, from Monday.',
      'writer thinking (call 2)',
      'coordinator thinking (call 3)',
      'team coordinator hands the conversation to closer',
      'closer thinking (call 1)',
      'team outcome: {"type":"Completed","finalText":"Done: the tea announcement is published."}',
      'team sessions: team, team/run-1:turn-1:c1, team/run-1:turn-2:c2',
    ]);
  }, 90_000);
});

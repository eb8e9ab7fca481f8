/**
 * examples/guarded-agent.ts (issue 21 item 6): the demo agent with structured output, an input
 * and an output guardrail, a tool policy, a model fallback list and repetition detection, run as
 * a real child process; what it prints, and what its SQLite file holds afterwards.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { replaySession } from '../../src/sessions/replay.js';
import { readSessionTrace } from '../../src/sessions/trace.js';
import { SqliteSessionStore } from '../../src/stores/sqlite.js';
import { bundledCommand, type NodeCommand } from '../sessions/fixtures/processes.js';

const dir = mkdtempSync(join(tmpdir(), 'loopchart-guarded-test-'));
/** The example as a bundle (see bundledCommand: a third of tsx's start-up CPU). */
let example: NodeCommand;
beforeAll(async () => {
  example = await bundledCommand(fileURLToPath(new URL('../../examples/guarded-agent.ts', import.meta.url)));
});
afterAll(() => {
  example?.dispose();
  rmSync(dir, { recursive: true, force: true });
});

function run(): Promise<{ code: number | null; lines: string[]; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...example.args, '--dir', dir], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    const timer = setTimeout(() => (child.kill('SIGKILL'), reject(new Error(`examples/guarded-agent.ts did not exit within 30 s\n${stdout}\n${stderr}`))), 30_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stderr, lines: stdout.trim().split('\n').map((line) => line.replace(/ {2,}/, ' ')) });
    });
  });
}

describe('examples/guarded-agent.ts', () => {
  it('prints the account of both runs and stores them with their trace', async () => {
    const { code, lines, stderr } = await run();
    expect(code, stderr).toBe(0);
    expect(lines).toEqual([
      'fallback primary → backup (server-error)',
      'tool read_file {"path":"secrets.txt"} → denied: read_file: path "secrets.txt" is outside the allowed roots',
      'tool search {"query":"refund"} → no results for "refund"',
      'tool search {"query":"refund"} → no results for "refund"',
      'repetition search asked for 3 times in a row: the model got a note',
      expect.stringMatching(/^tool search \{"query":"refund"\} → error: not run\. This is the 3rd time in a row/),
      'tool read_file {"path":"docs/refunds.md"} → Refunds are paid within 5 working days.',
      'guardrail feedback on turn 6: Cite the docs file you read (source: docs/...).',
      'run 1 Completed {"answer":"Refunds take 5 working days.","source":"docs/refunds.md"}',
      'guardrail no-keys tripped on the input: {"found":"api key"}',
      'run 2 Failed GuardrailTripped',
      `stored ${join(dir, 'guarded.db')} (session 'support': its conversation, the outcome of each run and its trace)`,
    ]);

    const store = new SqliteSessionStore({ path: join(dir, 'guarded.db') });
    try {
      // Feedback, a final_answer answer and a policy denial: replay re-runs it all with no divergence.
      expect((await replaySession(store, 'support')).divergence).toBeNull();
      const entries = (await readSessionTrace(store, 'support')).flatMap((record) => ('entry' in record ? [record.entry] : []));
      expect(entries.filter((e) => e.type === 'guardrail').map((e) => `${e.run} ${e.name} ${e.verdict?.type}`)).toEqual([
        '1 no-keys pass',
        '1 cites-docs feedback',
        '1 cites-docs pass',
        '2 no-keys trip',
      ]);
      // Run 2 never reached a model; run 1 went to the backup after the primary's 503.
      expect(entries.filter((e) => e.type === 'model' && e.run === 2)).toEqual([]);
      expect(entries.filter((e) => e.type === 'fallback').map((e) => `${e.from}→${e.to}`)).toEqual(['primary→backup']);
      expect(entries.filter((e) => e.type === 'repetition').map((e) => e.times)).toEqual([3]);
      const finished = entries.filter((e) => e.type === 'finished').map((e) => e.outcome);
      expect(finished[0]).toEqual({ type: 'Completed', finalText: '{"answer":"Refunds take 5 working days.","source":"docs/refunds.md"}' });
      expect(finished[1]).toMatchObject({ type: 'Failed', error: { type: 'GuardrailTripped', guardrail: { name: 'no-keys', stage: 'input' } } });
      // The committed conversation holds run 1 only: the refused input of run 2 is not in it.
      const stored = await store.load('support');
      // The row keeps the last run's failure with the guardrail that tripped.
      expect((stored?.state as { lastRun?: unknown }).lastRun).toMatchObject({ outcome: { type: 'Failed', error: { guardrail: { name: 'no-keys', info: { found: 'api key' } } } } });
      expect(stored?.messages.filter((m) => m.role === 'user').map((m) => m.content.slice(0, 25))).toEqual([
        'How long do refunds take?',
        'Your answer was not accep',
      ]);
    } finally {
      await store.close();
    }
  }, 60_000);
});

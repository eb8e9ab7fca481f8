/**
 * Operations across processes (issue 15), on SQLite and PostgreSQL: a real child process is
 * SIGKILLed inside an operation's hook; a second process reopens the session, which goes on to
 * the CI gate's yield and stops there; a third sends the CI result (a bad payload first, which is
 * refused) and finishes. The transcript and the operations' state slices equal an uninterrupted
 * run's; a hook that had finished before the kill never runs again, the one in flight once more.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { OperationsTask } from '../../sessions/fixtures/operations-child.js';
import { bundledCommand, runNode, type NodeCommand } from '../../sessions/fixtures/processes.js';
import { openStore, type StoreSpec } from '../../sessions/fixtures/stores.js';

const CHILD = fileURLToPath(new URL('../../sessions/fixtures/operations-child.ts', import.meta.url));
const root = mkdtempSync(join(tmpdir(), 'loopchart-ops-crash-'));
let command: NodeCommand;
beforeAll(async () => {
  command = await bundledCommand(CHILD);
});
afterAll(() => {
  command?.dispose();
  rmSync(root, { recursive: true, force: true });
});

async function child(task: OperationsTask, killAt?: string) {
  const run = await runNode([...command.args, JSON.stringify(task)], {
    env: { KILL_AT: killAt },
    onLine: (line) => (line === 'PAUSED' ? 'kill' : undefined),
  });
  if (killAt ? run.signal !== 'SIGKILL' : run.code !== 0) throw new Error(`child ${task.mode} ended with ${run.code ?? run.signal}: ${run.stderr}`);
  return run;
}

const effectsOf = (path: string) => readFileSync(path, 'utf8').trim().split('\n').sort();

function series(backend: string, store: (name: string) => StoreSpec) {
  return async () => {
    const task = (name: string, mode: OperationsTask['mode']): OperationsTask => ({
      mode,
      store: store(name),
      sessionId: `ops-${name}`,
      effects: join(root, `${backend}-${name}.effects`),
    });
    const reference = await child(task('ref', 'reference'));
    expect(reference.lines).toContain('DONE');

    // Killed inside 'audit' of turn 2: 'count' of turn 2 (listed before it) had finished.
    const killed = await child(task('crash', 'run'), 'audit:2');
    expect(killed.lines.filter((l) => l.startsWith('MARK'))).toEqual(['MARK count:1', 'MARK audit:1', 'MARK count:2', 'MARK audit:2']);
    const waiting = await child(task('crash', 'wait'));
    const yielded = waiting.lines.find((l) => l.startsWith('YIELDED '))!;
    expect(JSON.parse(yielded.slice('YIELDED '.length))).toEqual({
      operation: 'ci-gate',
      reason: 'ci-result',
      payload: { calls: ['call_2_0'] },
      key: 'ops-crash:run-1:turn-2:tools:before',
    });
    const resumed = await child(task('crash', 'resume'));
    expect(resumed.lines.filter((l) => l.startsWith('REJECTED'))).toEqual(["REJECTED payload for 'ci-gate': ✖ Invalid option: expected one of \"passed\"|\"failed\""]);
    expect(resumed.lines).toContain('DONE');

    const inspect = await openStore(store('check'));
    try {
      const ref = (await inspect.load('ops-ref'))!;
      const crashed = (await inspect.load('ops-crash'))!;
      expect(crashed.messages).toEqual(ref.messages);
      const slices = (state: unknown) => (state as { operations: { slices: unknown } }).operations.slices;
      expect(slices(crashed.state)).toEqual(slices(ref.state));
      expect(slices(crashed.state)).toEqual({
        'ci-gate': { results: [{ status: 'passed', url: 'https://ci.example/1' }] },
        ticket: { id: 'T-1', status: 'answered', toolsUsed: ['lookup', 'deploy'], replies: 3 },
      });
    } finally {
      await inspect.close();
    }
    expect(effectsOf(join(root, `${backend}-ref.effects`))).toEqual(['audit 1', 'audit 2', 'audit 3', 'count 1', 'count 2', 'count 3']);
    // 'audit 2' was in flight at the kill: it ran once more. Nothing else ran twice.
    expect(effectsOf(join(root, `${backend}-crash.effects`))).toEqual(['audit 1', 'audit 2', 'audit 2', 'audit 3', 'count 1', 'count 2', 'count 3']);
  };
}

describe('operations across a SIGKILL and three processes', () => {
  it('sqlite: slices and transcript as uninterrupted, a finished hook never again, a yield resumed in another process', series('sqlite', () => ({ kind: 'sqlite', path: join(root, 'ops.db') })), 120_000);

  const url = process.env.DATABASE_URL;
  describe.skipIf(!url)('postgres', () => {
    const schema = `lc_ops_${process.pid}_${Date.now().toString(36)}`;
    afterAll(async () => {
      const admin = new pg.Pool({ connectionString: url, max: 1 });
      await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await admin.end();
    });
    it('the same on PostgreSQL', series('postgres', () => ({ kind: 'postgres', url: url!, schema })), 120_000);
  });
});

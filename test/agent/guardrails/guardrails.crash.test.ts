import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SqliteSessionStore } from '../../../src/stores/sqlite.js';
import { readSessionTrace } from '../../../src/sessions/trace.js';
import { bundledCommand, runNode, type NodeCommand } from '../../sessions/fixtures/processes.js';

/**
 * A guardrail that passed is not run again after a crash (issue 21 item 2): process A's input
 * guardrail passes (it counts itself in a file), A is killed by SIGKILL while its model call
 * is in flight, before any reply is stored; process B reopens the session and finishes the run
 * without running the guardrail again.
 */

const dir = mkdtempSync(join(tmpdir(), 'loopchart-guard-crash-'));
let child: NodeCommand;
// One bundle for both processes: a child starts without the on-the-fly transform.
beforeAll(async () => void (child = await bundledCommand(join(import.meta.dirname, '..', '..', 'sessions', 'fixtures', 'guard-child.ts'))));
afterAll(() => (child?.dispose(), rmSync(dir, { recursive: true, force: true })));

describe('guardrails across a crash', () => {
  it('an input guardrail that passed before a SIGKILL is not re-run on resume in a new process', async () => {
    const task = { path: join(dir, 'sessions.db'), sessionId: 'guarded', counter: join(dir, 'counter.txt') };
    const a = await runNode([...child.args, JSON.stringify({ ...task, mode: 'start' })], { onLine: (line) => (line === 'MODEL_CALLED' ? 'kill' : undefined) });
    expect(a.signal, a.stderr).toBe('SIGKILL');
    expect(readFileSync(task.counter, 'utf8')).toBe('ran\n');

    const b = await runNode([...child.args, JSON.stringify({ ...task, mode: 'resume' })]);
    expect(b.code, b.stderr).toBe(0);
    const { outcome, guard } = JSON.parse(b.lines.at(-1)!);
    expect(outcome).toEqual({ type: 'Completed', finalText: 'Answered after the crash.' });
    expect(guard).toEqual({ check: null, passed: 'guarded:run-1:guard-input', feedbacks: 0 });
    expect(readFileSync(task.counter, 'utf8')).toBe('ran\n');

    // The verdict is in the trace once, and the trace shows the crash.
    const store = new SqliteSessionStore({ path: task.path });
    try {
      const entries = (await readSessionTrace(store, 'guarded')).flatMap((record) => ('entry' in record ? [record.entry] : []));
      const verdicts = entries.filter((entry) => entry.type === 'guardrail');
      expect(verdicts).toMatchObject([{ name: 'counted', stage: 'input', verdict: { type: 'pass' }, check: 'guarded:run-1:guard-input' }]);
      expect(entries.some((entry) => entry.type === 'resumed')).toBe(true);
    } finally {
      await store.close();
    }
  });
});

/**
 * The promise of docs/concepts.md ("The driver"), across real processes: the agent invoked in a
 * user's statechart is persisted with its parent (`getPersistedSnapshot()` of the parent, as
 * JSON), the first process exits, and another restores the parent and gives the waiting approval
 * through it (`sendTo` the child's id). The run completes once there: the call that finished in the
 * first process is not run again, the approved one runs once with its idempotency key, and the
 * usage counts each model call once.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bundledCommand, runNode, type NodeCommand } from '../../sessions/fixtures/processes.js';

let child: NodeCommand;
const dir = mkdtempSync(join(tmpdir(), 'loopchart-embedded-'));
beforeAll(async () => {
  child = await bundledCommand(fileURLToPath(new URL('./fixtures/embedded-parent.ts', import.meta.url)));
});
afterAll(() => {
  child?.dispose();
  rmSync(dir, { recursive: true, force: true });
});

describe('an agent invoked in a statechart, persisted with it and resumed in another process', () => {
  it('completes once there after an approval sent through the parent; no tool runs twice', async () => {
    const snapshot = join(dir, 'parent.json');
    const log = join(dir, 'tools.log');
    const hold = await runNode([...child.args, 'hold', snapshot, log], { timeoutMs: 30_000 });
    expect(hold.code).toBe(0);
    const resume = await runNode([...child.args, 'resume', snapshot, log], { timeoutMs: 30_000 });
    expect(resume.stderr).toBe('');
    expect(resume.code).toBe(0);

    const seen = JSON.parse(resume.lines.at(-1)!) as { status: string; value: string; output: { outcome: unknown; usage: unknown } };
    expect(seen).toMatchObject({ status: 'done', value: 'Done' });
    expect(seen.output.outcome).toEqual({ type: 'Completed', finalText: 'Done: refunded 7' });
    expect(seen.output.usage).toEqual({ inputTokens: 40, outputTokens: 8 });
    const runs = readFileSync(log, 'utf8').trim().split('\n').map((line) => line.split(' '));
    expect(runs.map(([tool, key]) => `${tool} ${key}`)).toEqual(['lookup ticket-7:run-1:turn-1:tools:l1', 'refund ticket-7:run-1:turn-1:tools:r1']);
    // Each in its process: lookup before the snapshot, refund after the restore.
    expect(runs[0]![2]).not.toBe(runs[1]![2]);
  });
});

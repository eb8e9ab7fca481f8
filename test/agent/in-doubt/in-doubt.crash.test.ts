/**
 * Tools in doubt (issue 26 item 2): a process SIGKILLed while three calls of one tool run, then
 * the session reopened in a new process. A `'rerun'` tool runs its calls again with the same
 * idempotency keys; an `'ask'` tool runs nothing and waits, and a third process decides each
 * call straight in the store (run it again, a hand result, fail it; bad decisions refused): the
 * process that reopens the session after that does what was decided, and the model sees it.
 * On SQLite, and on PostgreSQL when DATABASE_URL is set.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ApprovalRequest } from '../../../src/agent/approvals/approval-binding.js';
import { readSessionTrace } from '../../../src/sessions/trace.js';
import { main } from '../../../src/cli/main.js';
import { runChild, tagged, type ChildRun } from '../approvals/fixtures/processes.js';
import { bundledCommand, type NodeCommand } from '../../sessions/fixtures/processes.js';
import { openStore, type StoreSpec } from '../../sessions/fixtures/stores.js';

const CHILD = fileURLToPath(new URL('../../sessions/fixtures/doubt-child.ts', import.meta.url));
const root = mkdtempSync(join(tmpdir(), 'loopchart-doubt-'));
let command: NodeCommand;
beforeAll(async () => {
  command = await bundledCommand(CHILD);
});
afterAll(() => {
  command?.dispose();
  rmSync(root, { recursive: true, force: true });
});

const stores: [string, (name: string) => StoreSpec][] = [['SQLite', (name) => ({ kind: 'sqlite', path: join(root, `${name}.db`) })]];
if (process.env.DATABASE_URL) {
  const schema = `doubt_${process.pid}`;
  stores.push(['PostgreSQL', () => ({ kind: 'postgres', url: process.env.DATABASE_URL!, schema })]);
}

const child = (task: Record<string, unknown>, kill = false): Promise<ChildRun> => {
  let started = 0;
  return runChild(command, [JSON.stringify(task)], { timeoutMs: 60_000, ...(kill && { onLine: (line) => (line.startsWith('TOOL STARTED') && ++started === 3 ? 'kill' : undefined) }) });
};
const keysRun = (run: ChildRun) => run.lines.filter((line) => line.startsWith('TOOL STARTED ')).map((line) => line.slice('TOOL STARTED '.length)).sort();
const ok = (run: ChildRun) => (expect(run.code, run.stderr).toBe(0), run);
/** The CLI, in this process: its exit code and what it printed. */
async function cli(store: StoreSpec, ...args: string[]): Promise<{ code: number; out: string }> {
  const lines: string[] = [];
  const where = store.kind === 'sqlite' ? ['--store', store.path] : ['--store', store.url, '--schema', store.schema];
  const code = await main(['sessions', ...args, ...where], { out: (line) => lines.push(line), err: (line) => lines.push(line) });
  return { code, out: lines.join('\n') };
}

describe.each(stores)('a tool in doubt after a SIGKILL (%s)', (_name, spec) => {
  it("'rerun': the resumed process runs each call again with the same idempotency key", async () => {
    const store = spec('rerun');
    const sessionId = `rerun-${process.pid}`;
    const first = await child({ store, sessionId, policy: 'rerun', mode: 'start' }, true);
    expect(first.signal).toBe('SIGKILL');
    const keys = keysRun(first);
    expect(keys).toHaveLength(3);
    const resumed = ok(await child({ store, sessionId, policy: 'rerun', mode: 'resume' }));
    expect(keysRun(resumed)).toEqual(keys);
    expect(resumed.lines.at(-1)).toBe('DONE model saw: paid 1 | paid 2 | paid 3');
  });

  it("'ask': the resumed process runs nothing and waits; decisions from another process reach the model", async () => {
    const store = spec('ask');
    const sessionId = `ask-${process.pid}`;
    const first = await child({ store, sessionId, policy: 'ask', mode: 'start' }, true);
    expect(first.signal).toBe('SIGKILL');
    const keys = keysRun(first);

    const waiting = ok(await child({ store, sessionId, policy: 'ask', mode: 'resume' }));
    expect(keysRun(waiting)).toEqual([]);
    const requests = tagged<ApprovalRequest[]>(waiting, 'IN DOUBT')!;
    expect(requests.map((r) => r.toolCallId).sort()).toEqual(['pay1', 'pay2', 'pay3']);
    const request = (id: string) => requests.find((r) => r.toolCallId === id)!;

    const decided = ok(
      await child({
        store,
        sessionId,
        policy: 'ask',
        mode: 'decide',
        decisions: [
          { request: { ...request('pay1'), digest: 'f'.repeat(64) }, verdict: { action: 'rerun' } },
          { request: request('pay1'), verdict: { action: 'rerun', by: 'ana' } },
          { request: request('pay1'), verdict: { action: 'fail', by: 'bob' } },
          { request: { ...request('pay2'), toolCallId: 'nope' }, verdict: { action: 'fail' } },
          { request: request('pay2'), verdict: { action: 'result' } },
          { request: request('pay2'), verdict: { action: 'result', result: { receipt: 'r-2' }, by: 'ana', reason: 'the bank shows it paid' } },
        ],
      }),
    );
    expect(decided.lines).toEqual([
      'REFUSED pay1 changed',
      'DECIDED pay1',
      'REFUSED pay1 already-decided',
      'REFUSED nope unknown-call',
      'REFUSED pay2 InvalidFeed',
      'DECIDED pay2',
    ]);
    // The CLI shows what waits, and decides the last one (a call not in doubt is refused).
    expect((await cli(store, 'show', sessionId)).out).toMatch(/in doubt after a restart \(started, no result\): pay3/);
    expect(await cli(store, 'doubt', sessionId, 'pay1', 'rerun')).toMatchObject({ code: 1, out: expect.stringContaining('already-decided') });
    expect(await cli(store, 'doubt', sessionId, 'pay3', 'fail', 'not paid, do not retry', '--by', 'ana')).toMatchObject({ code: 0 });

    const resumed = ok(await child({ store, sessionId, policy: 'ask', mode: 'resume' }));
    // Only the call decided 'rerun' runs again, with its own idempotency key.
    expect(keysRun(resumed)).toEqual(keys.filter((key) => key.endsWith(':pay1')));
    expect(resumed.lines.at(-1)).toBe('DONE model saw: paid 1 | {"receipt":"r-2"} | failed: not paid, do not retry');

    const opened = await openStore(store);
    const trace = (await readSessionTrace(opened, sessionId)).flatMap((r) => ('entry' in r ? [r.entry] : []));
    await opened.close();
    const doubts = trace.filter((e) => e.type === 'doubt' || e.type === 'doubt.refused').map((e) => [e.type, e.toolCallId, e.action, 'refusal' in e ? e.refusal : e.by]);
    expect(doubts).toEqual([
      ['doubt.refused', 'pay1', 'rerun', 'changed'],
      ['doubt', 'pay1', 'rerun', 'ana'],
      ['doubt.refused', 'pay1', 'fail', 'already-decided'],
      ['doubt.refused', 'nope', 'fail', 'unknown-call'],
      ['doubt', 'pay2', 'result', 'ana'],
      ['doubt.refused', 'pay1', 'rerun', 'already-decided'],
      ['doubt', 'pay3', 'fail', 'ana'],
    ]);
    expect(trace.some((e) => e.type === 'doubt.requested')).toBe(true);
  });
});

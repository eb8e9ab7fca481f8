/**
 * `loopchart scheduler` as a real process on a SQLite file: a schedule due now fires once (one line
 * printed), SIGTERM stops it with exit code 0; a run still going when the grace ends is let go (its
 * lease given back) and the next scheduler continues it, its input sent once.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createAgentMachine } from '../../src/index.js';
import { listSchedules, schedule, startScheduler } from '../../src/schedules.js';
import { SqliteSessionStore } from '../../src/sqlite.js';
import { scriptedModel } from '../../src/testing.js';
import { REPO, startNode, tsxCommand, type RunningChild } from '../sessions/fixtures/processes.js';

const dir = mkdtempSync(join(tmpdir(), 'loopchart-scheduler-cli-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const AGENTS = join(REPO, 'test/schedules/fixtures/scheduler-agents.ts');
let files = 0;

/** `loopchart scheduler` on `db`, resolved once it says it fires (its first line). */
async function scheduler(db: string, extra: string[] = []): Promise<RunningChild> {
  let started!: () => void;
  const ready = new Promise<void>((resolve) => (started = resolve));
  const child = startNode([...tsxCommand(join(REPO, 'src/cli.ts')).args, 'scheduler', '--agents', AGENTS, '--store', db, ...extra], {
    onLine: (line) => void (line.startsWith('loopchart scheduler: ') && started()),
    timeoutMs: 60_000,
  });
  await Promise.race([ready, child.done.then((run) => Promise.reject(new Error(`the scheduler exited with ${run.code}: ${run.stderr}`)))]);
  return child;
}

async function until(check: () => boolean | Promise<boolean>, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await check()) return true;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return check();
}

describe('loopchart scheduler', () => {
  it('fires a schedule due now once, printing one line for it; SIGTERM stops it with exit code 0', async () => {
    const db = join(dir, `s${files++}.db`);
    const store = new SqliteSessionStore({ path: db });
    try {
      await schedule(store, { id: 'now', session: 'ticket-7', agent: 'ticker', input: 'Check the ticket.', at: Date.now() });
      await schedule(store, { id: 'later', session: 'ticket-8', agent: 'ticker', input: 'Not yet.', every: 3_600_000 });
      const child = await scheduler(db);
      expect(await until(() => child.lines.some((line) => line.includes(' now -> ticket-7 ')), 20_000), child.lines.join('\n')).toBe(true);
      process.kill(child.pid, 'SIGTERM');
      const run = await child.done;
      expect(run.code, run.stderr).toBe(0);
      const ticks = run.lines.filter((line) => / -> /.test(line));
      expect(ticks).toHaveLength(1);
      expect(ticks[0]).toMatch(/^20\d\d-\S+Z {2}now -> ticket-7 {2}due 20\d\d-\S+Z {2}Completed {2}next -$/);
      expect(run.stderr).toMatch(/SIGTERM: no more claims/);
      expect(run.stderr).toMatch(/stopped$/m);
      const [now, later] = await listSchedules(store);
      expect(now).toMatchObject({ runs: 1, lastOutcome: 'Completed', nextAt: null, firingBy: null });
      expect(later).toMatchObject({ runs: 0, lastOutcome: null });
      expect((await store.load('ticket-7'))!.messages.map((m) => `${m.role}: ${String(m.content)}`)).toEqual(['user: Check the ticket.', 'assistant: ticked']);
    } finally {
      await store.close();
    }
  }, 60_000);

  it('a run still going when the grace ends is let go: the lease given back, the next scheduler continues it, the input sent once', async () => {
    const db = join(dir, `s${files++}.db`);
    const store = new SqliteSessionStore({ path: db });
    try {
      await schedule(store, { id: 'long', session: 'long', agent: 'slow', input: 'Take your time.', at: Date.now() });
      const child = await scheduler(db, ['--grace-ms', '300']);
      // The tick has fired: its input is stored and the 20 s model call is under way.
      expect(await until(async () => ((await store.load('long'))?.messages.length ?? 0) >= 1, 20_000)).toBe(true);
      const stopping = Date.now();
      process.kill(child.pid, 'SIGTERM');
      const run = await child.done;
      expect(run.code, run.stderr).toBe(0);
      expect(Date.now() - stopping).toBeLessThan(10_000);
      expect(run.lines.filter((line) => / -> /.test(line))).toEqual([expect.stringMatching(/ long -> long {2}due \S+ {2}Released {2}next /)]);
      // Given back at once, not left to expire (30 s): claimable now, nothing recorded as run.
      expect((await listSchedules(store))[0]).toMatchObject({ firingBy: null, runs: 0, lastOutcome: null });
      const next = await startScheduler({ store, agents: { slow: createAgentMachine({ model: scriptedModel([{ text: 'slowly done' }]) }) }, maxIdleMs: 100 });
      try {
        expect(await until(async () => (await listSchedules(store))[0]!.lastOutcome === 'Completed', 20_000)).toBe(true);
      } finally {
        await next.stop();
      }
      expect((await listSchedules(store))[0]).toMatchObject({ runs: 1, nextAt: null, firingBy: null });
      expect((await store.load('long'))!.messages.map((m) => `${m.role}: ${String(m.content)}`)).toEqual(['user: Take your time.', 'assistant: slowly done']);
    } finally {
      await store.close();
    }
  }, 60_000);
});

/**
 * The scheduler with 10,000 schedules on a SQLite file (issue 44's measure): how long storing them
 * takes, the scheduler's CPU while idle (scaled to a minute), and the delay from a tick's due time
 * to its run's start. The 10,000 are cron schedules far from due; one one-off falls due while the
 * scheduler idles.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createAgentMachine } from '../src/index.js';
import { listSchedules, schedule, startScheduler } from '../src/schedules.js';
import { SqliteSessionStore } from '../src/sqlite.js';
import { scriptedModel } from '../src/testing.js';
import { printTable } from './support.js';

const SCHEDULES = 10_000;
const IDLE_MS = 10_000;

export async function run(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'loopchart-schedules-bench-'));
  const store = new SqliteSessionStore({ path: join(dir, 'loopchart.db') });
  try {
    const agent = createAgentMachine({ model: scriptedModel([{ text: 'done' }]) });
    let started = performance.now();
    for (let i = 0; i < SCHEDULES; i++) {
      await schedule(store, { id: `s${i}`, session: `s${i}`, agent: 'agent', input: 'Go.', cron: `${i % 60} ${i % 24} 1 1 *`, timezone: 'Europe/Paris' });
    }
    const storeMs = performance.now() - started;
    const due = Date.now() + IDLE_MS + 3_000;
    await schedule(store, { id: 'due', session: 'due', agent: 'agent', input: 'Go.', at: due });
    // What this process costs idle without a scheduler, for the baseline.
    const idleCpu = async () => {
      const cpu = process.cpuUsage();
      const from = performance.now();
      await new Promise((resolve) => setTimeout(resolve, IDLE_MS / 2));
      const used = process.cpuUsage(cpu);
      return ((used.user + used.system) / 1000) * (60_000 / (performance.now() - from));
    };
    const baseline = await idleCpu();
    const scheduler = await startScheduler({ store, agents: { agent } });
    // Idle: nothing is due for a while (the first look, at the start, is outside the window).
    await new Promise((resolve) => setTimeout(resolve, 200));
    const idleCpuMsPerMinute = await idleCpu();
    // Polled through the session (cheap), not the schedule list (10,000 rows), so the poll does not hold the loop.
    for (let i = 0; i < 1_000 && (await store.load('due')) === undefined; i++) await new Promise((resolve) => setTimeout(resolve, 25));
    await scheduler.stop();
    const fired = (await listSchedules(store)).find((s) => s.id === 'due')!.lastFiredAt;
    printTable(
      `loopchart/schedules: ${SCHEDULES.toLocaleString('en')} schedules on SQLite`,
      ['measure', 'value'],
      [
        ['store 10,000 schedules (one schedule() each)', `${(storeMs / 1000).toFixed(1)} s (${((storeMs * 1000) / SCHEDULES).toFixed(0)} µs each)`],
        ['scheduler CPU while idle', `${idleCpuMsPerMinute.toFixed(1)} ms per minute (this process without it: ${baseline.toFixed(1)})`],
        ['due time -> run started', fired ? `${fired.getTime() - due} ms` : 'did not fire'],
      ],
    );
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

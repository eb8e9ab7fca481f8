/**
 * `npm run bench:restate` (needs `npm run setup:restate`): the same 200 sessions (3 model calls and
 * 3 tool calls each, model delays 0-20 ms) run on Restate with 1 worker, with 2 workers behind a
 * load balancer, and in one process on SQLite (DurableSession). Prints sessions per second and the
 * time each step adds: the gap between one step's end and the next step's start in a session
 * (the brain's decision, the journal or the store commit, the hop to the worker), p50 and p99.
 * First unloaded (sessions one after the other), then 200 at once. Then the server's RSS and data
 * dir after the 2-worker run. Not a test: read it side by side.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DurableSession } from '../src/index.js';
import { SqliteSessionStore } from '../src/stores/sqlite.js';
import { fixtureMachine } from '../test/distributed/fixtures/agent.js';
import { startBalancer } from '../test/distributed/support/balancer.js';
import { IngressClient } from '../test/distributed/support/ingress.js';
import { RestateServer, restateServerBinary } from '../test/distributed/support/server.js';
import { startWorker } from '../test/distributed/support/workers.js';
import { printTable } from './support.js';

const SESSIONS = Number(process.env.SESSIONS ?? 200);
/** Unloaded: this many sessions one after the other, for the latency a step adds without queueing. */
const SEQUENTIAL = 20;
const binary = restateServerBinary();
if (!binary) {
  console.error('no Restate server: run `npm run setup:restate` first');
  process.exit(1);
}

interface Trace {
  key: string;
  start: number;
  end: number;
}

/** The gaps between a session's phases (model, tool batch, model, tool, model): time the framework added. */
function stepGaps(traceFile: string): number[] {
  const bySession = new Map<string, Trace[]>();
  for (const line of readFileSync(traceFile, 'utf8').split('\n').filter(Boolean)) {
    const trace = JSON.parse(line) as Trace;
    const session = trace.key.split(':')[0]!;
    bySession.set(session, [...(bySession.get(session) ?? []), trace]);
  }
  const gaps: number[] = [];
  for (const traces of bySession.values()) {
    // A phase: the model call of a turn, or the tool calls of its batch (same key up to ':tools').
    const phases = new Map<string, { start: number; end: number }>();
    for (const trace of traces) {
      const phase = trace.key.replace(/:tools:.*$/, ':tools');
      const known = phases.get(phase);
      // A step re-run after a crash counts from its last run.
      phases.set(phase, known ? { start: Math.max(known.start, trace.start), end: Math.max(known.end, trace.end) } : { start: trace.start, end: trace.end });
    }
    const ordered = [...phases.values()].sort((a, b) => a.start - b.start);
    for (let i = 1; i < ordered.length; i++) gaps.push(ordered[i]!.start - ordered[i - 1]!.end);
  }
  return gaps.sort((a, b) => a - b);
}

const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;

/** Runs `count` sessions, all at once or one after the other. */
async function drive(count: number, concurrent: boolean, one: (i: number) => Promise<unknown>): Promise<number> {
  const started = performance.now();
  if (concurrent) await Promise.all(Array.from({ length: count }, (_, i) => one(i)));
  else for (let i = 0; i < count; i++) await one(i);
  return (performance.now() - started) / 1000;
}

async function onRestate(workerCount: number, dir: string, count: number, concurrent: boolean): Promise<{ seconds: number; gaps: number[]; rss: number; dataDir: number }> {
  const traceLog = join(dir, `trace-${workerCount}-${concurrent}.log`);
  const server = await RestateServer.start(binary!);
  const workers = await Promise.all(Array.from({ length: workerCount }, () => startWorker({ TOOL_LOG: join(dir, 'tools.log'), TRACE_LOG: traceLog })));
  const balancer = workerCount > 1 ? await startBalancer(workers.map((worker) => worker.url)) : undefined;
  try {
    await server.register(balancer?.url ?? workers[0]!.url);
    const client = new IngressClient(server.ingressUrl);
    const seconds = await drive(count, concurrent, (i) => client.ok(`bench-${i}`, 'send', { message: `task ${i}` }, 300_000));
    return { seconds, gaps: stepGaps(traceLog), rss: server.rssBytes(), dataDir: server.dataDirBytes() };
  } finally {
    await Promise.all(workers.map((worker) => worker.kill('SIGTERM')));
    await balancer?.close();
    await server.stop();
  }
}

async function onSqlite(dir: string, count: number, concurrent: boolean): Promise<{ seconds: number; gaps: number[] }> {
  const traceLog = join(dir, `trace-sqlite-${concurrent}.log`);
  const store = new SqliteSessionStore({ path: join(dir, `bench-${concurrent}.db`) });
  const machine = fixtureMachine({ toolLog: join(dir, 'tools-sqlite.log'), traceLog });
  const seconds = await drive(count, concurrent, async (i) => {
    const session = await DurableSession.open({ machine, store, sessionId: `bench-${i}` });
    session.send({ type: 'input', message: `task ${i}` });
    await session.whenIdle();
    await session.close();
  });
  await store.close();
  return { seconds, gaps: stepGaps(traceLog) };
}

const dir = mkdtempSync(join(tmpdir(), 'loopchart-bench-restate-'));
try {
  const row = (name: string, count: number, r: { seconds: number; gaps: number[] }) => [
    name,
    count / r.seconds,
    percentile(r.gaps, 50),
    percentile(r.gaps, 99),
  ];
  const header = ['where', 'sessions/s', 'p50 ms added per step', 'p99 ms added per step'];
  const sequential = [await onSqlite(dir, SEQUENTIAL, false), await onRestate(1, dir, SEQUENTIAL, false)];
  printTable(`${SEQUENTIAL} sessions one after the other (unloaded), 6 steps each (model delays 0-20 ms)`, header, [
    row('one process, SQLite (DurableSession)', SEQUENTIAL, sequential[0]!),
    row('Restate, 1 worker', SEQUENTIAL, sequential[1]!),
  ]);
  const sqlite = await onSqlite(dir, SESSIONS, true);
  const one = await onRestate(1, dir, SESSIONS, true);
  const two = await onRestate(2, dir, SESSIONS, true);
  printTable(`${SESSIONS} concurrent sessions, 6 steps each (model delays 0-20 ms)`, header, [
    row('one process, SQLite (DurableSession)', SESSIONS, sqlite),
    row('Restate, 1 worker', SESSIONS, one),
    row('Restate, 2 workers (load balancer)', SESSIONS, two),
  ]);
  printTable('Restate server after the 2-worker run', ['RSS MiB', 'data dir MiB'], [[two.rss / 2 ** 20, two.dataDir / 2 ** 20]]);
} finally {
  rmSync(dir, { recursive: true, force: true });
}

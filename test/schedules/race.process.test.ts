/**
 * Several scheduler processes on one store: each tick starts or continues its session once (two
 * processes racing, on a SQLite file and on PostgreSQL when DATABASE_URL is set), and a tick whose
 * scheduler is killed mid-run is taken over when its lease ends and continued, its input not sent again.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { SessionStore } from '../../src/index.js';
import { listSchedules, schedule } from '../../src/schedules.js';
import { SqliteSessionStore } from '../../src/sqlite.js';
import { PostgresSessionStore } from '../../src/stores/postgres.js';
import { bundledCommand, type NodeCommand } from '../sessions/fixtures/processes.js';

/** The scheduler process as a bundle (see bundledCommand: a third of tsx's start-up CPU). */
let scheduler: NodeCommand;
beforeAll(async () => {
  scheduler = await bundledCommand(fileURLToPath(new URL('./fixtures/scheduler.ts', import.meta.url)));
});
afterAll(() => scheduler?.dispose());

const children: ChildProcess[] = [];
/** What the scheduler processes wrote to stderr (their onError reports). */
const errors: string[] = [];
const dirs: string[] = [];
afterEach(() => {
  for (const child of children.splice(0)) child.kill('SIGKILL');
  errors.length = 0;
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function scratchStore(): { path: string; store: SqliteSessionStore } {
  const dir = mkdtempSync(join(tmpdir(), 'loopchart-scheduler-'));
  dirs.push(dir);
  const path = join(dir, 'loopchart.db');
  return { path, store: new SqliteSessionStore({ path }) };
}

const url = process.env.DATABASE_URL;

/** A PostgreSQL schema of its own (dropped after the test): its location, and the env that names the schema. */
async function scratchPostgres(): Promise<{ path: string; env: Record<string, string>; store: PostgresSessionStore; drop: () => Promise<void> }> {
  const schema = `lc_race_${process.pid}_${Date.now().toString(36)}`;
  const store = new PostgresSessionStore({ connectionString: url!, schema, max: 2 });
  const drop = async () => {
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    try {
      await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    } finally {
      await admin.end();
    }
  };
  return { path: url!, env: { LOOPCHART_SCHEMA: schema }, store, drop };
}

/** A scheduler process, resolved once it prints `ready`. */
async function startProcess(path: string, leaseMs: number, env: Record<string, string> = {}): Promise<ChildProcess> {
  const child = spawn(process.execPath, [...scheduler.args, path, String(leaseMs)], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
  children.push(child);
  child.stderr!.on('data', (chunk: Buffer) => errors.push(chunk.toString()));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('the scheduler process did not start within 30 s')), 30_000);
    child.stdout!.on('data', (chunk: Buffer) => chunk.toString().includes('ready') && (clearTimeout(timer), resolve()));
    child.once('exit', (code) => (clearTimeout(timer), reject(new Error(`the scheduler process exited with ${code}`))));
  });
  return child;
}

const stopped = (child: ChildProcess) => new Promise<number | null>((resolve) => (child.exitCode !== null ? resolve(child.exitCode) : child.once('exit', resolve)));

async function until(check: () => Promise<boolean>, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await check()) return true;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return check();
}

/** Two scheduler processes on one store, started together: each tick fires once. */
async function race(path: string, store: SessionStore, env: Record<string, string> = {}): Promise<void> {
  // Made before the processes start: both find them due as they come up.
  await schedule(store, { id: 'once', session: 'once', agent: 'ticker', input: 'Fire once.', at: Date.now() });
  await schedule(store, { id: 'every', session: 'every', agent: 'ticker', input: 'Tick.', every: 1_000 });
  const [a, b] = await Promise.all([startProcess(path, 5_000, env), startProcess(path, 5_000, env)]);
  expect(await until(async () => {
    const [once, every] = await listSchedules(store);
    return once!.runs === 1 && every!.runs >= 3;
  }, 20_000)).toBe(true);
  a.kill('SIGTERM');
  b.kill('SIGTERM');
  expect(await stopped(a)).toBe(0);
  expect(await stopped(b)).toBe(0);
  const [once, every] = await listSchedules(store);
  const users = async (session: string) => (await store.load(session))!.messages.filter((m) => m.role === 'user').length;
  expect(once).toMatchObject({ runs: 1, lastOutcome: 'Completed', nextAt: null });
  expect(await users('once')).toBe(1);
  // Every tick that ran is one input in the session, and no more ticks ran than were due.
  expect(await users('every')).toBe(every!.runs);
  const due = Math.floor((every!.lastFiredAt!.getTime() - (every!.timing as { anchor: number }).anchor) / 1_000);
  expect(every!.runs).toBeLessThanOrEqual(due);
  // Neither process met the other in a session or a lease (what a tick fired twice would cause).
  expect(errors.join('')).toBe('');
}

describe('schedulers in several processes on one store', () => {
  it('two racing schedulers fire each tick once: a one-off runs once, an interval once per tick', async () => {
    const { path, store } = scratchStore();
    try {
      await race(path, store);
    } finally {
      await store.close();
    }
  }, 90_000);

  it.skipIf(!url)('on PostgreSQL too: two racing schedulers fire each tick once', async () => {
    const { path, env, store, drop } = await scratchPostgres();
    try {
      await race(path, store, env);
    } finally {
      await store.close();
      await drop();
    }
  }, 90_000);

  it('a scheduler killed mid-tick: another takes the tick over when the lease ends and continues its run; the input is sent once', async () => {
    const { path, store } = scratchStore();
    try {
      await schedule(store, { id: 'long', session: 'long', agent: 'slow', input: 'Take your time.', at: Date.now() });
      const first = await startProcess(path, 1_000, { SLOW_MS: '60000' });
      // The tick has fired: its input is stored and the model call is under way.
      expect(await until(async () => ((await store.load('long'))?.messages.length ?? 0) >= 1, 20_000)).toBe(true);
      expect((await listSchedules(store))[0]!.firingBy).toMatch(new RegExp(`:${first.pid}:`));
      first.kill('SIGKILL');
      await stopped(first);
      const second = await startProcess(path, 1_000, { SLOW_MS: '200' });
      expect(await until(async () => (await listSchedules(store))[0]!.lastOutcome === 'Completed', 30_000)).toBe(true);
      const [long] = await listSchedules(store);
      expect(long).toMatchObject({ runs: 1, nextAt: null, firingBy: null });
      const messages = (await store.load('long'))!.messages;
      expect(messages.map((m) => `${m.role}: ${String(m.content)}`)).toEqual(['user: Take your time.', 'assistant: slowly done']);
      second.kill('SIGTERM');
      expect(await stopped(second)).toBe(0);
    } finally {
      await store.close();
    }
  }, 90_000);
});

/**
 * One write per durable step (issue 19, item 7): a `DurableSession` step's log, row and trace
 * entries reach the store in one transaction, and so does the result of the tool call that ends
 * a batch (its journal entry would be cleared by that very step). Only a result that arrives
 * while other calls of its batch run on is written between steps, on its own; a retry's entry
 * rides in the step that stores the model call's new attempt. Counted two ways on a real SQLite
 * file: the store calls the session makes, and the transactions committed to the file (commit frames in its write-ahead log); on
 * PostgreSQL (when DATABASE_URL is set) the write transactions its connections run.
 */
import { closeSync, existsSync, mkdtempSync, openSync, readSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createAgentMachine } from '../../machines/agent.machine.js';
import { scriptedModel } from '../../src/models/scripted.js';
import { DurableSession } from '../../src/sessions/durable-session.js';
import { PostgresSessionStore } from '../../src/stores/postgres.js';
import type { SessionStore, StepWrite } from '../../src/stores/session-store.js';
import { SqliteSessionStore } from '../../src/stores/sqlite.js';
import { MemorySessionStore } from '../../src/stores/memory.js';
import { SessionBusyError } from '../../src/stores/errors.js';
import { defineTool } from '../../src/tools/define-tool.js';

const root = mkdtempSync(join(tmpdir(), 'loopchart-step-writes-'));
const url = process.env.DATABASE_URL;
const pgSchema = `lc_step_writes_${process.pid}_${Date.now().toString(36)}`;
let admin: pg.Pool | undefined;

afterAll(async () => {
  rmSync(root, { recursive: true, force: true });
  if (admin) {
    await admin.query(`DROP SCHEMA IF EXISTS "${pgSchema}" CASCADE`);
    await admin.end();
  }
});

type Call = { kind: 'apply'; write: StepWrite } | { kind: 'trace'; entries: readonly unknown[] } | { kind: 'journal'; turnKey: string };

/** The same store, recording every write call the session makes. */
function countingStore(inner: SessionStore): { store: SessionStore; calls: Call[] } {
  const calls: Call[] = [];
  const store: SessionStore = {
    load: (id) => inner.load(id),
    list: () => inner.list(),
    journaledToolResults: (id, key) => inner.journaledToolResults(id, key),
    readTrace: (id, after) => inner.readTrace!(id, after),
    close: () => inner.close(),
    apply(id, write) {
      calls.push({ kind: 'apply', write: structuredClone(write) });
      return inner.apply(id, write);
    },
    appendTrace(id, entries) {
      calls.push({ kind: 'trace', entries: structuredClone(entries) });
      return inner.appendTrace!(id, entries);
    },
    journalToolResult(id, key, result) {
      calls.push({ kind: 'journal', turnKey: key });
      return inner.journalToolResult(id, key, result);
    },
  };
  return { store, calls };
}

/**
 * The transactions committed to a SQLite file so far: the commit frames of its write-ahead log
 * (a frame whose "database size after commit" field is set), counting only frames of the log's
 * current generation (their salts match the header). `generation` changes when a checkpoint
 * restarts the log, which would make two counts incomparable.
 */
function walCommits(dbPath: string): { generation: string; commits: number } {
  const path = `${dbPath}-wal`;
  if (!existsSync(path)) return { generation: 'none', commits: 0 };
  const size = statSync(path).size;
  const fd = openSync(path, 'r');
  try {
    const header = Buffer.alloc(32);
    if (readSync(fd, header, 0, 32, 0) < 32) return { generation: 'empty', commits: 0 };
    const pageSize = header.readUInt32BE(8);
    const salt1 = header.readUInt32BE(16);
    const salt2 = header.readUInt32BE(20);
    const frame = Buffer.alloc(24);
    let commits = 0;
    for (let offset = 32; offset + 24 + pageSize <= size; offset += 24 + pageSize) {
      readSync(fd, frame, 0, 24, offset);
      if (frame.readUInt32BE(8) !== salt1 || frame.readUInt32BE(12) !== salt2) break;
      if (frame.readUInt32BE(4) !== 0) commits++;
    }
    return { generation: `${header.readUInt32BE(12)}:${salt1}:${salt2}`, commits };
  } finally {
    closeSync(fd);
  }
}

const statement = (query: unknown): string =>
  (typeof query === 'string' ? query : ((query as { text?: string } | null)?.text ?? '')).trim().toUpperCase();

/**
 * A pool whose connections count the write transactions they run: a BEGIN … COMMIT holding a
 * write, or one write statement on its own (its own transaction).
 */
function countingPool(connectionString: string): { pool: pg.Pool; writes: () => number } {
  const pool = new pg.Pool({ connectionString, max: 2 });
  pool.on('error', () => {});
  let writes = 0;
  const wrapped = new WeakSet<object>();
  pool.on('connect', (client) => {
    if (wrapped.has(client)) return;
    wrapped.add(client);
    let inTransaction = false;
    let wrote = false;
    const query = client.query.bind(client) as (...args: unknown[]) => unknown;
    (client as { query: unknown }).query = (...args: unknown[]) => {
      const text = statement(args[0]);
      const isWrite = /\b(INSERT|UPDATE|DELETE|CREATE|ALTER|DROP)\b/.test(text);
      if (text.startsWith('BEGIN')) [inTransaction, wrote] = [true, false];
      else if (text === 'COMMIT') {
        if (wrote) writes++;
        inTransaction = false;
      } else if (text === 'ROLLBACK') inTransaction = false;
      else if (isWrite && inTransaction) wrote = true;
      else if (isWrite) writes++;
      return query(...args);
    };
  });
  return { pool, writes: () => writes };
}

const add = defineTool({
  name: 'add',
  description: 'Adds two numbers.',
  input: z.object({ a: z.number(), b: z.number() }),
  execute: ({ a, b }) => String(a + b),
});

/** Three turns: two ask for one tool call each, the third answers. */
const toolScript = () =>
  scriptedModel([
    { toolCalls: [{ name: 'add', args: { a: 1, b: 2 } }] },
    { toolCalls: [{ name: 'add', args: { a: 3, b: 4 } }] },
    { text: '3 and 7.' },
  ]);

interface Backend {
  name: string;
  /** A fresh store and a count of the transactions committed through it so far. */
  open(): Promise<{ store: SessionStore; committed(): number; done(): Promise<void> }>;
}

const backends: Backend[] = [
  {
    name: 'sqlite',
    async open() {
      const path = join(root, `s-${Math.random().toString(36).slice(2)}.db`);
      const store = new SqliteSessionStore({ path });
      const start = walCommits(path);
      return {
        store,
        committed() {
          const now = walCommits(path);
          // A checkpoint restarting the log would reset the count: fail loudly, do not miscount.
          if (start.generation !== 'none') expect(now.generation).toBe(start.generation);
          return now.commits - start.commits;
        },
        done: () => store.close(),
      };
    },
  },
  ...(url
    ? [
        {
          name: 'postgres',
          async open() {
            admin ??= new pg.Pool({ connectionString: url, max: 1 });
            const { pool, writes } = countingPool(url);
            const store = new PostgresSessionStore({ pool, schema: pgSchema });
            await store.list(); // creates the schema: not a step
            const start = writes();
            return {
              store,
              committed: () => writes() - start,
              async done() {
                await store.close();
                await pool.end();
              },
            };
          },
        },
      ]
    : []),
];

/** Runs one prompt through a fresh session; returns the session's write calls and the transactions committed. */
async function runSession(backend: Backend, sessionId: string, model: ReturnType<typeof scriptedModel>, retryDelayMs = 40) {
  const { store: inner, committed, done } = await backend.open();
  const { store, calls } = countingStore(inner);
  try {
    const machine = createAgentMachine({ model, tools: [add], retry: { baseDelayMs: retryDelayMs, maxDelayMs: retryDelayMs } });
    const session = await DurableSession.open({ machine, store, sessionId });
    session.send({ type: 'input', message: 'Add them.' });
    const output = await session.whenIdle();
    await session.close();
    const trace = (await inner.readTrace!(sessionId)).map((record) => record.entry as { type: string; v?: number });
    return { output, calls, transactions: committed(), trace };
  } finally {
    await done();
  }
}

/** The trace entry types a write call carries. */
const typesOf = (call: Call): string[] =>
  (call.kind === 'apply' ? (call.write.trace ?? []) : call.kind === 'trace' ? call.entries : []).map((e) => (e as { type: string }).type);

describe.each(backends)('one write per durable step ($name)', (backend) => {
  it('a run without tools: every step is one transaction holding its log, its row and its trace entries; nothing else is written', async () => {
    const { output, calls, transactions, trace } = await runSession(backend, 'plain', scriptedModel([{ text: 'Hello.' }]));
    expect(output?.outcome).toEqual({ type: 'Completed', finalText: 'Hello.' });
    const steps = calls.filter((call) => call.kind === 'apply');
    expect(steps.length).toBeGreaterThanOrEqual(3);
    expect(calls.filter((call) => call.kind !== 'apply')).toEqual([]);
    expect(transactions).toBe(steps.length);
    // Each step carries the entry that says what it stored, with its own version.
    steps.forEach((call, i) => {
      const entries = (call.write.trace ?? []) as Array<{ type: string; v?: number }>;
      expect(entries.filter((entry) => entry.type === 'step').map((entry) => entry.v)).toEqual([i + 1]);
    });
    // The trace holds everything, in the order it was recorded.
    expect(trace.map((entry) => entry.type)).toEqual(steps.flatMap(typesOf));
    expect(trace.map((entry) => entry.type)).toEqual(expect.arrayContaining(['run', 'model', 'finished', 'step']));
  });

  it("a run with tools: a batch's result goes in the step that takes it into the log; nothing is written between steps", async () => {
    const { output, calls, transactions, trace } = await runSession(backend, 'tools', toolScript());
    expect(output?.outcome).toEqual({ type: 'Completed', finalText: '3 and 7.' });
    const steps = calls.filter((call) => call.kind === 'apply');
    // The tool's result would be journaled and cleared again by the step that logs it: that step carries it, with the tool's trace entry.
    expect(calls.filter((call) => call.kind !== 'apply')).toEqual([]);
    expect(transactions).toBe(steps.length);
    const logging = steps.filter((call) => call.write.append?.some((message) => message.role === 'tool'));
    expect(logging).toHaveLength(2);
    for (const call of logging) {
      expect(typesOf(call)).toContain('tool');
      expect(call.write.clearJournal).toEqual(expect.arrayContaining([expect.stringMatching(/:tools$/)]));
    }
    expect(trace.filter((entry) => entry.type === 'step').map((entry) => entry.v)).toEqual(steps.map((_, i) => i + 1));
    expect(trace.filter((entry) => entry.type === 'tool')).toHaveLength(2);
    expect(trace.filter((entry) => entry.type === 'model')).toHaveLength(3);
  });

  it('a parallel batch: a result that arrives while another call runs is journaled at once, on its own; the last one rides in the step', async () => {
    const { store: inner, committed, done } = await backend.open();
    const { store, calls } = countingStore(inner);
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const slow = defineTool({ name: 'slow', description: 'Waits.', input: z.object({}), execute: async () => (await released, 'late') });
    try {
      const model = scriptedModel([{ toolCalls: [{ name: 'add', args: { a: 1, b: 2 } }, { name: 'slow', args: {} }] }, { text: 'Done.' }]);
      const session = await DurableSession.open({ machine: createAgentMachine({ model, tools: [add, slow] }), store, sessionId: 'parallel' });
      session.send({ type: 'input', message: 'Both.' });
      const deadline = Date.now() + 5_000;
      while (!calls.some((call) => call.kind === 'journal') && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 5));
      const key = calls.flatMap((call) => (call.kind === 'journal' ? [call.turnKey] : []))[0]!;
      expect((await inner.journaledToolResults('parallel', key)).map((result) => result.content)).toEqual(['3']);
      release();
      expect((await session.whenIdle())?.outcome).toEqual({ type: 'Completed', finalText: 'Done.' });
      await session.close();
      expect(calls.filter((call) => call.kind === 'journal')).toHaveLength(1);
      const logged = calls.find((call) => call.kind === 'apply' && call.write.append?.some((message) => message.role === 'tool'));
      expect(logged?.kind === 'apply' && logged.write.clearJournal).toEqual(expect.arrayContaining([key]));
      expect(await inner.journaledToolResults('parallel', key)).toEqual([]);
      expect(committed()).toBe(calls.length);
    } finally {
      await done();
    }
  });

  it('a step refused with its batch\'s last result (another process won the session) leaves that result in the journal', async () => {
    const { store: inner, done } = await backend.open();
    let refusedKeys: string[] = [];
    const store: SessionStore = {
      ...countingStore(inner).store,
      async apply(id, write) {
        if (!write.append?.some((message) => message.role === 'tool')) return inner.apply(id, write);
        refusedKeys = (write.clearJournal as string[]).filter((key) => key.endsWith(':tools'));
        throw new SessionBusyError(id, write.expectedVersion, write.expectedVersion + 1);
      },
    };
    try {
      const session = await DurableSession.open({ machine: createAgentMachine({ model: toolScript(), tools: [add] }), store, sessionId: 'refused' });
      session.send({ type: 'input', message: 'Add them.' });
      await expect(session.whenIdle()).rejects.toBeInstanceOf(SessionBusyError);
      expect(refusedKeys).toHaveLength(1);
      expect(await inner.journaledToolResults('refused', refusedKeys[0]!)).toEqual([expect.objectContaining({ role: 'tool', content: '3' })]);
      await session.close().catch(() => {});
    } finally {
      await done();
    }
  });

  it('a host event that changes nothing is written at once, on its own (no step will carry it)', async () => {
    const { store: inner, committed, done } = await backend.open();
    const { store, calls } = countingStore(inner);
    try {
      const machine = createAgentMachine({ model: scriptedModel([{ text: 'Hello.' }]) });
      const session = await DurableSession.open({ machine, store, sessionId: 'idle-cancel' });
      session.send({ type: 'input', message: 'Hi.' });
      await session.whenIdle();
      const before = calls.length;
      session.send({ type: 'cancel' }); // at rest: nothing to cancel, nothing to store
      const deadline = Date.now() + 5_000;
      while (calls.length === before && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 5));
      expect(calls.slice(before).map((call) => [call.kind, ...typesOf(call)])).toEqual([['trace', 'event']]);
      await new Promise((resolve) => setTimeout(resolve, 20));
      expect((await inner.readTrace!('idle-cancel')).at(-1)?.entry).toMatchObject({ type: 'event', event: { type: 'cancel' } });
      await session.close();
      expect(calls.slice(before)).toHaveLength(1);
      expect(committed()).toBe(calls.length);
    } finally {
      await done();
    }
  });

  it("a retry's entry is written while the model call waits to retry, not held for the step after it", async () => {
    const model = scriptedModel([{ error: { message: 'rate limited', status: 429 } }, { text: 'Hello.' }]);
    // A wait a loaded machine's stalls do not outlast: with 40 ms this failed once in a full run
    // (not reproduced alone), most likely a stalled event loop letting the retry run before the
    // write of its entry started.
    const { output, calls, transactions } = await runSession(backend, 'retry', model, 500);
    expect(output?.outcome).toEqual({ type: 'Completed', finalText: 'Hello.' });
    // The retry is a new attempt of the model call (its delivery ids): the write that stores the
    // attempt carries the retry's entry, at once.
    const retry = calls.findIndex((call) => typesOf(call).includes('retry'));
    const reply = calls.findIndex((call) => typesOf(call).includes('model'));
    expect(retry).toBeGreaterThanOrEqual(0);
    expect(retry).toBeLessThan(reply);
    expect(calls[reply]!.kind).toBe('apply');
    expect(calls.filter((call) => call.kind !== 'apply')).toHaveLength(0);
    expect(transactions).toBe(calls.length);
  });
});

describe('entries recorded while a write is in flight', () => {
  it('go in the step decided meanwhile, not in a write of the trace alone (a slow store: the reply comes while the retry is written)', async () => {
    const { store: inner, calls } = countingStore(new MemorySessionStore());
    const store: SessionStore = {
      ...inner,
      async apply(id, write) {
        // The write that carries the retry's entry outlasts the 40 ms retry delay.
        if ((write.trace ?? []).some((entry) => (entry as { type: string }).type === 'retry')) await new Promise((resolve) => setTimeout(resolve, 120));
        return inner.apply(id, write);
      },
    };
    const model = scriptedModel([{ error: { message: 'rate limited', status: 429 } }, { text: 'Hello.' }]);
    const machine = createAgentMachine({ model, retry: { baseDelayMs: 40, maxDelayMs: 40 } });
    const session = await DurableSession.open({ machine, store, sessionId: 'slow-store' });
    session.send({ type: 'input', message: 'Hi.' });
    expect((await session.whenIdle())?.outcome).toEqual({ type: 'Completed', finalText: 'Hello.' });
    await session.close();
    const reply = calls.find((call) => typesOf(call).includes('model'));
    expect(reply?.kind).toBe('apply');
    expect(calls.filter((call) => call.kind !== 'apply')).toEqual([]);
  });
});

describe('the write queue leaves nothing behind', () => {
  it('a session closed before the event loop turns leaves no timer holding it (hosts whose work never yields)', async () => {
    const immediates = () => process.getActiveResourcesInfo().filter((resource) => resource === 'Immediate').length;
    const store = new MemorySessionStore();
    const machine = createAgentMachine({ model: toolScript(), tools: [add] });
    const before = immediates();
    const session = await DurableSession.open({ machine, store, sessionId: 'no-timer' });
    session.send({ type: 'input', message: 'Add them.' });
    expect(immediates()).toBeGreaterThan(before); // a write is queued: its drain is scheduled
    await session.whenIdle();
    await session.close();
    expect(immediates()).toBe(before);
  });
});

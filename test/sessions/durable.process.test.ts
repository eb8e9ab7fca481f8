/**
 * Durable sessions beyond the crash test (issue 5):
 *  - two processes racing one session: exactly one makes progress, the other gets a typed
 *    SessionBusyError from whenIdle()/flush(), and the stored session stays valid and coherent;
 *  - corrupt or foreign rows: `DurableSession.open` throws a typed error naming the session and
 *    the problem, writes nothing, and another session of the same store still opens and runs;
 *  - a session persisted while awaiting tools (process A killed or stopped with one tool still
 *    running) finishes in another process without re-running the tools that had finished;
 *  - steps write only what they add: the log grows by exactly the new messages, no mid-run step
 *    carries the history, and the bytes per step do not grow with the conversation;
 *  - rewindTo: coherent cut, one truncating step, only at rest.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createAgentMachine } from '../../machines/agent.machine.js';
import { coherentCut } from '../../src/brain/conversation.js';
import { InvalidFeedError, LoopchartError } from '../../src/errors.js';
import type { Model } from '../../src/model.js';
import type { AssistantMessage, Message } from '../../src/schemas.js';
import { DurableSession, SessionNotIdleError } from '../../src/sessions/durable-session.js';
import { decodeRow, SessionRowError } from '../../src/sessions/session-row.js';
import { CorruptSessionError } from '../../src/stores/errors.js';
import { MemorySessionStore } from '../../src/stores/memory.js';
import type { SessionStore, StepWrite } from '../../src/stores/session-store.js';
import { defineTool } from '../../src/tools/define-tool.js';
import { bundledCommand, startNode, type NodeCommand } from './fixtures/processes.js';
import { SESSION_SYSTEM, sessionAgent } from './fixtures/session-agent.js';
import type { SessionTask } from './fixtures/session-child.js';
import { openStore, type StoreSpec } from './fixtures/stores.js';

const CHILD = fileURLToPath(new URL('./fixtures/session-child.ts', import.meta.url));
let child: NodeCommand;
const root = mkdtempSync(join(tmpdir(), 'loopchart-durable-'));
beforeAll(async () => {
  child = await bundledCommand(CHILD);
});
const url = process.env.DATABASE_URL;
const pgSchema = `lc_durable_${process.pid}_${Date.now().toString(36)}`;
let n = 0;

afterAll(async () => {
  child?.dispose();
  rmSync(root, { recursive: true, force: true });
  if (url) {
    const admin = new pg.Pool({ connectionString: url, max: 1 });
    await admin.query(`DROP SCHEMA IF EXISTS "${pgSchema}" CASCADE`);
    await admin.end();
  }
});

const backends: Array<{ name: string; spec(): StoreSpec }> = [
  { name: 'sqlite', spec: () => ({ kind: 'sqlite', path: join(root, `s${n++}.db`) }) },
  ...(url ? [{ name: 'postgres', spec: (): StoreSpec => ({ kind: 'postgres', url, schema: pgSchema }) }] : []),
];

/** `<what> <pid> <id> <key>` lines of an effects file. */
function effectsOf(path: string): Array<{ what: string; pid: number; id: string; key: string }> {
  let text = '';
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    return [];
  }
  return text
    .split('\n')
    .filter(Boolean)
    .map((line) => {
      const [what, pid, id, key] = line.split(' ');
      return { what: what!, pid: Number(pid), id: id!, key: key! };
    });
}

const resultOf = (lines: string[]) => {
  const line = lines.find((l) => l.startsWith('RESULT '));
  return line ? JSON.parse(line.slice('RESULT '.length)) : undefined;
};

/** The stored session decoded the way a resuming process decodes it (throws if it is not valid). */
async function storedContext(store: SessionStore, sessionId: string) {
  const stored = await store.load(sessionId);
  if (!stored) throw new Error(`session ${sessionId} is missing`);
  return { stored, context: decodeRow(sessionId, stored.state, stored.messages) };
}

describe.each(backends)('two processes racing one session ($name)', ({ spec }) => {
  it('exactly one makes progress; the other gets SessionBusyError from whenIdle() and flush(); the session stays coherent', async () => {
    const store = spec();
    const sessionId = `race-${n++}`;
    const effects = join(root, `${sessionId}.effects`);
    // The session exists and is idle: both processes load the same version.
    const parentStore = await openStore(store);
    const created = await DurableSession.open({ machine: sessionAgent(effects), store: parentStore, sessionId, history: [SESSION_SYSTEM] });
    await created.close();

    const task: SessionTask = { mode: 'race', store, sessionId, effects };
    let ready = 0;
    let go!: () => void;
    const bothReady = new Promise<void>((resolve) => (go = resolve));
    const racers = [0, 1].map(() =>
      startNode([...child.args, JSON.stringify(task)], {
        onLine: (line) => {
          if (line === 'READY' && ++ready === 2) go();
        },
      }),
    );
    await bothReady;
    for (const racer of racers) racer.write('go\n');
    const runs = await Promise.all(racers.map((racer) => racer.done));
    for (const run of runs) expect(run.code, run.stderr).toBe(0);

    const results = runs.map((run) => resultOf(run.lines));
    const winners = results.filter((r) => r.ok);
    const losers = results.filter((r) => !r.ok);
    expect(winners).toHaveLength(1);
    expect(losers).toHaveLength(1);
    expect(winners[0].outcome).toEqual({ type: 'Completed', finalText: 'Three notes taken.' });
    expect(losers[0].error).toMatchObject({ name: 'SessionBusyError', code: 'SessionBusy', sessionId, busy: true });
    expect(losers[0].flushed).toBe('same error');
    expect(losers[0].sendThrows).toBe(true);
    const winnerPid = racers[results.indexOf(winners[0])]!.pid;
    const loserPid = racers[results.indexOf(losers[0])]!.pid;

    // The loser did no IO at all: no model call, no tool.
    const done = effectsOf(effects);
    expect(done.filter((e) => e.pid === loserPid)).toEqual([]);
    expect(done.map((e) => `${e.what} ${e.id}`).sort()).toEqual(
      ['model turn-1', 'model turn-2', 'quick call_1_0', 'quick call_1_1', 'slow call_1_2'].sort(),
    );

    // Stored: valid (row + log decode), coherent, exactly the winner's run.
    const { stored, context } = await storedContext(parentStore, sessionId);
    expect(coherentCut(stored.messages, Infinity)).toBe(stored.messages.length);
    expect(stored.messages.map((m) => m.role)).toEqual(['system', 'user', 'assistant', 'tool', 'tool', 'tool', 'assistant']);
    expect(stored.messages[1]).toEqual({ role: 'user', content: `from ${winnerPid}` });
    expect(stored.messages.filter((m) => m.content.includes(String(loserPid)))).toEqual([]);
    expect(context.brain.context.history).toHaveLength(7);
    expect(context.runIndex).toBe(1);
    const reopened = await DurableSession.open({ machine: sessionAgent(effects), store: parentStore, sessionId });
    expect(reopened.actor.getSnapshot().value).toBe('Idle');
    expect((await reopened.whenIdle())?.outcome).toEqual(winners[0].outcome);
    await reopened.close();
    await parentStore.close();
  });
});

describe('corrupt and foreign rows', () => {
  const BAD = 'victim-7';
  type Db = Database.Database;
  const state = (db: Db) => JSON.parse((db.prepare('SELECT state FROM sessions WHERE session_id = ?').get(BAD) as { state: string }).state);
  const setState = (db: Db, value: unknown) =>
    db.prepare('UPDATE sessions SET state = ? WHERE session_id = ?').run(typeof value === 'string' ? value : JSON.stringify(value), BAD);
  const setMessage = (db: Db, position: number, text: string) =>
    db.prepare('UPDATE messages SET message = ? WHERE session_id = ? AND position = ?').run(text, BAD, position);

  const cases: Array<{ name: string; corrupt(db: Db): void; error: new (...args: never[]) => LoopchartError; says: RegExp }> = [
    { name: 'a state row that is not JSON', corrupt: (db) => setState(db, '{"rowVersion":1,'), error: CorruptSessionError, says: /state row: unparsable JSON/ },
    { name: 'a foreign row (another program wrote it)', corrupt: (db) => setState(db, { count: 3 }), error: SessionRowError, says: /unknown state row version undefined/ },
    { name: 'a row of an unknown (newer) rowVersion', corrupt: (db) => setState(db, { ...state(db), rowVersion: 4 }), error: SessionRowError, says: /unknown state row version 4 \(this build reads versions 1 to 3\)/ },
    {
      name: 'a row of the right version with a bad field',
      corrupt: (db) => setState(db, { ...state(db), brain: { ...state(db).brain, value: 'Sleeping' } }),
      error: SessionRowError,
      says: /bad state row/,
    },
    {
      name: 'a row that counts more history than the log holds',
      corrupt: (db) => setState(db, { ...state(db), brain: { ...state(db).brain, historyLength: 99 } }),
      error: SessionRowError,
      says: /state row says 99 history messages, the log has 7/,
    },
    {
      name: 'a row whose state contradicts itself (AwaitingTools with nothing pending)',
      corrupt: (db) => setState(db, { ...state(db), brain: { ...state(db).brain, value: 'AwaitingTools' } }),
      error: SessionRowError,
      says: /AwaitingTools/,
    },
    {
      name: 'a log missing its last message (row and log disagree on the count)',
      corrupt: (db) => db.prepare('DELETE FROM messages WHERE session_id = ? AND position = 6').run(BAD),
      error: CorruptSessionError,
      says: /counts 7 messages but the log holds 6/,
    },
    {
      name: 'a log whose history is no longer coherent (a tool result replaced)',
      corrupt: (db) => setMessage(db, 4, JSON.stringify({ role: 'user', content: 'not a tool result' })),
      error: SessionRowError,
      says: /not coherent/,
    },
    {
      name: 'a log row that is not a message',
      corrupt: (db) => setMessage(db, 2, JSON.stringify({ role: 'robot', content: 'beep' })),
      error: CorruptSessionError,
      says: /message at position 2: not a Message/,
    },
  ];

  it.each(cases)('$name: a typed error naming the session, nothing written, other sessions unaffected', async ({ corrupt, error, says }) => {
    const path = join(root, `corrupt-${n++}.db`);
    const effects = join(root, `corrupt-${n}.effects`);
    const store = await openStore({ kind: 'sqlite', path });
    for (const sessionId of [BAD, 'bystander']) {
      const session = await DurableSession.open({ machine: sessionAgent(effects), store, sessionId, history: [SESSION_SYSTEM] });
      session.send({ type: 'input', message: 'Take three notes.' });
      await session.whenIdle();
      await session.close();
    }
    const db = new Database(path);
    corrupt(db);
    const rowsBefore = db.prepare('SELECT * FROM sessions ORDER BY session_id').all();
    const logBefore = db.prepare('SELECT * FROM messages ORDER BY session_id, position').all();

    const thrown = await DurableSession.open({ machine: sessionAgent(effects), store, sessionId: BAD }).catch((e: unknown) => e);
    expect(thrown).toBeInstanceOf(error);
    expect(thrown).toBeInstanceOf(LoopchartError);
    expect((thrown as { sessionId: string }).sessionId).toBe(BAD);
    expect((thrown as Error).message).toContain(BAD);
    expect((thrown as Error).message).toMatch(says);
    // Nothing was written by the failed open.
    expect(db.prepare('SELECT * FROM sessions ORDER BY session_id').all()).toEqual(rowsBefore);
    expect(db.prepare('SELECT * FROM messages ORDER BY session_id, position').all()).toEqual(logBefore);
    db.close();

    // The other session of the same store opens, is intact, and takes a new step.
    expect((await store.list()).map((s) => s.sessionId).sort()).toEqual(['bystander', BAD].sort());
    const other = await DurableSession.open({ machine: sessionAgent(effects), store, sessionId: 'bystander' });
    expect((await other.whenIdle())?.outcome).toEqual({ type: 'Completed', finalText: 'Three notes taken.' });
    expect(await other.rewindTo(1)).toBe(6);
    await other.close();
    expect((await store.load('bystander'))!.messages).toEqual([SESSION_SYSTEM]);
    await store.close();
  });
});

describe('state rows of an older version', () => {
  it('a version 1 row (before approvals and budgets) is migrated when read and stored as version 3 by the next step', async () => {
    const path = join(root, `migrate-${n++}.db`);
    const effects = join(root, `migrate-${n}.effects`);
    const store = await openStore({ kind: 'sqlite', path });
    const first = await DurableSession.open({ machine: sessionAgent(effects), store, sessionId: 'old', history: [SESSION_SYSTEM] });
    first.send({ type: 'input', message: 'Take three notes.' });
    await first.whenIdle();
    await first.close();
    // Rewrite the row as the version-1 build stored it: no approvals, no run start time.
    const db = new Database(path);
    const row = JSON.parse((db.prepare("SELECT state FROM sessions WHERE session_id = 'old'").get() as { state: string }).state);
    const { approvals: _approvals, runStartedAt: _startedAt, operations: _operations, ...v1 } = row;
    db.prepare("UPDATE sessions SET state = ? WHERE session_id = 'old'").run(JSON.stringify({ ...v1, rowVersion: 1 }));
    db.close();

    const reopened = await DurableSession.open({ machine: sessionAgent(effects), store, sessionId: 'old' });
    const context = reopened.actor.getSnapshot().context;
    expect(context.approvals).toEqual({ waiting: [], decisions: {}, standing: {} });
    expect(context.brain.context.history).toHaveLength(7);
    expect(await reopened.rewindTo(1)).toBe(6);
    await reopened.close();
    expect(((await store.load('old'))!.state as { rowVersion: number }).rowVersion).toBe(3);
    await store.close();
  });

  it('a version 2 row (before operations) is migrated when read: no slices, no point in progress, no yield', async () => {
    const path = join(root, `migrate-${n++}.db`);
    const effects = join(root, `migrate-${n}.effects`);
    const store = await openStore({ kind: 'sqlite', path });
    const first = await DurableSession.open({ machine: sessionAgent(effects), store, sessionId: 'v2', history: [SESSION_SYSTEM] });
    first.send({ type: 'input', message: 'Take three notes.' });
    await first.whenIdle();
    await first.close();
    // Rewrite the row as the version-2 build stored it: no operations field.
    const db = new Database(path);
    const row = JSON.parse((db.prepare("SELECT state FROM sessions WHERE session_id = 'v2'").get() as { state: string }).state);
    const { operations: _operations, ...v2 } = row;
    db.prepare("UPDATE sessions SET state = ? WHERE session_id = 'v2'").run(JSON.stringify({ ...v2, rowVersion: 2 }));
    db.close();

    const reopened = await DurableSession.open({ machine: sessionAgent(effects), store, sessionId: 'v2' });
    expect(reopened.actor.getSnapshot().context.operations).toEqual({ slices: {}, point: null, done: null, waiting: null });
    expect(reopened.actor.getSnapshot().context.brain.context.history).toHaveLength(7);
    reopened.send({ type: 'input', message: 'One more note.' });
    await reopened.whenIdle();
    await reopened.close();
    const stored = (await store.load('v2'))!.state as { rowVersion: number; operations: unknown };
    expect(stored.rowVersion).toBe(3);
    expect(stored.operations).toEqual({ slices: {}, point: null, done: null, waiting: null });
    await store.close();
  });
});

describe.each(backends)('a session persisted while awaiting tools, finished in another process ($name)', ({ spec }) => {
  it.each(['killed', 'stopped'] as const)('process A %s with one tool still running: B runs only that tool', async (how) => {
    const store = spec();
    const sessionId = `awaiting-${how}-${n++}`;
    const effects = join(root, `${sessionId}.effects`);
    const task = (mode: SessionTask['mode']): string => JSON.stringify({ mode, store, sessionId, effects } satisfies SessionTask);

    let journaled = 0;
    const a = startNode([...child.args, task('hang')], {
      env: { HANG: '1' },
      onLine: (line, self) => {
        if (!line.startsWith('JOURNALED ') || ++journaled < 2) return;
        if (how === 'killed') return 'kill';
        self.write('stop\n');
      },
    });
    const runA = await a.done;
    if (how === 'killed') expect(runA.signal).toBe('SIGKILL');
    else expect([runA.code, runA.lines.at(-1)], runA.stderr).toEqual([0, 'STOPPED']);

    // What A left: a run awaiting its batch, two results journaled, the slow call not.
    const inspect = await openStore(store);
    const { context } = await storedContext(inspect, sessionId);
    expect(context.brain.value).toBe('AwaitingTools');
    expect(context.brain.context.pendingTools.map((p) => p.call.id)).toEqual(['call_1_0', 'call_1_1', 'call_1_2']);
    const journal = await inspect.journaledToolResults(sessionId, `${sessionId}:run-1:turn-1:tools`);
    expect(journal.map((r) => r.toolCallId).sort()).toEqual(['call_1_0', 'call_1_1']);

    const runB = await startNode([...child.args, task('finish')]).done;
    expect(runB.code, runB.stderr).toBe(0);
    expect(resultOf(runB.lines)).toEqual({ ok: true, outcome: { type: 'Completed', finalText: 'Three notes taken.' } });

    const done = effectsOf(effects);
    const pidB = done.find((e) => e.what === 'slow')?.pid;
    expect(pidB).toBeDefined();
    expect(pidB).not.toBe(a.pid);
    // The finished tools ran once, in A; the unfinished one once, in B; B asked the model only for turn 2.
    expect(done.map((e) => `${e.what} ${e.pid === a.pid ? 'A' : 'B'} ${e.id}`)).toEqual(
      expect.arrayContaining(['quick A call_1_0', 'quick A call_1_1', 'slow B call_1_2', 'model A turn-1', 'model B turn-2']),
    );
    expect(done).toHaveLength(5);
    for (const e of done.filter((e) => e.what !== 'model')) expect(e.key).toBe(`${sessionId}:run-1:turn-1:tools:${e.id}`);

    // The transcript holds A's two results and B's one, each once.
    const { stored } = await storedContext(inspect, sessionId);
    const results = stored.messages.filter((m) => m.role === 'tool').map((m) => m.content);
    expect(results).toEqual([`one noted by ${a.pid}`, `two noted by ${a.pid}`, `three noted by ${pidB}`]);
    expect(await inspect.journaledToolResults(sessionId, `${sessionId}:run-1:turn-1:tools`)).toEqual([]);
    await inspect.close();
  });
});

/** A store that records every step with the log before and after it. */
function recordingStore(inner: SessionStore) {
  const steps: Array<{ write: StepWrite; before: Message[]; after: Message[]; bytes: number }> = [];
  const store: SessionStore = {
    load: (id) => inner.load(id),
    list: () => inner.list(),
    journalToolResult: (id, key, result) => inner.journalToolResult(id, key, result),
    journaledToolResults: (id, key) => inner.journaledToolResults(id, key),
    close: () => inner.close(),
    async apply(id, write) {
      const before = (await inner.load(id))?.messages ?? [];
      const version = await inner.apply(id, write);
      const after = (await inner.load(id))!.messages;
      steps.push({ write: structuredClone(write), before, after, bytes: Buffer.byteLength(JSON.stringify(write)) });
      return version;
    },
  };
  return { store, steps };
}

/**
 * A model that needs no script position: after the user, two calls; after their results, one
 * more; then the answer. Ids are unique in the conversation.
 */
const batchModel: Model = {
  name: 'batches',
  async generate(request) {
    const messages = request.messages;
    const sinceUser = messages.length - 1 - messages.findLastIndex((m) => m.role === 'user');
    const results = messages.slice(messages.length - sinceUser).filter((m) => m.role === 'tool').length;
    const call = (i: number) => ({ id: `c${messages.length}_${i}`, name: 'echo', args: { text: `r${results}-${i}` } });
    const message: AssistantMessage =
      results === 0
        ? { role: 'assistant', content: 'Two at once.', toolCalls: [call(0), call(1)] }
        : results === 2
          ? { role: 'assistant', content: 'One more.', toolCalls: [call(0)] }
          : { role: 'assistant', content: 'Done.' };
    return { message, finishReason: message.toolCalls ? 'tool-calls' : 'stop', usage: { inputTokens: 10, outputTokens: 2 } };
  },
};
const echo = defineTool({ name: 'echo', description: 'Echoes.', input: z.object({ text: z.string() }), execute: ({ text }) => text });

describe('steps write only what they add', () => {
  const MARK = 'HISTORY-MARK';
  const historyOf = (length: number): Message[] => [
    SESSION_SYSTEM,
    ...Array.from({ length: length - 1 }, (_, i): Message =>
      i % 2 === 0 ? { role: 'user', content: `${MARK} question ${i}` } : { role: 'assistant', content: `${MARK} answer ${i}` },
    ),
  ];

  async function runOnce(length: number) {
    const { store, steps } = recordingStore(new MemorySessionStore());
    const machine = createAgentMachine({ model: batchModel, tools: [echo], retry: false });
    const session = await DurableSession.open({ machine, store, sessionId: 'steps', history: historyOf(length) });
    session.send({ type: 'input', message: 'Go.' });
    const output = await session.whenIdle();
    await session.close();
    return { steps, output, final: (await store.load('steps'))!.messages };
  }

  it('the creating step holds the starting conversation; every later step appends exactly its new messages, never the history', async () => {
    const { steps, output, final } = await runOnce(401);
    expect(output?.outcome).toEqual({ type: 'Completed', finalText: 'Done.' });
    const [create, ...rest] = steps;
    expect(create!.write.expectedVersion).toBe(0);
    expect(create!.write.append).toEqual(historyOf(401));
    expect(rest.length).toBeGreaterThanOrEqual(5);
    for (const { write, before, after } of rest) {
      expect(write.replaceLog).toBeUndefined();
      expect(write.truncateTo).toBeUndefined();
      // The log grew by exactly what the step appended, and the step carried nothing older.
      expect(after).toEqual([...before, ...(write.append ?? [])]);
      expect(JSON.stringify(write)).not.toContain(MARK);
    }
    // New messages: the prompt, three replies, three tool results; each written once.
    const added = rest.flatMap((step) => step.write.append ?? []);
    expect(added).toEqual(final.slice(401));
    expect(added.map((m) => m.role)).toEqual(['user', 'assistant', 'tool', 'tool', 'assistant', 'tool', 'assistant']);
    expect(final).toEqual(output!.messages);
  });

  it('the bytes of each step do not depend on how long the conversation is', async () => {
    const short = await runOnce(11);
    const long = await runOnce(2001);
    const bytes = (run: typeof short) => run.steps.slice(1).map((s) => s.bytes);
    expect(bytes(long)).toHaveLength(bytes(short).length);
    // Only the counters in the state row (history length, token estimate) have more digits.
    bytes(long).forEach((b, i) => expect(Math.abs(b - bytes(short)[i]!)).toBeLessThanOrEqual(24));
    expect(Math.max(...bytes(long))).toBeLessThan(2_000);
  });
});

describe('rewindTo', () => {
  async function finishedSession() {
    const { store, steps } = recordingStore(new MemorySessionStore());
    const effects = join(root, `rewind-${n++}.effects`);
    const session = await DurableSession.open({ machine: sessionAgent(effects), store, sessionId: 'rw', history: [SESSION_SYSTEM] });
    session.send({ type: 'input', message: 'Take three notes.' });
    await session.whenIdle();
    return { store, steps, session, effects };
  }

  it('drops history past N snapped to a coherent cut, in one truncating step, and the session runs on from there', async () => {
    const { store, steps, session, effects } = await finishedSession();
    // [system, user, assistant(3 calls), tool, tool, tool, assistant]: 4 would split the batch, so 2.
    const before = steps.length;
    const first = session.actor;
    expect(await session.rewindTo(4)).toBe(5);
    expect(steps).toHaveLength(before + 1);
    expect(steps.at(-1)!.write).toMatchObject({ truncateTo: 2 });
    expect(steps.at(-1)!.write.append).toBeUndefined();
    expect((await store.load('rw'))!.messages.map((m) => m.role)).toEqual(['system', 'user']);
    // The same actor: the driver rewinds between runs, so listeners stay attached.
    expect(session.actor).toBe(first);
    expect(session.actor.getSnapshot().value).toBe('Idle');

    // Nothing to drop: no step at all.
    expect(await session.rewindTo(2)).toBe(0);
    expect(steps).toHaveLength(before + 1);
    await expect(session.rewindTo(-1)).rejects.toBeInstanceOf(InvalidFeedError);

    // The rewound session runs again (the scripted model is back at turn 1) and another process reads the same.
    session.send({ type: 'input', message: 'Again.' });
    expect((await session.whenIdle())?.outcome).toEqual({ type: 'Completed', finalText: 'Three notes taken.' });
    await session.close();
    const reopened = await DurableSession.open({ machine: sessionAgent(effects), store, sessionId: 'rw' });
    expect(reopened.actor.getSnapshot().context.brain.context.history.map((m) => m.role)).toEqual([
      'system', 'user', 'user', 'assistant', 'tool', 'tool', 'tool', 'assistant',
    ]);
    await reopened.close();
  });

  it('is refused while a run is in flight, with a typed error, writing nothing', async () => {
    const { store, steps } = recordingStore(new MemorySessionStore());
    const effects = join(root, `rewind-${n++}.effects`);
    const session = await DurableSession.open({ machine: sessionAgent(effects, { hang: true }), store, sessionId: 'busy', history: [SESSION_SYSTEM] });
    session.send({ type: 'input', message: 'Take three notes.' });
    while (!(await store.journaledToolResults('busy', 'busy:run-1:turn-1:tools')).length) await new Promise((r) => setTimeout(r, 5));
    const written = steps.length;
    const error = await session.rewindTo(0).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SessionNotIdleError);
    expect((error as SessionNotIdleError).sessionId).toBe('busy');
    expect(steps).toHaveLength(written);
    session.send({ type: 'cancel' });
    expect((await session.whenIdle())?.outcome).toEqual({ type: 'Cancelled' });
    await session.close();
  });
});

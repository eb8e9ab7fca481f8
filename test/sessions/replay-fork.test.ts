/**
 * Replay and fork (issue 14). Replay re-runs the brain over a session's trace, calling nothing,
 * and reports the first decision that differs from the recording; fork makes a new session from
 * a coherent prefix of another's log and leaves the original as it was, byte for byte.
 * (Replay over every session of the SIGKILL series is checked in test/support/crash-series.ts.)
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createAgentMachine } from '../../machines/agent.machine.js';
import { main } from '../../src/cli/main.js';
import { scriptedModel } from '../../src/models/scripted.js';
import { DurableSession } from '../../src/sessions/durable-session.js';
import { ForkError, forkSession } from '../../src/sessions/fork.js';
import { ReplayUnavailableError, replaySession } from '../../src/sessions/replay.js';
import { SessionBusyError } from '../../src/stores/errors.js';
import { SqliteSessionStore } from '../../src/stores/sqlite.js';
import { defineTool } from '../../src/tools/define-tool.js';
import { makeRichSession } from '../viewer/fixtures/rich-session.js';

const root = mkdtempSync(join(tmpdir(), 'loopchart-replay-'));
const rich = join(root, 'rich.db');
const RICH_DECISIONS = [
  'CallLLM turn 1',
  'CallTools turn 1 [call<script>window.__pwned=3</script>]',
  'CallLLM turn 2',
  'CallTools turn 2 [javascript:alert(4)]',
  'Compact ThresholdExceeded',
  'CallLLM turn 3',
  'Done Completed',
];

beforeAll(async () => {
  await makeRichSession(rich);
}, 60_000);
afterAll(() => rmSync(root, { recursive: true, force: true }));

/**
 * A copy of a session file (the rich one unless `from` says) whose first trace row `where`
 * matches is rewritten by `edit`, or deleted when `edit` is 'delete'.
 */
function tampered(
  name: string,
  where: (entry: Record<string, unknown>) => boolean,
  edit: ((entry: Record<string, unknown>) => void) | 'delete',
  from = { path: rich, sessionId: 'rich' },
): string {
  const path = join(root, `${name}.db`);
  const source = new Database(from.path);
  source.exec(`VACUUM INTO '${path}'`);
  source.close();
  const db = new Database(path);
  const rows = db.prepare('SELECT seq, entry FROM trace WHERE session_id = ? ORDER BY seq').all(from.sessionId) as Array<{ seq: number; entry: string }>;
  const row = rows.find((r) => where(JSON.parse(r.entry)));
  if (!row) throw new Error('no such trace entry');
  if (edit === 'delete') db.prepare('DELETE FROM trace WHERE seq = ?').run(row.seq);
  else {
    const entry = JSON.parse(row.entry);
    edit(entry);
    db.prepare('UPDATE trace SET entry = ? WHERE seq = ?').run(JSON.stringify(entry), row.seq);
  }
  db.close();
  return path;
}

async function replayFile(path: string, sessionId = 'rich') {
  const store = new SqliteSessionStore({ path });
  try {
    return await replaySession(store, sessionId);
  } finally {
    await store.close();
  }
}

async function cli(argv: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await main(argv, { out: (line) => out.push(line), err: (line) => err.push(line) });
  return { code, out: out.join('\n'), err: err.join('\n') };
}

describe('replay', () => {
  it('re-runs a session with a retry, a crash and resume, an approval and a compaction: every decision matches', async () => {
    const report = await replayFile(rich);
    expect(report.divergence).toBeNull();
    expect(report.decisions).toEqual(RICH_DECISIONS);
    expect(report.runs).toBe(1);
  });

  it('a tampered reply diverges at the decision that needed it', async () => {
    // Turn 2's reply loses its tool call: the brain completes where the recording ran a batch.
    const path = tampered(
      'no-tools',
      (e) => e.type === 'model' && e.turn === 2,
      (e) => delete (e.reply as { message: { toolCalls?: unknown } }).message.toolCalls,
    );
    const { divergence } = await replayFile(path);
    expect(divergence).toMatchObject({ step: 4, run: 1, expected: 'CallTools turn 2 with call javascript:alert(4)', got: 'Done Completed' });
  });

  it('a tampered context size diverges at the compaction it no longer calls for', async () => {
    const path = tampered(
      'small',
      (e) => e.type === 'step' && e.state === 'AwaitingCompaction',
      (e) => (e.tokens = 500),
    );
    const { divergence } = await replayFile(path);
    expect(divergence).toMatchObject({ step: 5, expected: 'Compact ThresholdExceeded', got: 'CallLLM turn 3' });
  });

  it('loopchart sessions replay: exit 0 and the step count, or exit 1 with the divergence', async () => {
    const ok = await cli(['sessions', 'replay', 'rich', '--store', rich]);
    expect(ok.code).toBe(0);
    expect(ok.out).toMatch(/replayed 7 decision\(s\) over 1 run\(s\) in [\d.]+ ms \(\d+ steps\/s\), calling nothing/);
    expect(ok.out).toContain('no divergence');
    const path = tampered('cli', (e) => e.type === 'model' && e.turn === 2, (e) => delete (e.reply as { message: { toolCalls?: unknown } }).message.toolCalls);
    const bad = await cli(['sessions', 'replay', 'rich', '--store', path]);
    expect(bad.code).toBe(1);
    expect(bad.out).toContain('divergence at step 4');
    expect(bad.out).toContain('expected: CallTools turn 2 with call javascript:alert(4)');
    expect(bad.out).toContain('got:      Done Completed');
    const missing = await cli(['sessions', 'replay', 'nope', '--store', rich]);
    expect(missing.code).toBe(1);
    expect(missing.err).toContain("session 'nope': no such session");
    await expect(replayFile(rich, 'nope')).rejects.toBeInstanceOf(ReplayUnavailableError);
  });
});

/** Every stored byte of a session: row, log and trace, as the file holds them. */
function dump(path: string, sessionId: string): string {
  const db = new Database(path, { readonly: true });
  try {
    return JSON.stringify([
      db.prepare('SELECT * FROM sessions WHERE session_id = ?').all(sessionId),
      db.prepare('SELECT * FROM messages WHERE session_id = ? ORDER BY position').all(sessionId),
      db.prepare('SELECT * FROM trace WHERE session_id = ? ORDER BY seq').all(sessionId),
      db.prepare('SELECT * FROM tool_journal WHERE session_id = ?').all(sessionId),
    ]);
  } finally {
    db.close();
  }
}

describe('replay compares content', () => {
  const path = join(root, 'adder.db');
  const adder = { path, sessionId: 'adder' };
  const add = defineTool({ name: 'add', description: 'Adds.', input: z.object({ a: z.number(), b: z.number() }), execute: ({ a, b }) => String(a + b) });
  const addTurn = (a: number, b: number) => ({ toolCalls: [{ name: 'add', args: { a, b } }] });

  beforeAll(async () => {
    // Two runs, each a tool call and an answer: run 1 adds 1 + 2, run 2 adds 3 + 4.
    const store = new SqliteSessionStore({ path });
    const model = scriptedModel([addTurn(1, 2), { text: 'It is 3.' }, addTurn(3, 4), { text: 'It is 7.' }]);
    const session = await DurableSession.open({ machine: createAgentMachine({ model, tools: [add] }), store, sessionId: 'adder' });
    for (const message of ['Add 1 and 2.', 'Add 3 and 4.']) {
      session.send({ type: 'input', message });
      expect((await session.whenIdle())?.outcome.type).toBe('Completed');
    }
    await session.close();
    await store.close();
  }, 60_000);

  const isTool = (run: number) => (e: Record<string, unknown>) => e.type === 'tool' && e.run === run;

  it('the untouched session replays with no divergence', async () => {
    expect((await replayFile(path, 'adder')).divergence).toBeNull();
  });

  it.each([1, 2])('a tool result changed in the trace (3 -> 999, run %i) diverges at the model call that was fed the real one, naming the field', async (run) => {
    const real = run === 1 ? '3' : '7';
    const tamperedPath = tampered(`result-${run}`, isTool(run), (e) => ((e.result as { content: string }).content = '999'), adder);
    const { divergence } = await replayFile(tamperedPath, 'adder');
    const callId = run === 1 ? 'call_1_0' : 'call_3_0';
    expect(divergence).toMatchObject({ run, field: `tool result ${callId}: content`, got: 'as the trace records it: "999"' });
    expect(divergence!.expected).toContain(`"${real}"`);
    // The decision it showed at: the model call after the batch (turn 2 of that run).
    expect(divergence!.step).toBe(run === 1 ? 3 : 7);
  });

  it('a tool result marked failed in the trace diverges on isError', async () => {
    const tamperedPath = tampered('result-error', isTool(1), (e) => ((e.result as { isError?: boolean }).isError = true), adder);
    expect((await replayFile(tamperedPath, 'adder')).divergence).toMatchObject({ field: 'tool result call_1_0: isError' });
  });

  it("a reply's tool call arguments changed in the trace diverge at the next model call", async () => {
    const tamperedPath = tampered(
      'reply-args',
      (e) => e.type === 'model' && e.run === 1 && e.turn === 1,
      (e) => ((e.reply as { message: { toolCalls: Array<{ args: unknown }> } }).message.toolCalls[0]!.args = { a: 5, b: 2 }),
      adder,
    );
    expect((await replayFile(tamperedPath, 'adder')).divergence).toMatchObject({ run: 1, field: 'reply of turn 1: toolCalls' });
  });

  it('the last answer changed in the trace diverges against the stored log', async () => {
    const tamperedPath = tampered(
      'answer',
      (e) => e.type === 'model' && e.run === 2 && e.turn === 2,
      (e) => ((e.reply as { message: { content: string } }).message.content = 'It is 8.'),
      adder,
    );
    const { divergence } = await replayFile(tamperedPath, 'adder');
    expect(divergence).not.toBeNull();
    expect(divergence!.expected).toContain('It is 7.');
  });

  it.each([1, 2])("a deleted finished row (run %i) is a divergence naming the finished entry", async (run) => {
    const tamperedPath = tampered(`finished-${run}`, (e) => e.type === 'finished' && e.run === run, 'delete', adder);
    const { divergence } = await replayFile(tamperedPath, 'adder');
    expect(divergence).toMatchObject({ field: 'finished', expected: expect.stringContaining(`a finished entry for run ${run}`) });
  });

  it('loopchart sessions replay prints the field', async () => {
    const tamperedPath = tampered('cli-field', isTool(1), (e) => ((e.result as { content: string }).content = '999'), adder);
    const bad = await cli(['sessions', 'replay', 'adder', '--store', tamperedPath]);
    expect(bad.code).toBe(1);
    expect(bad.out).toContain('field:    tool result call_1_0: content');
  });
});

describe('fork', () => {
  const path = join(root, 'fork.db');
  const batch = (turn: number) => [
    { name: 'echo', args: { text: `${turn}a` } },
    { name: 'echo', args: { text: `${turn}b` } },
  ];

  it('cuts at a coherent point, the fork resumes with another model, and the original is unchanged byte for byte', async () => {
    const echo = defineTool({ name: 'echo', description: 'Echoes.', input: z.object({ text: z.string() }), execute: ({ text }) => text });
    const store = new SqliteSessionStore({ path });
    const first = await DurableSession.open({
      machine: createAgentMachine({ model: scriptedModel([{ toolCalls: batch(1) }, { text: 'Both echoed.' }]), tools: [echo] }),
      store,
      sessionId: 'orig',
    });
    first.send({ type: 'input', message: 'Echo twice.' });
    await first.whenIdle();
    await first.close();
    // user, assistant (two calls), tool, tool, assistant
    expect((await store.load('orig'))!.messages.map((m) => m.role)).toEqual(['user', 'assistant', 'tool', 'tool', 'assistant']);
    const before = dump(path, 'orig');

    // 3 would keep one result of two: the cut snaps down to the user message.
    const fork = await forkSession(store, 'orig', { at: 3, as: 'orig-fork' });
    expect(fork).toEqual({ sessionId: 'orig-fork', messages: 1 });
    const kept = await forkSession(store, 'orig', { at: 4, as: 'orig-fork-4' });
    expect(kept.messages).toBe(4);

    const resumed = await DurableSession.open({
      machine: createAgentMachine({ model: scriptedModel([{ text: 'unused: the script is picked by the assistant messages so far' }, { text: 'Another model answers.' }]), tools: [echo] }),
      store,
      sessionId: 'orig-fork-4',
    });
    resumed.send({ type: 'input', message: 'And now?' });
    const output = await resumed.whenIdle();
    await resumed.close();
    expect(output?.outcome).toEqual({ type: 'Completed', finalText: 'Another model answers.' });
    expect((await store.load('orig-fork-4'))!.messages.map((m) => m.role)).toEqual(['user', 'assistant', 'tool', 'tool', 'user', 'assistant']);
    expect((await replaySession(store, 'orig-fork-4')).divergence).toBeNull();

    await expect(forkSession(store, 'orig', { at: 9 })).rejects.toBeInstanceOf(ForkError);
    await expect(forkSession(store, 'orig', { at: -1 })).rejects.toBeInstanceOf(ForkError);
    await expect(forkSession(store, 'missing', { at: 0 })).rejects.toBeInstanceOf(ForkError);
    await expect(forkSession(store, 'orig', { at: 1, as: 'orig-fork' })).rejects.toBeInstanceOf(SessionBusyError);
    await store.close();
    expect(dump(path, 'orig')).toBe(before);
  });

  it('loopchart sessions fork ID --at N [--as NEW]', async () => {
    const ok = await cli(['sessions', 'fork', 'orig', '--at', '3', '--as', 'cli-fork', '--store', path]);
    expect(ok.code).toBe(0);
    expect(ok.out).toContain('forked orig into cli-fork with 1 message(s) (cut at 1: a coherent point)');
    const usage = await cli(['sessions', 'fork', 'orig', '--store', path]);
    expect(usage.code).toBe(2);
    const bad = await cli(['sessions', 'fork', 'orig', '--at', 'x', '--store', path]);
    expect(bad.code).toBe(2);
  });
});

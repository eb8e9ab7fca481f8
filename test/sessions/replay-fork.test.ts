/**
 * Replay and fork (issue 14). Replay re-runs the brain over a session's trace, calling nothing,
 * and reports the first decision that differs from the recording; fork makes a new session from
 * a coherent prefix of another's log and leaves the original as it was, byte for byte.
 * (Replay over every session of the SIGKILL series is checked in crash.test.ts.)
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

/** A copy of the rich file whose trace row `where` is rewritten by `edit`. */
function tampered(name: string, where: (entry: Record<string, unknown>) => boolean, edit: (entry: Record<string, unknown>) => void): string {
  const path = join(root, `${name}.db`);
  const source = new Database(rich);
  source.exec(`VACUUM INTO '${path}'`);
  source.close();
  const db = new Database(path);
  const rows = db.prepare("SELECT seq, entry FROM trace WHERE session_id = 'rich' ORDER BY seq").all() as Array<{ seq: number; entry: string }>;
  const row = rows.find((r) => where(JSON.parse(r.entry)));
  if (!row) throw new Error('no such trace entry');
  const entry = JSON.parse(row.entry);
  edit(entry);
  db.prepare('UPDATE trace SET entry = ? WHERE seq = ?').run(JSON.stringify(entry), row.seq);
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

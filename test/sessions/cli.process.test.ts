/**
 * `loopchart sessions list | show | resume | rewind`, run as a real process (src/cli.ts from a
 * bundle, or through tsx as `npx tsx src/cli.ts` runs it: see `loopchart`) against a temporary
 * SQLite file given with `--store`, and once against the default store `.loopchart/loopchart.db`
 * of its working directory. The sessions it works on are prepared in this process: finished,
 * left mid-run, left mid-run by the demo's folder agent, and corrupt.
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAgentMachine } from '../../machines/agent.machine.js';
import { createFolderAgent, DEFAULT_QUESTION } from '../../examples/folder-agent.js';
import type { Message } from '../../src/schemas.js';
import { DurableSession } from '../../src/sessions/durable-session.js';
import { decodeRow } from '../../src/sessions/session-row.js';
import { PostgresSessionStore } from '../../src/stores/postgres.js';
import type { SessionStore } from '../../src/stores/session-store.js';
import { SqliteSessionStore } from '../../src/stores/sqlite.js';
import { approvalAgent, cliAgent, LONG } from './fixtures/cli-agent.js';
import { bundledCommand, runNode, tsxCommand, type NodeCommand } from './fixtures/processes.js';

const CLI = fileURLToPath(new URL('../../src/cli.ts', import.meta.url));
const AGENT = fileURLToPath(new URL('./fixtures/cli-agent.ts', import.meta.url));
const APPROVAL_AGENT = fileURLToPath(new URL('./fixtures/cli-approval-agent.ts', import.meta.url));
const OPERATIONS_AGENT = fileURLToPath(new URL('./fixtures/cli-operations-agent.ts', import.meta.url));
const SYSTEM: Message = { role: 'system', content: 'You fetch pages.' };
const HOSTILE = '\x1b[2J\x1b]0;pwned\x07\rline\u202eevil\x9b31m';

const dir = mkdtempSync(join(tmpdir(), 'loopchart-cli-'));
const db = join(dir, 'sessions.db');

/**
 * The CLI from a bundle of src/cli.ts (see bundledCommand: it starts on a third of the CPU tsx
 * takes). A command that loads an agent module of the test's own (--agent, or the demo agent of
 * a demo-… session: `tsx`) runs the source through tsx instead, so that module and the CLI share
 * one copy of the library, as they do in a checkout (`npx loopchart`) and in the installed package.
 */
let bundled: NodeCommand;
const throughTsx = tsxCommand(CLI);
beforeAll(async () => {
  bundled = await bundledCommand(CLI);
});

/** One CLI invocation; the demo's model stays the offline scripted one whatever the environment says. */
async function loopchart(args: string[], options: { cwd?: string; tsx?: boolean } = {}) {
  const cli = options.tsx || args.includes('--agent') ? throughTsx : bundled;
  const run = await runNode([...cli.args, ...args], {
    ...(options.cwd && { cwd: options.cwd }),
    env: { OPENAI_BASE_URL: undefined, OPENAI_API_KEY: undefined, LOOPCHART_MODEL: undefined },
  });
  return { code: run.code, out: run.lines.join('\n'), err: run.stderr };
}
const inStore = (...args: string[]) => loopchart([...args, '--store', db]);

async function runToEnd(store: SessionStore, sessionId: string) {
  const session = await DurableSession.open({ machine: createAgentMachine(cliAgent()), store, sessionId, history: [SYSTEM] });
  session.send({ type: 'input', message: 'Fetch both pages.' });
  await session.whenIdle();
  await session.close();
}

/** Polls until `ready` holds (for states another task reaches). */
async function until(ready: () => Promise<boolean> | boolean): Promise<void> {
  for (let i = 0; i < 1000 && !(await ready()); i++) await new Promise((r) => setTimeout(r, 10));
}

beforeAll(async () => {
  const store = new SqliteSessionStore({ path: db });
  await runToEnd(store, 'finished');

  // Mid-run: page one fetched and journaled, page two never finishes; the process "stops".
  for (const sessionId of ['midrun', 'inflight']) {
    const session = await DurableSession.open({ machine: createAgentMachine(cliAgent({ hang: true })), store, sessionId, history: [SYSTEM] });
    session.send({ type: 'input', message: 'Fetch both pages.' });
    await until(async () => (await store.journaledToolResults(sessionId, `${sessionId}:run-1:turn-1:tools`)).length === 1);
    await session.close();
  }

  // The demo's folder agent, stopped while its third model call (of four) is under way: its
  // model "thinks" for most of a second, the window to stop it in.
  const demo = createFolderAgent();
  const session = await DurableSession.open({ machine: demo.machine, store, sessionId: 'demo-1', history: demo.input.history ?? [] });
  session.send({ type: 'input', message: DEFAULT_QUESTION });
  await until(() => {
    const { brain } = session.actor.getSnapshot().context;
    return brain.value === 'AwaitingModel' && brain.context.turnsTaken === 2;
  });
  await session.close();

  // A run waiting for a human to approve its two calls.
  const asking = await DurableSession.open({ machine: createAgentMachine(approvalAgent), store, sessionId: 'asking', history: [SYSTEM] });
  asking.send({ type: 'input', message: 'Fetch both pages.' });
  await until(() => JSON.stringify(asking.actor.getSnapshot().value).includes('AwaitingApproval'));
  await asking.close();

  // Text that would drive a terminal: clear the screen, retitle the window, overwrite a line, reorder text.
  const hostile = await DurableSession.open({ machine: createAgentMachine(cliAgent()), store, sessionId: 'hostile', history: [SYSTEM] });
  hostile.send({ type: 'input', message: `${HOSTILE}Fetch both pages.` });
  await hostile.whenIdle();
  await hostile.close();

  // A row from a newer loopchart.
  const corrupt = await DurableSession.open({ machine: createAgentMachine(cliAgent()), store, sessionId: 'bad', history: [SYSTEM] });
  await corrupt.close();
  await store.close();
  const raw = new Database(db);
  const row = raw.prepare("SELECT state FROM sessions WHERE session_id = 'bad'").get() as { state: string };
  raw.prepare("UPDATE sessions SET state = ? WHERE session_id = 'bad'").run(JSON.stringify({ ...JSON.parse(row.state), rowVersion: 7 }));
  raw.close();
}, 30_000);

afterAll(() => {
  bundled?.dispose();
  rmSync(dir, { recursive: true, force: true });
});

async function stored(sessionId: string) {
  const store = new SqliteSessionStore({ path: db });
  try {
    const session = (await store.load(sessionId))!;
    return { ...session, context: decodeRow(sessionId, session.state, session.messages) };
  } finally {
    await store.close();
  }
}

describe('loopchart sessions list', () => {
  it('prints id, version, message count and last update of every session', async () => {
    const { code, out, err } = await inStore('sessions', 'list');
    expect(code, err).toBe(0);
    const store = new SqliteSessionStore({ path: db });
    const sessions = await store.list();
    await store.close();
    const lines = out.split('\n');
    expect(lines[0]).toMatch(/^SESSION\s+VERSION\s+MESSAGES\s+UPDATED$/);
    expect(lines).toHaveLength(sessions.length + 1);
    for (const s of sessions) {
      expect(out).toMatch(new RegExp(`^${s.sessionId}\\s+${s.version}\\s+${s.messageCount}\\s+\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\dZ$`, 'm'));
    }
    expect(sessions.map((s) => s.sessionId).sort()).toEqual(['asking', 'bad', 'demo-1', 'finished', 'hostile', 'inflight', 'midrun']);
  });

  it('says so when the store file does not exist, without creating it', async () => {
    const missing = join(dir, 'nowhere', 'none.db');
    const { code, out } = await loopchart(['sessions', 'list', '--store', missing]);
    expect(code).toBe(0);
    expect(out).toBe(`no sessions: ${missing} does not exist`);
    expect(existsSync(missing)).toBe(false);
  });

  it('uses .loopchart/loopchart.db of the working directory by default', async () => {
    const cwd = join(dir, 'project');
    mkdirSync(join(cwd, '.loopchart'), { recursive: true });
    const store = new SqliteSessionStore({ path: join(cwd, '.loopchart', 'loopchart.db') });
    await runToEnd(store, 'local-one');
    await store.close();
    const list = await loopchart(['sessions', 'list'], { cwd });
    expect(list.code, list.err).toBe(0);
    expect(list.out).toMatch(/^local-one\s+\d+\s+6\s/m);
    const show = await loopchart(['sessions', 'show', 'local-one'], { cwd });
    expect(show.out).toContain('.loopchart/loopchart.db');
    expect(show.out).toContain('Both pages fetched.');
  });
});

describe('loopchart sessions show', () => {
  it('prints the transcript: roles, tool calls with arguments, tool results truncated', async () => {
    const { code, out, err } = await inStore('sessions', 'show', 'finished');
    expect(code, err).toBe(0);
    expect(out).toMatch(/^session finished · version \d+ · 6 messages/);
    expect(out).toContain('state: at rest; last run (1) Completed: Both pages fetched.');
    expect(out).toMatch(/^\s+0 {2}system {5}You fetch pages\.$/m);
    expect(out).toMatch(/^\s+1 {2}user {7}Fetch both pages\.$/m);
    expect(out).toMatch(/^\s+2 {2}assistant {2}Fetching two pages\.$/m);
    expect(out).toContain('→ fetch {"page":"one"} [call_1_0]');
    expect(out).toContain('→ fetch {"page":"two"} [call_1_1]');
    expect(out).toMatch(/^\s+3 {2}tool {7}fetch \[call_1_0\]: page one: x+… \[500 chars\]$/m);
    expect(out).not.toContain('page one: '.padEnd(LONG, 'x'));
    expect(out).toMatch(/^\s+5 {2}assistant {2}Both pages fetched\.$/m);

    const full = await inStore('sessions', 'show', 'finished', '--full');
    expect(full.out).toContain('page one: '.padEnd(LONG, 'x'));
  });

  it("prints each operation's state slice and the operation a run waits on", async () => {
    const { ticketOperation } = await import('../../examples/operations/ticket.js');
    const { ciGateOperation } = await import('../../examples/operations/ci-gate.js');
    const store = new SqliteSessionStore({ path: db });
    const machine = createAgentMachine({ ...cliAgent(), operations: [ciGateOperation({ gatedTools: ['fetch'] }), ticketOperation('T-9')] });
    const session = await DurableSession.open({ machine, store, sessionId: 'ticketed', history: [SYSTEM] });
    session.send({ type: 'input', message: 'Fetch both pages.' });
    await until(() => session.actor.getSnapshot().matches({ Running: 'AwaitingOperation' }));
    await session.close();
    await store.close();
    const { code, out, err } = await inStore('sessions', 'show', 'ticketed');
    expect(code, err).toBe(0);
    // Only what was stored: the gate has not changed its slice yet (it starts from its initial value).
    expect(out).not.toMatch(/^operation ci-gate:/m);
    expect(out).toContain('operation ticket: {"id":"T-9","status":"open","toolsUsed":[],"replies":1}');
    expect(out).toContain('waiting on operation ci-gate: ci-result {"calls":["call_1_0","call_1_1"]}');
  });

  it('marks the pending part of a run in flight', async () => {
    const { code, out } = await inStore('sessions', 'show', 'midrun');
    expect(code).toBe(0);
    expect(out).toContain('state: run 1 in flight: AwaitingTools after 1 turn(s); 2 tool call(s) pending');
    expect(out).toContain('-- run in flight: not committed yet --');
  });

  it('fails clearly for an unknown id', async () => {
    const { code, out, err } = await inStore('sessions', 'show', 'ghost');
    expect(code).toBe(1);
    expect(out).toBe('');
    expect(err.trim()).toBe(`loopchart: no session 'ghost' in ${db}`);
  });
});

describe('output from the store is escaped', () => {
  it('show prints control characters and escape sequences of messages as visible escapes', async () => {
    const { code, out, err } = await inStore('sessions', 'show', 'hostile');
    expect(code, err).toBe(0);
    // No ESC, BEL, CR, C1 CSI or bidi override reaches the terminal...
    expect(out).not.toMatch(/[\x1b\x07\r\x9b\u202e]/);
    // ...they are shown instead, in place.
    expect(out).toContain('\\x1b[2J\\x1b]0;pwned\\x07\\x0dline\\u202eevil\\x9b31mFetch both pages.');
  });
});

describe('store failures are one line, not a stack', () => {
  it('an unreachable PostgreSQL server: the address and the reason, exit 1', async () => {
    const { code, out, err } = await loopchart(['sessions', 'list', '--store', 'postgres://someone:secret@127.0.0.1:1/db']);
    expect(code).toBe(1);
    expect(out).toBe('');
    expect(err.trim().split('\n')).toHaveLength(1);
    expect(err.trim()).toMatch(/^loopchart: cannot reach the database at postgres:\/\/someone:\*\*\*@127\.0\.0\.1:1\/db: .*ECONNREFUSED/);
    expect(err).not.toContain('secret');
  });

  it('a file that is not a SQLite database: named, exit 1', async () => {
    const file = join(dir, 'not-a-db.db');
    writeFileSync(file, 'this is not a database, just text long enough to fill a header page'.repeat(100));
    const { code, err } = await loopchart(['sessions', 'list', '--store', file]);
    expect(code).toBe(1);
    expect(err.trim().split('\n')).toHaveLength(1);
    expect(err.trim()).toMatch(new RegExp(`^loopchart: (the store at ${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} failed: )?.*not a database`));
    expect(err).not.toMatch(/^\s+at /m);
  });
});

describe('a corrupt session', () => {
  it('show, resume and rewind name the session and the problem and exit 1; list still works', async () => {
    for (const args of [['show', 'bad'], ['resume', 'bad'], ['rewind', 'bad', '1']]) {
      const { code, err } = await inStore('sessions', ...args);
      expect(code, args.join(' ')).toBe(1);
      expect(err.trim()).toBe("loopchart: session 'bad': unknown state row version 7 (this build reads versions 1 to 3)");
    }
    const list = await inStore('sessions', 'list');
    expect(list.code).toBe(0);
    expect(list.out).toMatch(/^bad\s/m);
  });
});

describe('loopchart sessions rewind', () => {
  it('drops committed history past N, snapped to a coherent cut, and says how many messages went', async () => {
    // [system, user, assistant (2 calls), tool, tool, assistant]: keeping 4 would split the batch.
    const { code, out, err } = await inStore('sessions', 'rewind', 'finished', '4');
    expect(code, err).toBe(0);
    expect(out).toBe('session finished: dropped 4 message(s); the history has 2 now (cut at 2: keeping 4 would separate a tool call from its result)');
    expect((await stored('finished')).messages.map((m) => m.role)).toEqual(['system', 'user']);

    const again = await inStore('sessions', 'rewind', 'finished', '9');
    expect(again.out).toBe('session finished: nothing dropped; the history has 2 message(s)');
  });

  it('refuses a session with a run in flight (nothing written, nothing driven)', async () => {
    const before = await stored('inflight');
    const { code, err } = await inStore('sessions', 'rewind', 'inflight', '1');
    expect(code).toBe(1);
    expect(err).toContain("session 'inflight': cannot rewind while a run is in flight");
    expect(err).toContain('loopchart sessions resume inflight');
    const after = await stored('inflight');
    expect(after.version).toBe(before.version);
    expect(after.messages).toEqual(before.messages);
  });

  it('rejects a bad N and unknown commands as usage errors (exit 2)', async () => {
    for (const args of [['sessions', 'rewind', 'finished', 'two'], ['sessions', 'rewind', 'finished'], ['sessions', 'list', '--bogus']]) {
      const { code, err } = await inStore(...args);
      expect(code, args.join(' ')).toBe(2);
      expect(err).toContain('usage: loopchart sessions');
    }
    // An unknown command is one line naming the commands there are, not the whole usage.
    const unknown = await inStore('sessions', 'drop', 'x');
    expect(unknown.code).toBe(2);
    expect(unknown.err.trim()).toBe(
      "loopchart: unknown command 'sessions drop'; the commands: list, show, resume, send, rewind, doubt, replay, fork (npx loopchart sessions --help for more)",
    );
  });
});

describe('loopchart sessions resume', () => {
  it('runs a run in flight to completion with the --agent module and prints the outcome', async () => {
    const { code, out, err } = await inStore('sessions', 'resume', 'midrun', '--agent', AGENT);
    expect(code, err).toBe(0);
    expect(out).toContain(`resuming session midrun with ${AGENT}`);
    expect(out).toContain('state: run 1 in flight: AwaitingTools after 1 turn(s)');
    expect(out).toMatch(/^\s+4 {2}tool {7}fetch \[call_1_1\]: page two: y+… \[500 chars\]$/m);
    expect(out.split('\n').at(-1)).toBe('outcome: Completed: Both pages fetched.');
    const { context, messages } = await stored('midrun');
    expect(context.lastRun?.outcome).toEqual({ type: 'Completed', finalText: 'Both pages fetched.' });
    expect(messages.filter((m) => m.role === 'tool').map((m) => m.content.slice(0, 9))).toEqual(['page one:', 'page two:']);
  });

  it('refuses to resume without --agent a session the demo did not make, and leaves it as it was', async () => {
    const before = await stored('inflight');
    const { code, out, err } = await inStore('sessions', 'resume', 'inflight');
    expect(code).toBe(2);
    expect(out).toBe('');
    expect(err.trim()).toBe(
      'loopchart: session inflight was not made by the demo agent, so it will not be resumed with it. ' +
        'Name the agent that made it: npx loopchart sessions resume inflight --agent ./agent.ts ' +
        '(a module exporting `agent`: an AgentConfig, or a function returning one)',
    );
    const after = await stored('inflight');
    expect(after.version).toBe(before.version);
    expect(after.messages).toEqual(before.messages);
  });

  it('resumes a session the demo made (id demo-…) with the demo folder agent by default', async () => {
    const { code, out, err } = await loopchart(['sessions', 'resume', 'demo-1', '--store', db], { tsx: true });
    expect(code, err).toBe(0);
    expect(out).toContain('resuming session demo-1 with the demo folder agent (examples/folder-agent.ts)');
    expect(out).toContain('state: run 1 in flight: AwaitingModel after 2 turn(s)');
    expect(out).toContain('→ calculator');
    expect(out.split('\n').at(-1)).toMatch(/^outcome: Completed: .*lines in all/);
    const { context } = await stored('demo-1');
    expect(context.lastRun?.outcome.type).toBe('Completed');
    expect(context.brain.context.history.filter((m) => m.role === 'tool').map((m) => m.role === 'tool' && m.toolName)).toEqual([
      'list_dir',
      'read_file',
      'read_file',
      'read_file',
      'calculator',
    ]);
  });

  it('stops at a run waiting for approval, says which calls wait, and leaves the session as it was', async () => {
    const before = await stored('asking');
    const { code, out, err } = await inStore('sessions', 'resume', 'asking', '--agent', APPROVAL_AGENT);
    expect(code).toBe(1);
    expect(out).toContain('state: run 1 in flight: AwaitingTools after 1 turn(s); 2 tool call(s) pending; waiting for approval of call_1_0, call_1_1');
    expect(err.trim()).toBe(
      'loopchart: session asking: the run waits for approval of tool call(s) call_1_0, call_1_1; ' +
        'approve or deny them from the application that owns the session (the CLI does not decide for you)',
    );
    const after = await stored('asking');
    expect(after.messages).toEqual(before.messages);
    expect(after.context.approvals.waiting).toEqual(['call_1_0', 'call_1_1']);
  });

  it('stops at a run waiting on an operation, names it and its reason, and leaves the session as it was', async () => {
    const { agent } = await import('./fixtures/cli-operations-agent.js');
    const store = new SqliteSessionStore({ path: db });
    // Stopped after its first reply, before the gate yielded: the resumed run reaches the yield.
    const first = await DurableSession.open({ machine: createAgentMachine(agent), store, sessionId: 'gated', history: [SYSTEM] });
    first.send({ type: 'input', message: 'Fetch both pages.' });
    await until(() => first.actor.getSnapshot().matches({ Running: 'AwaitingOperation' }));
    await first.close();
    await store.close();
    const before = await stored('gated');
    const { code, err } = await inStore('sessions', 'resume', 'gated', '--agent', OPERATIONS_AGENT);
    expect(code).toBe(1);
    expect(err.trim()).toBe(
      "loopchart: session gated: the run waits on operation 'ci-gate' (ci-result); " +
        "send { type: 'operation.resume', operation: 'ci-gate', payload } from the application that owns the session",
    );
    const after = await stored('gated');
    expect(after.messages).toEqual(before.messages);
    expect(after.context.operations.waiting?.operation).toBe('ci-gate');
  });

  it('has nothing to do for a session at rest, and fails clearly for an unknown one', async () => {
    const idle = await inStore('sessions', 'resume', 'midrun', '--agent', AGENT);
    expect(idle.code).toBe(0);
    expect(idle.out).toMatch(/^session midrun: no run in flight \(at rest; last run \(1\) Completed: Both pages fetched\.\); nothing to resume$/m);
    expect(idle.out).toContain(`start its next run: npx loopchart sessions send midrun "your next message" --agent ${AGENT} --store ${db}`);
    const unknown = await inStore('sessions', 'resume', 'ghost');
    expect(unknown.code).toBe(1);
    expect(unknown.err.trim()).toBe(`loopchart: no session 'ghost' in ${db}`);
  });
});

const url = process.env.DATABASE_URL;
describe.skipIf(!url)('--store postgres://', () => {
  const schema = `lc_cli_${process.pid}_${Date.now().toString(36)}`;
  afterAll(async () => {
    const admin = new pg.Pool({ connectionString: url, max: 1 });
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await admin.end();
  });

  it('lists and shows the sessions of a PostgreSQL store', async () => {
    const store = new PostgresSessionStore({ connectionString: url!, schema, max: 1 });
    await runToEnd(store, 'pg-one');
    await store.close();
    const list = await loopchart(['sessions', 'list', '--store', url!, '--schema', schema]);
    expect(list.code, list.err).toBe(0);
    expect(list.out).toMatch(/^pg-one\s+\d+\s+6\s/m);
    const show = await loopchart(['sessions', 'show', 'pg-one', '--store', url!, '--schema', schema]);
    expect(show.out).toContain('Both pages fetched.');
  });
});

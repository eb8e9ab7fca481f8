/**
 * Ctrl-C (issue 24): a real child process gets SIGINT while a model call, a tool call or an
 * approval wait is under way. The run is cancelled (in-flight calls answered as interrupted), the
 * session is kept at rest and the process says how to go on; `loopchart sessions send` or
 * `npm start -- --resume` then continues it, and the transcript holds both runs. A second Ctrl-C
 * exits at once, with 130, even while a tool that ignores its abort signal keeps the process alive.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAgentMachine } from '../../machines/agent.machine.js';
import { DurableSession } from '../../src/sessions/durable-session.js';
import { SqliteSessionStore } from '../../src/stores/sqlite.js';
import { INTERRUPTED_CONTENT, interruptedContent } from '../../src/tools/run-tools.js';
import { agent as slowAgent, SLOW_TOOL_RUNNING } from './fixtures/slow-tool-agent.js';
import { bundledCommand, tsxCommand, type NodeCommand } from './fixtures/processes.js';
import { storedSession } from '../support/stores.js';

/** What a call that waited for its approval is answered when the run is cancelled. */
const NOT_STARTED = interruptedContent({ type: 'cancelled' }, false);
const REPO = fileURLToPath(new URL('../../', import.meta.url));
const DEMO = join(REPO, 'examples', 'demo.ts');
const CLI = join(REPO, 'src', 'cli.ts');
const SLOW_AGENT = fileURLToPath(new URL('./fixtures/slow-tool-agent.ts', import.meta.url));

const dir = mkdtempSync(join(tmpdir(), 'loopchart-interrupt-'));
const db = join(dir, 'sessions.db');

/**
 * The demo and the CLI from bundles (see bundledCommand: a third of tsx's start-up CPU). A CLI
 * command that loads an agent module (--agent, or the demo agent of a demo-… session) runs the
 * source through tsx instead (`cliTsx`), so that module and the CLI share one copy of the
 * library, as they do in a checkout and in the installed package.
 */
let demoBundle: NodeCommand;
let cliBundle: NodeCommand;
const cliTsx = tsxCommand(CLI);
beforeAll(async () => {
  [demoBundle, cliBundle] = await Promise.all([bundledCommand(DEMO), bundledCommand(CLI)]);
});
afterAll(() => {
  demoBundle?.dispose();
  cliBundle?.dispose();
  rmSync(dir, { recursive: true, force: true });
});

interface Child {
  stdout(): string;
  stderr(): string;
  interrupt(): void;
  /** Resolves once stdout matches (it may end without a newline: a question waiting for its answer). */
  until(pattern: RegExp): Promise<void>;
  exited(): boolean;
  done: Promise<{ code: number | null; signal: NodeJS.Signals | null; ms: number }>;
}

/** `node <command> <args>` in the temporary folder, offline, its stdin left open. */
function start(command: NodeCommand, args: string[], env: Record<string, string> = {}): Child {
  const base: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: '1', LOOPCHART_STORE: db, ...env };
  for (const name of ['OPENAI_BASE_URL', 'OPENAI_API_KEY', 'LOOPCHART_MODEL']) delete base[name];
  const child = spawn(process.execPath, [...command.args, ...args], { cwd: dir, env: base, stdio: ['pipe', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  let exited = false;
  const waiters: { pattern: RegExp; resolve(): void }[] = [];
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    stdout += chunk;
    for (const waiter of waiters.splice(0)) (waiter.pattern.test(stdout) ? waiter.resolve() : waiters.push(waiter));
  });
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const started = performance.now();
  const done = new Promise<{ code: number | null; signal: NodeJS.Signals | null; ms: number }>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${command.args.join(' ')} ${args.join(' ')} did not exit within 40 s\n${stdout}\n${stderr}`));
    }, 40_000);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      exited = true;
      resolve({ code, signal, ms: performance.now() - started });
    });
  });
  return {
    stdout: () => stdout,
    stderr: () => stderr,
    interrupt: () => void child.kill('SIGINT'),
    until: (pattern) =>
      new Promise<void>((resolve, reject) => {
        if (pattern.test(stdout)) return resolve();
        waiters.push({ pattern, resolve });
        done.then(() => reject(new Error(`exited before printing ${pattern}\n${stdout}\n${stderr}`)), reject);
      }),
    exited: () => exited,
    done,
  };
}

/** Runs a command to its end. */
async function run(command: NodeCommand, args: string[], env: Record<string, string> = {}) {
  const child = start(command, args, env);
  const { code } = await child.done;
  return { code, out: child.stdout(), err: child.stderr() };
}

/** The CLI without an agent module to load (list, show, fork, a send refused before it loads one). */
const cli = (...args: string[]) => run(cliBundle, args);
/** The CLI loading an agent module: --agent, or the demo agent. */
const cliWithAgent = (...args: string[]) => run(cliTsx, args);
const idOf = (stdout: string) => /^session: +(demo-\d{14}-[0-9a-f]{6}) /m.exec(stdout)![1]!;

const stored = (sessionId: string) => storedSession(db, sessionId);

/** The demo session the first test interrupted, for the fork test. */
let interruptedDemo: string | undefined;

const toolsRun = (history: { role: string; toolName?: string }[]) => history.flatMap((m) => (m.role === 'tool' ? [m.toolName] : []));

describe('Ctrl-C interrupts a run and keeps the session; send / --resume continue it', { timeout: 90_000 }, () => {
  it('during a model call (npm start): Cancelled, exit 130, then `loopchart sessions send` finishes the job', async () => {
    const demo = start(demoBundle, []);
    await demo.until(/turn 2 +waiting for the model/);
    demo.interrupt();
    const exit = await demo.done;
    const id = idOf(demo.stdout());
    interruptedDemo = id;
    expect(exit.code, demo.stderr()).toBe(130);
    expect(demo.stderr()).toContain('interrupted: cancelling the run, the session is kept (Ctrl-C again quits at once)');
    expect(demo.stdout()).toMatch(/■ Cancelled/);
    expect(demo.stdout()).toContain(`the session is kept; continue it: npm start -- --resume ${id}`);
    expect(demo.stdout()).toContain(`npx loopchart sessions send ${id} "your next message" --store ${db}`);
    const cancelled = await stored(id);
    expect(cancelled.lastRun?.outcome.type).toBe('Cancelled');
    // The finished turn is kept: the question, the listing call and its result.
    expect(cancelled.brain.context.history.map((m) => m.role)).toEqual(['system', 'user', 'assistant', 'tool']);

    const sent = await cliWithAgent('sessions', 'send', id, 'Go on.');
    expect(sent.code, sent.err).toBe(0);
    expect(sent.out).toContain(`sending to session ${id} with the demo folder agent`);
    expect(sent.out).toContain('outcome: Completed');
    const show = await cli('sessions', 'show', id);
    expect(show.out).toMatch(/^ {3}1 {2}user {7}How many lines/m);
    expect(show.out).toMatch(/^ {3}4 {2}user {7}Go on\.$/m);
    expect(show.out).toContain('27 lines in all');
    const after = await stored(id);
    expect(after.runIndex).toBe(2);
    expect(after.lastRun?.outcome.type).toBe('Completed');
    expect(toolsRun(after.brain.context.history)).toEqual(['list_dir', 'read_file', 'read_file', 'read_file', 'calculator']);
  });

  it('during a tool call (loopchart sessions send): the call is answered as interrupted, exit 130, send goes on', async () => {
    const store = new SqliteSessionStore({ path: db });
    const fresh = await DurableSession.open({ machine: createAgentMachine(slowAgent()), store, sessionId: 'slow', history: [{ role: 'system', content: 'Be slow.' }] });
    await fresh.close();
    await store.close();

    const first = start(cliTsx, ['sessions', 'send', 'slow', 'Run the slow tool.', '--agent', SLOW_AGENT]);
    await first.until(new RegExp(SLOW_TOOL_RUNNING));
    first.interrupt();
    const exit = await first.done;
    expect(exit.code, first.stderr()).toBe(130);
    expect(first.stderr()).toContain('interrupted: cancelling the run');
    expect(first.stdout()).toContain('outcome: Cancelled');
    expect(first.stdout()).toContain(`the session is kept; continue it: npx loopchart sessions send slow "your next message" --agent ${SLOW_AGENT} --store ${db}`);
    const cancelled = await stored('slow');
    const result = cancelled.brain.context.history.at(-1)!;
    expect(result).toMatchObject({ role: 'tool', toolName: 'slow', isError: true, content: INTERRUPTED_CONTENT });

    // resume has nothing to do now, and says what does.
    const resume = await cliWithAgent('sessions', 'resume', 'slow', '--agent', SLOW_AGENT);
    expect(resume.code).toBe(0);
    expect(resume.out).toContain('no run in flight');
    expect(resume.out).toContain('start its next run: npx loopchart sessions send slow');

    const next = await cliWithAgent('sessions', 'send', 'slow', 'Go on.', '--agent', SLOW_AGENT);
    expect(next.code, next.err).toBe(0);
    expect(next.out).toContain(`outcome: Completed: The slow tool said: ${INTERRUPTED_CONTENT}`);
    const show = await cli('sessions', 'show', 'slow');
    expect(show.out.split('\n').filter((line) => /^ +\d+ {2}/.test(line)).map((line) => line.trim().split(/\s+/)[1])).toEqual([
      'system',
      'user',
      'assistant',
      'tool',
      'user',
      'assistant',
    ]);
  });

  it('during an approval wait (npm start -- --approve): nothing is written, exit 130, then --resume completes', async () => {
    const out = join(dir, 'reports');
    const demo = start(demoBundle, ['--approve', '--out', out]);
    await demo.until(/approve write_file\(.*\)\? \[y\/N\/a\(lways\)\] $/);
    demo.interrupt();
    const exit = await demo.done;
    const id = idOf(demo.stdout());
    expect(exit.code, demo.stderr()).toBe(130);
    expect(demo.stdout()).toContain(`continue it: npm start -- --resume ${id} --approve --out ${out}`);
    const cancelled = await stored(id);
    expect(cancelled.lastRun?.outcome.type).toBe('Cancelled');
    // write_file waited for its approval: it never started.
    expect(cancelled.brain.context.history.at(-1)).toMatchObject({ role: 'tool', toolName: 'write_file', content: NOT_STARTED });
    expect(existsSync(join(out, 'report.md'))).toBe(false);

    // Before issue 24 this printed the header and exited 130 without running anything.
    const resumed = start(demoBundle, ['--resume', id, '--approve', '--out', out]);
    const again = await resumed.done;
    expect(again.code, resumed.stderr()).toBe(0);
    expect(resumed.stdout()).toContain('the last run is over; the next one starts with: Please go on where you stopped.');
    expect(resumed.stdout()).toContain(`I did not write report.md (${NOT_STARTED}).`);
    expect(resumed.stdout()).toMatch(/✓ Completed/);
    const after = await stored(id);
    expect(after.runIndex).toBe(2);
    expect(after.brain.context.history.filter((m) => m.role === 'user').map((m) => m.content)).toEqual([
      'How many lines do the files in this folder have, and which one is the largest?',
      'Please go on where you stopped.',
    ]);
  });

  it('a fork continues with send: a demo fork with the demo agent; any other fork only with --agent', async () => {
    expect(interruptedDemo).toBeDefined();
    const fork = await cli('sessions', 'fork', interruptedDemo!, '--at', '4');
    expect(fork.code, fork.err).toBe(0);
    const forkId = new RegExp(`into (${interruptedDemo}-fork-4-[0-9a-f]+) `).exec(fork.out)?.[1];
    expect(forkId, fork.out).toBeDefined();
    expect(fork.out).toContain(`continue it: npx loopchart sessions send ${forkId} "your next message" --store ${db}`);
    const sent = await cliWithAgent('sessions', 'send', forkId!, 'Go on.');
    expect(sent.code, sent.err).toBe(0);
    expect(sent.out).toContain('27 lines in all');
    expect((await stored(forkId!)).lastRun?.outcome.type).toBe('Completed');

    const named = await cli('sessions', 'fork', interruptedDemo!, '--at', '4', '--as', 'branch');
    expect(named.out).toContain('continue it: npx loopchart sessions send branch "your next message" --store');
    expect(named.out).toContain('--agent ./agent.ts');
    const refused = await cli('sessions', 'send', 'branch', 'Go on.');
    expect(refused.code).toBe(2);
    expect(refused.err).toContain('Name the agent that made it: npx loopchart sessions send branch "…" --agent ./agent.ts');
    // Refused before anything ran: the fork holds the four messages it was cut with.
    expect((await stored('branch')).brain.context.history).toHaveLength(4);
  });

  it('a second Ctrl-C exits at once with 130, while a tool that ignores its abort signal would keep the process alive', async () => {
    const store = new SqliteSessionStore({ path: db });
    await (await DurableSession.open({ machine: createAgentMachine(slowAgent()), store, sessionId: 'stubborn' })).close();
    await store.close();

    const child = start(cliTsx, ['sessions', 'send', 'stubborn', 'Run the slow tool.', '--agent', SLOW_AGENT], { LOOPCHART_TEST_STUBBORN_TOOL: '1' });
    await child.until(new RegExp(SLOW_TOOL_RUNNING));
    child.interrupt();
    await child.until(/outcome: Cancelled/);
    // The run is over and stored, but the tool's timer still holds the process.
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(child.exited()).toBe(false);
    const pressed = performance.now();
    child.interrupt();
    const exit = await child.done;
    expect(exit.code).toBe(130);
    expect(exit.signal).toBeNull();
    expect(performance.now() - pressed).toBeLessThan(5_000);
    expect((await stored('stubborn')).lastRun?.outcome.type).toBe('Cancelled');
  });
});

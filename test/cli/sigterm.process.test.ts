/**
 * SIGTERM, as Docker, Kubernetes and systemd stop a process, takes Ctrl-C's path: `sessions send`
 * cancels its run, stores the session at rest and exits 143 (128 + SIGTERM) where Ctrl-C gives
 * 130; a second signal quits at once; `view` closes and exits 0, as at Ctrl-C.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAgentMachine } from '../../machines/agent.machine.js';
import { DurableSession } from '../../src/sessions/durable-session.js';
import { SqliteSessionStore } from '../../src/stores/sqlite.js';
import { INTERRUPTED_CONTENT } from '../../src/tools/run-tools.js';
import { agent as slowAgent, SLOW_TOOL_RUNNING } from '../sessions/fixtures/slow-tool-agent.js';
import { bundledCommand, REPO, startNode, tsxCommand, type NodeCommand } from '../sessions/fixtures/processes.js';
import { storedSession } from '../support/stores.js';

const SLOW_AGENT = fileURLToPath(new URL('../sessions/fixtures/slow-tool-agent.ts', import.meta.url));
const CLI = join(REPO, 'src/cli.ts');
const dir = mkdtempSync(join(tmpdir(), 'loopchart-sigterm-'));
const db = join(dir, 'sessions.db');
// A command loading an agent module runs the source through tsx: module and CLI share one library.
const cliTsx = tsxCommand(CLI);
let cliBundle: NodeCommand;
beforeAll(async () => {
  cliBundle = await bundledCommand(CLI);
});
afterAll(() => {
  cliBundle?.dispose();
  rmSync(dir, { recursive: true, force: true });
});

async function freshSession(sessionId: string): Promise<void> {
  const store = new SqliteSessionStore({ path: db });
  await (await DurableSession.open({ machine: createAgentMachine(slowAgent()), store, sessionId })).close();
  await store.close();
}

const stored = (sessionId: string) => storedSession(db, sessionId);

/** `sessions send ID` with the slow tool; SIGTERM once the tool runs. */
function sendAndTerminate(sessionId: string, env: Record<string, string> = {}) {
  let signalled = false;
  return startNode([...cliTsx.args, 'sessions', 'send', sessionId, 'Run the slow tool.', '--agent', SLOW_AGENT, '--store', db], {
    cwd: dir,
    env: { NO_COLOR: '1', ...env },
    timeoutMs: 30_000,
    onLine: (line, child) => {
      if (!signalled && line.startsWith(SLOW_TOOL_RUNNING)) {
        signalled = true;
        process.kill(child.pid, 'SIGTERM');
      }
    },
  });
}

describe('SIGTERM stops the CLI as Ctrl-C does', { timeout: 60_000 }, () => {
  it('sessions send: the run is cancelled, the session stored at rest, exit 143', async () => {
    await freshSession('terminated');
    const run = await sendAndTerminate('terminated').done;
    expect(run.signal, run.stderr).toBeNull();
    expect(run.code, run.stderr).toBe(143);
    expect(run.stderr).toContain('terminated (SIGTERM): cancelling the run, the session is kept (a second signal quits at once)');
    expect(run.lines).toContain('outcome: Cancelled');
    const after = await stored('terminated');
    expect(after.lastRun?.outcome.type).toBe('Cancelled');
    expect(after.brain.context.history.at(-1)).toMatchObject({ role: 'tool', toolName: 'slow', isError: true, content: INTERRUPTED_CONTENT });
  });

  it('a second SIGTERM exits at once with 143 while a tool that ignores its abort signal holds the process', async () => {
    await freshSession('stubborn-term');
    const child = sendAndTerminate('stubborn-term', { LOOPCHART_TEST_STUBBORN_TOOL: '1' });
    let exited = false;
    void child.done.then(() => (exited = true), () => (exited = true));
    const until = Date.now() + 20_000;
    while (!exited && !child.lines.includes('outcome: Cancelled') && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 50));
    expect(child.lines).toContain('outcome: Cancelled');
    const sent = performance.now();
    process.kill(child.pid, 'SIGTERM');
    const run = await child.done;
    expect(run.signal).toBeNull();
    expect(run.code).toBe(143);
    expect(performance.now() - sent).toBeLessThan(5_000);
    expect((await stored('stubborn-term')).lastRun?.outcome.type).toBe('Cancelled');
  });

  it('view: the server closes and the process exits 0', async () => {
    await freshSession('viewed');
    let signalled = false;
    const run = await startNode([...cliBundle.args, 'view', '--port', '0', '--store', db], {
      cwd: dir,
      timeoutMs: 20_000,
      onLine: (line, child) => {
        if (!signalled && line.startsWith('loopchart view:')) {
          signalled = true;
          process.kill(child.pid, 'SIGTERM');
        }
      },
    }).done;
    expect(signalled, run.stderr).toBe(true);
    expect(run.signal, run.stderr).toBeNull();
    expect(run.code, run.stderr).toBe(0);
  });
});

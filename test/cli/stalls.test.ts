/**
 * `loopchart sessions send` and `resume` stop at any wait for someone the CLI does not speak for
 * (the rule every host uses, `waitsForSomeone`), with exit 1 and what to do, instead of waiting
 * for ever: a budget that paused the run, a call in doubt after a crash (and, as before, an
 * approval or an operation's yield, tested in test/sessions/cli.process.test.ts).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { createAgentMachine } from '../../machines/agent.machine.js';
import { main } from '../../src/cli/main.js';
import { DurableSession } from '../../src/sessions/durable-session.js';
import { SqliteSessionStore } from '../../src/stores/sqlite.js';
import { agent as budgetAgent } from './fixtures/budget-agent.js';
import { agent as doubtAgent } from './fixtures/doubt-agent.js';

const root = mkdtempSync(join(tmpdir(), 'loopchart-cli-stalls-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const fixture = (name: string) => fileURLToPath(new URL(`./fixtures/${name}`, import.meta.url));

/** Runs the CLI in process; a run that never stops fails the test instead of hanging it. */
async function cli(...argv: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await Promise.race([
    main(argv, { out: (line) => out.push(line), err: (line) => err.push(line) }),
    new Promise<'hung'>((resolve) => setTimeout(() => resolve('hung'), 5_000).unref()),
  ]);
  return { code, out: out.join('\n'), err: err.join('\n') };
}

describe('sessions send and resume at a wait', () => {
  it('a run paused past its budget: exit 1, saying how to raise or seal it; the session stays paused', async () => {
    const store = join(root, 'budget.db');
    const made = new SqliteSessionStore({ path: store });
    await (await DurableSession.open({ machine: createAgentMachine(budgetAgent), store: made, sessionId: 'b1' })).close();
    await made.close();
    const { code, err } = await cli('sessions', 'send', 'b1', 'Look twice.', '--agent', fixture('budget-agent.ts'), '--store', store);
    expect(code).toBe(1);
    expect(err).toContain('session b1: the run is paused past a budget limit');
    expect(err).toContain("{ type: 'budget.raise'");
    const shown = await cli('sessions', 'show', 'b1', '--store', store);
    expect(shown.out).toContain('state: run 1 in flight');
  });

  it('a call in doubt after a crash: exit 1, naming the call and the command that decides it', async () => {
    const path = join(root, 'doubt.db');
    const store = new SqliteSessionStore({ path });
    const session = await DurableSession.open({ machine: createAgentMachine(doubtAgent), store, sessionId: 'd1' });
    session.send({ type: 'input', message: 'Charge it.' });
    for (let i = 0; i < 200 && !JSON.stringify(session.actor.getSnapshot().value).includes('AwaitingTools'); i++) await new Promise((resolve) => setTimeout(resolve, 10));
    // As a SIGKILL leaves it: the call's start is stored, its result never is.
    await session.flush();
    session.actor.stop();
    await store.close();
    const { code, err } = await cli('sessions', 'resume', 'd1', '--agent', fixture('doubt-agent.ts'), '--store', path);
    expect(code).toBe(1);
    expect(err).toContain('tool call(s) c1 were in flight when the session stopped');
    expect(err).toContain('npx loopchart sessions doubt d1 c1 rerun | fail | result JSON');
    // Decided by hand, the run goes on to its end.
    const decided = await cli('sessions', 'doubt', 'd1', 'c1', 'result', '"charged"', '--store', path);
    expect(decided.code).toBe(0);
    const resumed = await cli('sessions', 'resume', 'd1', '--agent', fixture('doubt-agent.ts'), '--store', path);
    expect(resumed.out).toContain('outcome: Completed');
  });
});

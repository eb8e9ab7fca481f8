/**
 * A clean close is not a crash (issue 25, item 5): a session closed with `close()` while its run
 * waits for an approval or an operation's yield records that, and the viewer shows it as closed
 * and each reopen as a reopen, not as a "crash" row; a process that stops without closing is
 * still a crash. Real durable sessions over a store with a trace; the rows are the page's own.
 */
import { describe, expect, it } from 'vitest';
import { waitFor } from 'xstate';
import { z } from 'zod';
import { ciGateOperation } from '../../examples/operations/ci-gate.js';
import { createAgentMachine } from '../../machines/agent.machine.js';
import { scriptedModel } from '../../src/models/scripted.js';
import { DurableSession } from '../../src/sessions/durable-session.js';
import { statePath } from '../../src/sessions/trace.js';
import { MemorySessionStore } from '../../src/stores/memory.js';
import { defineTool } from '../../src/tools/define-tool.js';
import { listSessionViews, loadSessionView } from '../../src/viewer/load.js';
import { rowsOf } from '../../src/viewer/rows.js';

const deploy = (needsApproval: boolean) =>
  defineTool({ name: 'deploy', description: 'Deploys a build.', input: z.object({ build: z.string() }), needsApproval, execute: ({ build }) => `deployed ${build}` });
const script = () => scriptedModel([{ toolCalls: [{ name: 'deploy', args: { build: 'b-7' } }] }, { text: 'Deployed b-7.' }]);

const cases = [
  {
    name: 'an approval',
    machine: () => createAgentMachine({ model: script(), tools: [deploy(true)] }),
    waiting: 'AwaitingApproval',
    shown: 'closed while waiting for approval',
    decide: (session: DurableSession) => session.send({ type: 'approve', toolCallId: session.actor.getSnapshot().context.brain.context.pendingTools[0]!.call.id, by: 'test' }),
  },
  {
    name: "an operation's yield",
    machine: () => createAgentMachine({ model: script(), tools: [deploy(false)], operations: [ciGateOperation()] }),
    waiting: 'AwaitingOperation',
    shown: "closed while waiting on an operation's yield",
    decide: (session: DurableSession) => session.send({ type: 'operation.resume', operation: 'ci-gate', payload: { status: 'passed' } } as never),
  },
];

async function waitingSession(store: MemorySessionStore, machine: ReturnType<typeof createAgentMachine>, waiting: string, input?: string) {
  const session = await DurableSession.open({ machine, store, sessionId: 's' });
  if (input) session.send({ type: 'input', message: input });
  await waitFor(session.actor, (snapshot) => statePath(snapshot.value).includes(waiting), { timeout: 5_000 });
  await session.flush();
  return session;
}

async function rows(store: MemorySessionStore) {
  const view = (await loadSessionView(store, 's'))!;
  return rowsOf({ session: view });
}

describe('a clean close is not a crash', () => {
  for (const c of cases) {
    it(`closed while waiting for ${c.name}: shown as closed, each reopen as a reopen, never a crash`, async () => {
      const store = new MemorySessionStore();
      await (await waitingSession(store, c.machine(), c.waiting, 'Ship b-7.')).close();
      for (let i = 0; i < 2; i++) await (await waitingSession(store, c.machine(), c.waiting)).close();

      const closed = await rows(store);
      const kinds = closed.rows.map((row) => row.kind);
      expect(kinds).not.toContain('resume');
      expect(kinds.filter((kind) => kind === 'closed')).toHaveLength(3);
      expect(kinds.filter((kind) => kind === 'reopen')).toHaveLength(2);
      expect(closed.rows.filter((row) => row.kind === 'closed' || row.kind === 'reopen').every((row) => !row.error)).toBe(true);
      expect(closed.rows.find((row) => row.kind === 'closed')!.title).toMatch(new RegExp(`^session ${c.shown.replace(/[()'.]/g, '.')} \\(stored at version \\d+\\); reopening it continues the run$`));
      expect(closed.closed).toBe(c.shown);
      expect((await listSessionViews(store))[0]!.outcome).toBe(c.shown);

      // Decided after the last reopen: the run ends, the session is no longer shown as closed.
      const last = await waitingSession(store, c.machine(), c.waiting);
      c.decide(last);
      expect((await last.whenIdle())!.outcome).toEqual({ type: 'Completed', finalText: 'Deployed b-7.' });
      await last.close();
      const done = await rows(store);
      expect(done.closed).toBeNull();
      expect(done.rows.map((row) => row.kind)).not.toContain('resume');
      expect((await listSessionViews(store))[0]!.outcome).toBe('Completed');
    });
  }

  it('a process that stops without closing is still a crash, also after an earlier clean close', async () => {
    const store = new MemorySessionStore();
    const { machine, waiting } = cases[0]!;
    await (await waitingSession(store, machine(), waiting, 'Ship b-7.')).close();
    // Reopened, then gone without close(): what a SIGKILL leaves.
    (await waitingSession(store, machine(), waiting)).actor.stop();
    await (await waitingSession(store, machine(), waiting)).close();
    const { rows: all } = await rows(store);
    expect(all.filter((row) => ['closed', 'reopen', 'resume'].includes(row.kind)).map((row) => [row.kind, row.error])).toEqual([
      ['closed', false],
      ['reopen', false],
      ['resume', true],
      ['closed', false],
    ]);
    expect(all.find((row) => row.kind === 'resume')!.title).toMatch(/^crash: the process stopped mid-run/);
  });
});

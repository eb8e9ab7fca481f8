/**
 * Approve and deny racing from two processes (issue 26 item 1): each decides the same waiting
 * call straight in the SQLite store; the row's version check lets one win, the other re-reads
 * and is refused. The trace shows one decision and one refusal; the agent then does what the
 * winner said.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import { type AgentEmitted } from '../../../src/agent/protocol/actor-types.js';
import { scriptedModel } from '../../../src/models/scripted.js';
import { DurableSession } from '../../../src/sessions/durable-session.js';
import { readSessionTrace } from '../../../src/sessions/trace.js';
import { SqliteSessionStore } from '../../../src/stores/sqlite.js';
import { runChild } from './fixtures/processes.js';
import { bundledCommand, type NodeCommand } from '../../sessions/fixtures/processes.js';
import { awaitingApproval, guardedTool } from '../../support/hitl.js';

const CHILD = fileURLToPath(new URL('./fixtures/decide-child.ts', import.meta.url));
const root = mkdtempSync(join(tmpdir(), 'loopchart-race-'));
let child: NodeCommand;
beforeAll(async () => {
  child = await bundledCommand(CHILD);
});
afterAll(() => {
  child?.dispose();
  rmSync(root, { recursive: true, force: true });
});

describe('approve and deny from two processes at once', () => {
  it('one wins, the other is refused (already-decided); the trace says so and the run follows the winner', async () => {
    const db = join(root, 'race.db');
    const { tool, ran } = guardedTool();
    const machine = () => createAgentMachine({ model: scriptedModel([{ toolCalls: [{ id: 'w1', name: 'write_file', args: { path: 'a.txt', content: 'x' } }] }, { text: 'done' }]), tools: [tool], retry: false });
    const store = new SqliteSessionStore({ path: db });
    const asked: Extract<AgentEmitted, { type: 'approval.requested' }>[] = [];
    const session = await DurableSession.open({ machine: machine(), store, sessionId: 'race', attach: (a) => a.on('approval.requested', (e) => asked.push(e)) });
    session.send({ type: 'input', message: 'go' });
    await awaitingApproval(session.actor);
    await session.close();
    const request = asked[0]!.requests[0]!;

    const [ana, bob] = await Promise.all(
      // Each reads the row, then waits for the other to have read it too: both decide against the same version.
      [
        { approved: true, by: 'ana', barrier: { mine: join(root, 'ana'), theirs: join(root, 'bob') } },
        { approved: false, by: 'bob', barrier: { mine: join(root, 'bob'), theirs: join(root, 'ana') } },
      ].map((verdict) => runChild(child, [JSON.stringify({ db, sessionId: 'race', request, ...verdict })], { timeoutMs: 60_000 })),
    );
    const said = [ana!, bob!].map((run) => (expect(run.code, run.stderr).toBe(0), run.lines.at(-1)));
    expect(said.sort()).toEqual(['DECIDED', 'REFUSED already-decided']);
    const approved = ana!.lines.at(-1) === 'DECIDED';

    const trace = (await readSessionTrace(store, 'race')).flatMap((r) => ('entry' in r ? [r.entry] : []));
    const decisions = trace.filter((e) => e.type === 'approval' || e.type === 'approval.refused');
    expect(decisions).toEqual([
      expect.objectContaining({ type: 'approval', toolCallId: 'w1', approved, by: approved ? 'ana' : 'bob', digest: request.digest }),
      expect.objectContaining({ type: 'approval.refused', toolCallId: 'w1', approved: !approved, by: approved ? 'bob' : 'ana', refusal: 'already-decided' }),
    ]);

    // The agent reopens the session and does what the winner decided, asking nobody again.
    const again: unknown[] = [];
    const resumed = await DurableSession.open({ machine: machine(), store, sessionId: 'race', attach: (a) => a.on('approval.requested', (e) => again.push(e)) });
    await resumed.whenIdle();
    await resumed.close();
    await store.close();
    expect(again).toEqual([]);
    expect(ran.map((r) => r.path)).toEqual(approved ? ['a.txt'] : []);
  });
});

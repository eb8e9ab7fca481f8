/** Operations under a durable session (issue 15): slices and yields stored with the session, a finished hook never run twice. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { waitFor } from 'xstate';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import type { Operation } from '../../../src/agent/operations/operation.js';
import { OperationStateError } from '../../../src/agent/operations/operation.js';
import { scriptedModel } from '../../../src/models/scripted.js';
import { DurableSession } from '../../../src/sessions/durable-session.js';
import { SqliteSessionStore } from '../../../src/stores/sqlite.js';
import type { SessionStore, StepWrite } from '../../../src/stores/session-store.js';
import { ticketOperation } from '../../../examples/operations/ticket.js';
import { deferred, echoTool, WAIT_MS } from '../../support/driver.js';

const root = mkdtempSync(join(tmpdir(), 'loopchart-ops-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
let n = 0;

const script = () => scriptedModel([{ toolCalls: [{ name: 'echo', args: { text: 'x' } }] }, { text: 'done' }]);

describe('a durable session with operations', () => {
  it('journals each finished hook: reopened mid-point, the finished hook is replayed, not run again; the slice is restored', async () => {
    const store = new SqliteSessionStore({ path: join(root, `journal-${n++}.db`) });
    const runs: string[] = [];
    const stuck = deferred();
    const ops = (hang: boolean): Operation[] => [
      ticketOperation('T-1'),
      {
        name: 'audit',
        async afterReply(_reply, ctx) {
          runs.push(`audit:${ctx.turn}`);
        },
      },
      {
        name: 'slow',
        async afterReply(_reply, ctx) {
          runs.push(`slow:${ctx.turn}`);
          if (hang) {
            stuck.resolve();
            await new Promise((_, reject) => ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason)));
          }
        },
      },
    ];
    const first = await DurableSession.open({ machine: createAgentMachine({ model: script(), tools: [echoTool], operations: ops(true) }), store, sessionId: 't' });
    first.send({ type: 'input', message: 'go' });
    await stuck.promise;
    await first.close(); // the process goes away while 'slow' runs: 'ticket' and 'audit' are done, journaled
    expect(runs).toEqual(['audit:1', 'slow:1']);
    const stored = (await store.load('t'))!.state as { operations: { point: { next: number } | null } };
    expect(stored.operations.point).not.toBeNull();

    const second = await DurableSession.open({ machine: createAgentMachine({ model: script(), tools: [echoTool], operations: ops(false) }), store, sessionId: 't' });
    const output = await second.whenIdle();
    expect(output!.outcome).toEqual({ type: 'Completed', finalText: 'done' });
    // 'audit' ran once for turn 1 (replayed from the journal on reopen, or already applied), 'slow' again.
    expect(runs).toEqual(['audit:1', 'slow:1', 'slow:1', 'audit:2', 'slow:2']);
    expect(second.actor.getSnapshot().context.operations.slices).toEqual({
      ticket: { id: 'T-1', status: 'answered', toolsUsed: ['echo'], replies: 2 },
    });
    await second.close();
    // The journal entries of finished points are cleared with the step that closed them.
    expect(await store.journaledToolResults('t', 't:run-1:turn-1:model:after')).toEqual([]);
    const row = (await store.load('t'))!.state as { operations: unknown };
    expect(row.operations).toEqual({
      slices: { ticket: { id: 'T-1', status: 'answered', toolsUsed: ['echo'], replies: 2 } },
      point: null,
      done: 't:run-1:turn-2:model:after',
      waiting: null,
    });
    await store.close();
  });

  it('a hook that finished before its effects were stored is replayed from the journal, never run again', async () => {
    const path = join(root, `replay-${n++}.db`);
    const inner = new SqliteSessionStore({ path });
    const runs: string[] = [];
    const ops: Operation[] = ['audit', 'second'].map((name) => ({
      name,
      async afterReply(_reply, ctx) {
        runs.push(`${name}:${ctx.turn}`);
      },
    }));
    // The store stops answering the step that would store 'audit's effects: the process "dies" there.
    const blocked = deferred();
    const store: SessionStore = Object.assign(Object.create(inner) as SessionStore, {
      apply: (sessionId: string, write: StepWrite) => {
        const point = (write.state as { operations: { point: { next: number } | null } }).operations.point;
        if (point && point.next >= 1) {
          blocked.resolve();
          return new Promise<number>(() => {});
        }
        return inner.apply(sessionId, write);
      },
    });
    const first = await DurableSession.open({ machine: createAgentMachine({ model: script(), tools: [echoTool], operations: ops }), store, sessionId: 'r' });
    first.send({ type: 'input', message: 'go' });
    await blocked.promise;
    expect(await inner.journaledToolResults('r', 'r:run-1:turn-1:model:after')).toEqual([
      { role: 'tool', toolCallId: 'audit', toolName: 'operation', content: 'null' },
    ]);
    first.actor.stop();
    expect(runs).toEqual(['audit:1']);

    const reopened = new SqliteSessionStore({ path });
    const second = await DurableSession.open({ machine: createAgentMachine({ model: script(), tools: [echoTool], operations: ops }), store: reopened, sessionId: 'r' });
    expect((await second.whenIdle())!.outcome).toEqual({ type: 'Completed', finalText: 'done' });
    expect(runs).toEqual(['audit:1', 'second:1', 'audit:2', 'second:2']);
    await second.close();
    await reopened.close();
  });

  it('a stored slice the schema refuses: DurableSession.open fails with OperationStateError naming the operation; nothing is written', async () => {
    const path = join(root, `bad-slice-${n++}.db`);
    const store = new SqliteSessionStore({ path });
    const machine = createAgentMachine({ model: script(), tools: [echoTool], operations: [ticketOperation('T-2')] });
    const session = await DurableSession.open({ machine, store, sessionId: 'b' });
    session.send({ type: 'input', message: 'go' });
    await session.whenIdle();
    await session.close();
    const before = (await store.load('b'))!;
    const { default: Database } = await import('better-sqlite3');
    const db = new Database(path);
    const row = JSON.parse((db.prepare("SELECT state FROM sessions WHERE session_id = 'b'").get() as { state: string }).state);
    row.operations.slices.ticket.status = 'lost';
    db.prepare("UPDATE sessions SET state = ? WHERE session_id = 'b'").run(JSON.stringify(row));
    db.close();
    const attempt = await DurableSession.open({ machine, store, sessionId: 'b' }).then(
      () => null,
      (error: unknown) => error,
    );
    expect(OperationStateError.isInstance(attempt)).toBe(true);
    expect((attempt as OperationStateError).operation).toBe('ticket');
    const after = (await store.load('b'))!;
    expect(after.version).toBe(before.version);
    expect(after.messages).toEqual(before.messages);
    await store.close();
  });

  it('a yield is stored: a session reopened in another actor waits on the same operation and resumes', async () => {
    const { ciGateOperation } = await import('../../../examples/operations/ci-gate.js');
    const store = new SqliteSessionStore({ path: join(root, `yield-${n++}.db`) });
    const machine = () => createAgentMachine({ model: script(), tools: [echoTool], operations: [ciGateOperation({ gatedTools: ['echo'] })] });
    const first = await DurableSession.open({ machine: machine(), store, sessionId: 'y' });
    first.send({ type: 'input', message: 'go' });
    await waitFor(first.actor, (s) => s.matches({ Running: 'AwaitingOperation' }), { timeout: WAIT_MS });
    await first.close();
    const yielded: unknown[] = [];
    const second = await DurableSession.open({ machine: machine(), store, sessionId: 'y', attach: (actor) => actor.on('operation.yielded', (e) => yielded.push(e)) });
    await waitFor(second.actor, (s) => s.matches({ Running: 'AwaitingOperation' }), { timeout: WAIT_MS });
    expect(yielded).toEqual([{ type: 'operation.yielded', operation: 'ci-gate', reason: 'ci-result', payload: { calls: ['call_1_0'] } }]);
    second.send({ type: 'operation.resume', operation: 'ci-gate', payload: { status: 'passed' } });
    expect((await second.whenIdle())!.outcome).toEqual({ type: 'Completed', finalText: 'done' });
    await second.close();
    await store.close();
  });
});

/**
 * loopchart/restate against a real Restate server and a real worker process, all on 127.0.0.1:
 * one run end to end, the event stream, control from other clients (cancel, steer, approval
 * across a worker restart), serialized sends, malformed payloads, an older stored row.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SESSION_ROW_VERSION } from '../../src/sessions/session-row.js';
import { DurableSession, MemorySessionStore, type Message, type Outcome } from '../../src/index.js';
import { UNEXPECTED_MAX_ATTEMPTS } from '../../src/restate/unexpected.js';
import { fixtureMachine } from './fixtures/agent.js';
import { IngressClient } from './support/ingress.js';
import { RestateServer, freePort, waitFor } from './support/server.js';
import { SERVER_BINARY, readToolLog } from './support/suite.js';
import { startWorker, type Worker } from './support/workers.js';

interface Summary {
  state: string;
  running: boolean;
  turnsTaken: number;
  messageCount: number;
  outcome: Outcome | null;
}
interface Streamed {
  events: { index: number; event: { type: string; [key: string]: unknown } }[];
  next: number;
}

describe.skipIf(!SERVER_BINARY)('Restate session object (real server, real worker)', () => {
  let server: RestateServer;
  let worker: Worker;
  let workerPort: number;
  let dir: string;
  let toolLog: string;
  let client: IngressClient;
  let other: IngressClient;
  let faultFile: string;
  const startOurWorker = () =>
    startWorker({ TOOL_LOG: toolLog, INGRESS: server.ingressUrl, PORT: String(workerPort), INACTIVITY_MS: '500', FAULT_FILE: faultFile });

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'loopchart-restate-object-'));
    toolLog = join(dir, 'tools.log');
    faultFile = join(dir, 'fault');
    server = await RestateServer.start(SERVER_BINARY!);
    workerPort = await freePort();
    worker = await startOurWorker();
    await server.register(worker.url);
    client = new IngressClient(server.ingressUrl);
    other = new IngressClient(server.ingressUrl);
  });

  afterAll(async () => {
    await worker?.kill('SIGTERM');
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const toolLines = (session: string) =>
    existsSync(toolLog) ? readToolLog(readFileSync(toolLog, 'utf8')).filter((line) => line.key.startsWith(`${session}:`)) : [];

  /** The first event of `type` on a session's stream, read from its start by `reader` until it is there. */
  const firstEvent = (reader: IngressClient, session: string, type: string, timeoutMs?: number) =>
    waitFor(type, async () => {
      const page = await reader.ok<Streamed>(session, 'events', { cursor: 0, limit: 1000 });
      return page.events.find((e) => e.event.type === type)?.event;
    }, timeoutMs);

  it('runs a session to its outcome: every step journaled once, the state in K/V, the same transcript as in one process', async () => {
    const reply = await client.ok<Summary>('basic', 'send', { message: 'hello' });
    expect(reply.outcome).toEqual({ type: 'Completed', finalText: 'done: basic (hello) after 3 tool results' });
    const state = await other.ok<Summary>('basic', 'state');
    expect(state).toMatchObject({ running: false, turnsTaken: 3, messageCount: 7, outcome: reply.outcome });
    const transcript = await other.ok<Message[]>('basic', 'transcript');
    // The same session in one process on a store: the same conversation.
    const store = new MemorySessionStore();
    const local = await DurableSession.open({ machine: fixtureMachine({ toolLog: join(dir, 'local.log') }), store, sessionId: 'basic' });
    local.send({ type: 'input', message: 'hello' });
    await local.whenIdle();
    expect(transcript).toEqual(local.actor.getSnapshot().context.brain.context.history);
    await local.close();
    expect(toolLines('basic').map((line) => line.key).sort()).toEqual([
      'basic:run-1:turn-1:tools:t1a',
      'basic:run-1:turn-1:tools:t1b',
      'basic:run-1:turn-2:tools:t2',
    ]);
  });

  it('streams tool events and text deltas to a client polling with a cursor while the run goes', async () => {
    const invocation = await client.enqueue('stream', 'send', { message: 'slow stream' });
    const seen: string[] = [];
    let cursor = 0;
    let sawToolBeforeEnd = false;
    await waitFor('run.finished on the stream', async () => {
      const page = await other.ok<Streamed>('stream', 'events', { cursor });
      for (const { index, event } of page.events) {
        expect(index).toBe(cursor + seen.length - seen.length + (index - cursor)); // indices only grow
        seen.push(event.type);
      }
      cursor = page.next;
      if (!seen.includes('run.finished') && seen.includes('tool.finished')) sawToolBeforeEnd = true;
      return seen.includes('run.finished') && seen.includes('text.delta') ? true : undefined;
    }, 30_000, 100);
    await client.attach(invocation);
    expect(sawToolBeforeEnd).toBe(true);
    expect(seen.filter((type) => type === 'tool.started')).toHaveLength(3);
    // Reading the stream changed nothing: the state is what the run left.
    expect((await other.ok<Summary>('stream', 'state')).messageCount).toBe(7);
    const again = await other.ok<Streamed>('stream', 'events', { cursor: 0, limit: 1000 });
    expect(again.next).toBe(cursor);
  });

  it('a cancel from another client ends a run in flight at its next coherent point', async () => {
    const invocation = await client.enqueue('cancel', 'send', { message: 'slow cancel' });
    await waitFor('the run to be in flight', async () => ((await other.ok<Summary>('cancel', 'state')).running ? true : undefined));
    await other.ok('cancel', 'cancel', {});
    const reply = await client.attach<Summary>(invocation);
    expect(reply.outcome).toEqual({ type: 'Cancelled' });
    // Taken during the first model call: no tool of the run ever ran.
    expect(toolLines('cancel')).toEqual([]);
    // Not poisoned: the next run goes.
    expect((await client.ok<Summary>('cancel', 'send', { message: 'fine' })).outcome?.type).toBe('Completed');
  });

  it('a seal from another client ends a run in flight with its reason', async () => {
    const invocation = await client.enqueue('seal', 'send', { message: 'slow seal' });
    await waitFor('the run to be in flight', async () => ((await other.ok<Summary>('seal', 'state')).running ? true : undefined));
    await other.ok('seal', 'seal', { reason: 'operator stop' });
    const reply = await client.attach<Summary>(invocation);
    expect(reply.outcome).toEqual({ type: 'Sealed', reason: 'operator stop' });
  });

  it('a worker SIGKILLed during a tool call: the call runs again with the same key, finished steps do not', async () => {
    const invocation = await client.enqueue('inflight', 'send', { message: 'please hang' });
    await waitFor('the tool call in flight', async () => (toolLines('inflight').some((line) => line.line.endsWith('hang/c')) ? true : undefined));
    const killed = worker.child.pid;
    await worker.kill('SIGKILL');
    worker = await startOurWorker();
    const reply = await client.attach<Summary>(invocation);
    expect(reply.outcome).toEqual({ type: 'Completed', finalText: 'done: inflight (please hang) after 3 tool results' });
    const lines = toolLines('inflight');
    const inFlight = lines.filter((line) => line.key === 'inflight:run-1:turn-2:tools:t2');
    expect(inFlight.map((line) => line.pid === killed)).toEqual([true, false]);
    expect(lines.filter((line) => line.key !== 'inflight:run-1:turn-2:tools:t2').map((line) => line.key).sort()).toEqual([
      'inflight:run-1:turn-1:tools:t1a',
      'inflight:run-1:turn-1:tools:t1b',
    ]);
  });

  it('a steer from another client reaches the brain at its next coherent point', async () => {
    const invocation = await client.enqueue('steer', 'send', { message: 'slow steer' });
    await waitFor('the run to be in flight', async () => ((await other.ok<Summary>('steer', 'state')).running ? true : undefined));
    await other.ok('steer', 'steer', { message: 'also mention the weather' });
    const reply = await client.attach<Summary>(invocation);
    expect(reply.outcome?.type).toBe('Completed');
    const transcript = await other.ok<Message[]>('steer', 'transcript');
    const steering = transcript.findIndex((m) => m.role === 'user' && m.content === 'also mention the weather');
    expect(steering).toBeGreaterThan(1);
    // Delivered between steps, never between a tool call and its result.
    expect(transcript[steering - 1]!.role).toBe('tool');
  });

  it('two clients sending to one session are serialized: one run after the other, never interleaved', async () => {
    const [a, b] = await Promise.all([
      client.ok<Summary>('pair', 'send', { message: 'from a' }),
      other.ok<Summary>('pair', 'send', { message: 'from b' }),
    ]);
    expect([a.outcome?.type, b.outcome?.type]).toEqual(['Completed', 'Completed']);
    const transcript = await client.ok<Message[]>('pair', 'transcript');
    expect(transcript).toHaveLength(14);
    const users = transcript.flatMap((m, i) => (m.role === 'user' ? [i] : []));
    expect(users).toEqual([0, 7]);
    const first = transcript[0]!.content as string;
    const finals = transcript.filter((m) => m.role === 'assistant' && m.content.startsWith('done'));
    expect(finals.map((m) => m.content)).toEqual([
      `done: pair (${first}) after 3 tool results`,
      `done: pair (${first === 'from a' ? 'from b' : 'from a'}) after 6 tool results`,
    ]);
  });

  it('a malformed payload is a terminal 400 naming the problem, and the session is not poisoned', async () => {
    const bad = await client.call('bad', 'send', { message: 42 });
    expect(bad.status).toBe(400);
    expect(JSON.stringify(bad.body)).toMatch(/send: invalid payload.*message/);
    const extra = await client.call('bad', 'send', { message: 'hi', surprise: true });
    expect(extra.status).toBe(400);
    expect(JSON.stringify(extra.body)).toMatch(/surprise/);
    const approve = await client.call('bad', 'approve', { always: true });
    expect(approve.status).toBe(400);
    expect(JSON.stringify(approve.body)).toMatch(/toolCallId/);
    expect((await client.ok<Summary>('bad', 'send', { message: 'hello' })).outcome?.type).toBe('Completed');
  });

  it('a message too big for the context window fails its own run only: the stored conversation is kept and the next send runs', async () => {
    const before = await client.ok<Summary>('oversized', 'send', { message: 'hello' });
    expect(before.outcome?.type).toBe('Completed');
    const huge = await client.ok<Summary>('oversized', 'send', { message: 'word '.repeat(400_000) });
    expect(huge).toMatchObject({ messageCount: before.messageCount, outcome: { type: 'Failed', error: { type: 'CompactionStalled' } } });
    // Before: every later send failed CompactionStalled too (the next run's estimate counted the discarded message).
    const after = await client.ok<Summary>('oversized', 'send', { message: 'small' });
    expect(after.outcome).toEqual({ type: 'Completed', finalText: 'done: oversized (small) after 6 tool results' });
    expect(after.messageCount).toBe(before.messageCount * 2);
  });

  it('a session made with a memory scope keeps it: its tools are told it, another scope is refused (403) and changes nothing, none keeps it', async () => {
    const first = await client.ok<Summary & { scope: string | null }>('scoped', 'send', { message: 'hello', scope: 'user:ada' });
    expect(first).toMatchObject({ scope: 'user:ada', outcome: { type: 'Completed' } });
    const lines = toolLines('scoped');
    expect(lines.length).toBeGreaterThan(0);
    expect(lines.map((line) => line.scope)).toEqual(lines.map(() => 'user:ada'));
    const refused = await other.call('scoped', 'send', { message: 'again', scope: 'user:bob' });
    expect(refused.status).toBe(403);
    expect(JSON.stringify(refused.body)).toMatch(/belongs to another scope/);
    expect(JSON.stringify(refused.body)).not.toMatch(/ada/);
    expect(await other.ok<Summary>('scoped', 'state')).toMatchObject({ messageCount: first.messageCount, scope: 'user:ada' });
    expect(toolLines('scoped')).toHaveLength(lines.length);
    const kept = await client.ok<Summary & { scope: string | null }>('scoped', 'send', { message: 'more' });
    expect(kept).toMatchObject({ scope: 'user:ada', outcome: { type: 'Completed' } });
    expect(toolLines('scoped').slice(lines.length).map((line) => line.scope)).toEqual(toolLines('scoped').slice(lines.length).map(() => 'user:ada'));
    const bad = await client.call('unscoped', 'send', { message: 'hi', scope: 'a\u0007b' });
    expect(bad.status).toBe(400);
    expect(JSON.stringify(bad.body)).toMatch(/scope/);
  });

  it('every payload refusal names its field: a fractional or wrong-typed events cursor or limit included', async () => {
    for (const [body, field] of [
      [{ cursor: 1.5 }, 'cursor'],
      [{ cursor: 'x' }, 'cursor'],
      [{ limit: 0 }, 'limit'],
      [{ limit: 'ten' }, 'limit'],
      [{ cursor: 0, from: 3 }, 'from'],
    ] as const) {
      const refused = await client.call('bad', 'events', body);
      expect(refused.status).toBe(400);
      expect(JSON.stringify(refused.body)).toMatch(new RegExp(`events: invalid payload: ${field}:`));
    }
    expect((await client.call('bad', 'events', null)).status).toBe(200);
  });

  it('an unexpected error in send is retried a bounded number of times, then the client sees TurnFailed and the session takes the next input', async () => {
    const faulty = new IngressClient(server.ingressUrl, 'faultySession');
    expect((await faulty.ok<Summary>('fault-1', 'send', { message: 'before' })).outcome?.type).toBe('Completed');
    writeFileSync(faultFile, '');
    try {
      const failed = await faulty.call('fault-1', 'send', { message: 'during' }, 60_000);
      expect(failed.status).toBe(500);
      expect(JSON.stringify(failed.body)).toMatch(/send: TurnFailed: the turn failed 4 times: Error: injected host fault/);
      expect(readFileSync(faultFile, 'utf8').split('\n').filter(Boolean)).toHaveLength(UNEXPECTED_MAX_ATTEMPTS);
    } finally {
      rmSync(faultFile, { force: true });
    }
    const next = await faulty.ok<Summary>('fault-1', 'send', { message: 'after' });
    expect(next).toMatchObject({ running: false, outcome: { type: 'Completed' } });
    const transcript = await faulty.ok<Message[]>('fault-1', 'transcript');
    expect(transcript.filter((m) => m.role === 'user').map((m) => m.content)).toEqual(['before', 'after']);
  });

  it('the agent stopping mid-run (a chart error) is retried a bounded number of times, then the run in flight ends Failed and the next input runs', async () => {
    const faulty = new IngressClient(server.ingressUrl, 'faultySession');
    writeFileSync(faultFile, 'mid\n');
    try {
      const failed = await faulty.call('fault-2', 'send', { message: 'during' }, 60_000);
      expect(failed.status).toBe(500);
      expect(JSON.stringify(failed.body)).toMatch(/send: TurnFailed: the turn failed 4 times: .*the agent stopped.*injected chart fault/);
      expect(readFileSync(faultFile, 'utf8').split('\n').filter((line) => line === 'attempt')).toHaveLength(UNEXPECTED_MAX_ATTEMPTS);
    } finally {
      rmSync(faultFile, { force: true });
    }
    const stopped = await faulty.ok<Summary>('fault-2', 'state');
    expect(stopped).toMatchObject({ running: false, outcome: { type: 'Failed', error: { type: 'TurnFailed' } } });
    const next = await faulty.ok<Summary>('fault-2', 'send', { message: 'after' });
    expect(next).toMatchObject({ running: false, outcome: { type: 'Completed' } });
  });

  it('waits for an approval across a worker restart, suspended, and is approved from another client', async () => {
    const invocation = await client.enqueue('approval', 'send', { message: 'please deploy' });
    const requested = ((await firstEvent(other, 'approval', 'approval.requested')).calls as { id: string }[])[0]!;
    // Waiting costs no worker: Restate suspends the invocation (after INACTIVITY_MS)...
    const status = await waitFor('the waiting run to be suspended', async () => {
      const rows = await server.query<{ status: string }>(`SELECT status FROM sys_invocation WHERE id = '${invocation}'`);
      return rows[0]?.status === 'suspended' ? rows[0].status : undefined;
    });
    expect(status).toBe('suspended');
    // ...and the worker may die meanwhile; a new one takes over when the decision comes.
    await worker.kill('SIGKILL');
    worker = await startOurWorker();
    await other.ok('approval', 'approve', { toolCallId: requested.id });
    const reply = await client.attach<Summary>(invocation);
    expect(reply.outcome).toEqual({ type: 'Completed', finalText: 'done: approval (please deploy) after 3 tool results' });
    const lines = toolLines('approval');
    expect(lines.filter((line) => line.line === 'deployed approval')).toHaveLength(1);
    // Steps finished before the restart were not run again.
    expect(lines.filter((line) => line.key.endsWith(':t1a'))).toHaveLength(1);
  });

  it('a pausing time budget aborts the model call in flight; the run waits suspended, and after a raise its replay takes the same branch', async () => {
    const timed = new IngressClient(server.ingressUrl, 'timedSession');
    const invocation = await timed.enqueue('deadline', 'send', { message: 'think forever' });
    const paused = await firstEvent(timed, 'deadline', 'budget.paused', 10_000);
    expect(paused).toMatchObject({ kind: 'duration', limit: 150 });
    // The journal's durable timer ended the call: it was made once.
    expect(toolLines('deadline').map((line) => line.line)).toEqual(['model hangs']);
    // Suspended while it waits: the raise below wakes it by replaying the journal (the aborted
    // call's step and the timer that beat it), which must take the branch the live run took.
    await waitFor('the paused run to be suspended', async () => {
      const rows = await server.query<{ status: string }>(`SELECT status FROM sys_invocation WHERE id = '${invocation}'`);
      return rows[0]?.status === 'suspended' ? true : undefined;
    });
    await timed.ok('deadline', 'resumeOperation', { operation: 'budget', payload: { budget: { maxDurationMs: 60_000 } } });
    const reply = await timed.attach<Summary>(invocation);
    expect(reply.outcome).toEqual({ type: 'Completed', finalText: 'answered after the raise' });
    expect(toolLines('deadline').map((line) => line.line)).toEqual(['model hangs', 'model answers']);
  });

  it('a time budget longer than the inactivity timeout still ends a call that never answers (before: pending until Restate aborted the attempt, 10 minutes)', async () => {
    const raised = new IngressClient(server.ingressUrl, 'raisedSession');
    const invocation = await raised.enqueue('long-budget', 'send', { message: 'think forever' });
    const reply = await raised.attach<Summary>(invocation, 15_000);
    expect(reply.outcome).toMatchObject({ type: 'Sealed', reason: expect.stringMatching(/^budget: \d+ ms elapsed, limit 1000 ms$/) });
    expect(toolLines('long-budget').map((line) => line.line)).toEqual(['model hangs']);
  });

  it('a pausing budget whose deadline comes while a tool runs lets the tool finish, once, then pauses; a raise completes the run', async () => {
    const paced = new IngressClient(server.ingressUrl, 'pacedSession');
    const invocation = await paced.enqueue('paced', 'send', { message: 'go slow' });
    const paused = await firstEvent(paced, 'paced', 'budget.paused', 15_000);
    expect(paused).toMatchObject({ kind: 'duration', limit: 800 });
    expect(toolLines('paced').map((line) => line.line)).toEqual(['slow starts', 'slow ends']);
    await paced.ok('paced', 'raise', { budget: { maxDurationMs: 60_000 } });
    const reply = await paced.attach<Summary>(invocation);
    expect(reply.outcome).toEqual({ type: 'Completed', finalText: 'done after the raise' });
    expect(await paced.ok<{ content: string }[]>('paced', 'transcript', {})).toContainEqual(expect.objectContaining({ role: 'tool', content: 'slow done' }));
    expect(toolLines('paced').map((line) => line.line)).toEqual(['slow starts', 'slow ends']);
  });

  it('a pausing budget whose deadline comes while a tool runs and another call waits for approval: the approval given past the limit is kept, the call starts only after the raise (before: the run never paused)', async () => {
    const heldClient = new IngressClient(server.ingressUrl, 'heldSession');
    const started = Date.now();
    const invocation = await heldClient.enqueue('held', 'send', { message: 'go slow, then ship' });
    const requested = ((await firstEvent(heldClient, 'held', 'approval.requested', 10_000)).calls as { id: string; name: string }[])[0]!;
    expect(requested.name).toBe('ship');
    // Past the 800 ms limit, while `slow` still runs (1.5 s): the decision is kept, its call not started.
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, started + 1_000 - Date.now())));
    await heldClient.ok('held', 'approve', { toolCallId: requested.id });
    const paused = await firstEvent(heldClient, 'held', 'budget.paused', 15_000);
    expect(paused).toMatchObject({ kind: 'duration', limit: 800 });
    expect(toolLines('held').map((line) => line.line)).toEqual(['slow starts', 'slow ends']);
    await heldClient.ok('held', 'raise', { budget: { maxDurationMs: 60_000 } });
    const reply = await heldClient.attach<Summary>(invocation);
    expect(reply.outcome).toEqual({ type: 'Completed', finalText: 'shipped after the raise' });
    // Each call ran once; the approved one after the raise, without being asked again.
    expect(toolLines('held').map((line) => line.line)).toEqual(['slow starts', 'slow ends', 'shipped']);
    const page = await heldClient.ok<Streamed>('held', 'events', { cursor: 0, limit: 1000 });
    expect(page.events.filter((entry) => entry.event.type === 'approval.requested')).toHaveLength(1);
  });

  it('an output schema under a sealing budget whose limit passed in the beforeTools hook: no call of the batch starts, it is answered interrupted, and the run asks for its answer', async () => {
    const answer = new IngressClient(server.ingressUrl, 'answerSession');
    const reply = await answer.ok<Summary>('answer', 'send', { message: 'A city?' }, 15_000);
    expect(reply.outcome).toEqual({ type: 'Completed', finalText: '{"city":"Lyon","population":3}', output: { city: 'Lyon', population: 3 } });
    // The hook ran once, the lookup never; the second model call was the final one, offered only the answer's tool.
    expect(toolLines('answer').map((line) => line.line)).toEqual(['model asked, offered lookup,final_answer', 'hook starts', 'hook ends', 'model asked, offered final_answer']);
    const transcript = await answer.ok<Message[]>('answer', 'transcript', {});
    expect(transcript.find((message) => message.role === 'tool' && message.toolCallId === 'look')?.content).toMatch(/interrupted/);
    expect(transcript.find((message) => message.role === 'user' && String(message.content).startsWith('This run has reached'))?.content).toMatch(/budget: \d+ ms elapsed, limit 800 ms/);
    const page = await answer.ok<Streamed>('answer', 'events', { cursor: 0, limit: 1000 });
    expect(page.events.filter((entry) => entry.event.type === 'tool.started')).toEqual([]);
  });

  it('a raise posted while the model call hangs moves its deadline: sealed at the raised limit, not the first', async () => {
    const raised = new IngressClient(server.ingressUrl, 'raisedSession');
    const started = Date.now();
    const invocation = await raised.enqueue('raised', 'send', { message: 'think forever' });
    await waitFor('the call in flight', async () => (toolLines('raised').some((line) => line.line === 'model hangs') ? true : undefined));
    await raised.ok('raised', 'raise', { budget: { maxDurationMs: 2_500 } });
    const reply = await raised.attach<Summary>(invocation);
    expect(reply.outcome).toMatchObject({ type: 'Sealed', reason: expect.stringMatching(/^budget: \d+ ms elapsed, limit 2500 ms$/) });
    expect(Date.now() - started).toBeGreaterThanOrEqual(2_500);
    // Sealed by the deadline of the one call: it was made once.
    expect(toolLines('raised').map((line) => line.line)).toEqual(['model hangs']);
    // A raise is checked where it enters, as every payload.
    await expect(raised.ok('raised', 'raise', { budget: { maxDurationMs: -1 } })).rejects.toThrow(/raise: invalid payload: budget\.maxDurationMs/);
  });

  /** Sends a transfer that hangs, SIGKILLs the worker while it runs, and waits for the restarted worker to find the call in doubt. */
  const transferInDoubt = async (session: string) => {
    const invocation = await client.enqueue(session, 'send', { message: 'please transfer hang' });
    await waitFor('the transfer in flight', async () => (toolLines(session).some((line) => line.line.startsWith('transferred')) ? true : undefined));
    await worker.kill('SIGKILL');
    worker = await startOurWorker();
    const request = ((await firstEvent(other, session, 'tool.inDoubt')).requests as { toolCallId: string; digest: string; run: number }[])[0]!;
    return { invocation, request: { toolCallId: request.toolCallId, digest: request.digest, run: request.run } };
  };

  it("a worker SIGKILLed during a tool that asks when in doubt: nothing runs until a person decides; a hand result reaches the model", async () => {
    const { invocation, request } = await transferInDoubt('doubt-hand');
    // The restarted worker waits: the transfer was not run again.
    expect(toolLines('doubt-hand').filter((line) => line.line.startsWith('transferred'))).toHaveLength(1);
    await other.ok('doubt-hand', 'decideDoubt', { ...request, action: 'result', result: { receipt: 'r-9' }, by: 'ana' });
    const reply = await client.attach<Summary>(invocation);
    expect(reply.outcome?.type).toBe('Completed');
    expect(toolLines('doubt-hand').filter((line) => line.line.startsWith('transferred'))).toHaveLength(1);
    const transcript = await other.ok<Message[]>('doubt-hand', 'transcript');
    expect(transcript.find((m) => m.role === 'tool' && m.toolCallId === 't2')).toMatchObject({ content: '{"receipt":"r-9"}' });
  });

  it('a call in doubt decided rerun from another client runs again with the same idempotency key; a bad decision is refused', async () => {
    const { invocation, request } = await transferInDoubt('doubt-rerun');
    await expect(other.ok('doubt-rerun', 'decideDoubt', { ...request, action: 'result' })).rejects.toThrow(/result: a 'result' decision needs a result/);
    await expect(other.ok('doubt-rerun', 'decideDoubt', { ...request, action: 'later' })).rejects.toThrow(/400/);
    await other.ok('doubt-rerun', 'decideDoubt', { ...request, action: 'rerun', by: 'ana' });
    const reply = await client.attach<Summary>(invocation);
    expect(reply.outcome?.type).toBe('Completed');
    const transfers = toolLines('doubt-rerun').filter((line) => line.line.startsWith('transferred'));
    expect(transfers).toHaveLength(2);
    expect(new Set(transfers.map((line) => line.key))).toEqual(new Set(['doubt-rerun:run-1:turn-2:tools:t2']));
    const transcript = await other.ok<Message[]>('doubt-rerun', 'transcript');
    expect(transcript.find((m) => m.role === 'tool' && m.toolCallId === 't2')).toMatchObject({ content: 'transferred doubt-rerun' });
  });

  it('a deny from another client: the call never runs and the model sees the refusal', async () => {
    const invocation = await client.enqueue('denied', 'send', { message: 'please deploy' });
    const requested = ((await firstEvent(other, 'denied', 'approval.requested')).calls as { id: string }[])[0]!;
    await other.ok('denied', 'deny', { toolCallId: requested.id, reason: 'not today' });
    const reply = await client.attach<Summary>(invocation);
    expect(reply.outcome?.type).toBe('Completed');
    expect(toolLines('denied').filter((line) => line.line.startsWith('deployed'))).toEqual([]);
    const transcript = await other.ok<Message[]>('denied', 'transcript');
    expect(transcript.find((m) => m.role === 'tool' && m.toolCallId === requested.id)).toMatchObject({ content: 'denied: not today', isError: true });
  });

  it('a run an operation yielded waits, and resumeOperation from another client resumes it (payload checked by the operation)', async () => {
    const gated = new IngressClient(server.ingressUrl, 'gatedSession');
    const gatedOther = new IngressClient(server.ingressUrl, 'gatedSession');
    const invocation = await gated.enqueue('gate', 'send', { message: 'ship it' });
    const yielded = async (count: number) =>
      waitFor(`operation.yielded #${count}`, async () => {
        const page = await gatedOther.ok<Streamed>('gate', 'events', { cursor: 0, limit: 1000 });
        return page.events.filter((e) => e.event.type === 'operation.yielded').length >= count ? page : undefined;
      });
    await yielded(1);
    expect(toolLines('gate')).toEqual([]);
    // A payload the gate's schema refuses changes nothing: the run keeps waiting.
    await gatedOther.ok('gate', 'resumeOperation', { operation: 'ci-gate', payload: { status: 'maybe' } });
    await waitFor('the refusal', async () => {
      const page = await gatedOther.ok<Streamed>('gate', 'events', { cursor: 0, limit: 1000 });
      return page.events.some((e) => e.event.type === 'event.rejected') ? true : undefined;
    });
    expect((await gatedOther.ok<Summary>('gate', 'state')).running).toBe(true);
    // Each tool batch of this run is gated: resume twice.
    await gatedOther.ok('gate', 'resumeOperation', { operation: 'ci-gate', payload: { status: 'passed' } });
    await yielded(2);
    await gatedOther.ok('gate', 'resumeOperation', { operation: 'ci-gate', payload: { status: 'passed' } });
    const reply = await gated.attach<Summary>(invocation);
    expect(reply.outcome).toEqual({ type: 'Completed', finalText: 'done: gate (ship it) after 3 tool results' });
    expect(toolLines('gate')).toHaveLength(3);
    const malformed = await gatedOther.call('gate', 'resumeOperation', { payload: {} });
    expect(malformed.status).toBe(400);
    expect(JSON.stringify(malformed.body)).toMatch(/resumeOperation: invalid payload: operation/);
  });

  it(`migrates a stored state row of an older version (v1 -> v${SESSION_ROW_VERSION}) as the SQLite store does`, async () => {
    // A v1 session as an older build stored it: a finished run, without approvals, run start (v2)
    // and operation state (v3).
    const store = new MemorySessionStore();
    const local = await DurableSession.open({ machine: fixtureMachine({ toolLog: join(dir, 'local.log') }), store, sessionId: 'old' });
    local.send({ type: 'input', message: 'first' });
    await local.whenIdle();
    await local.close();
    const stored = (await store.load('old'))!;
    const { approvals: _a, runStartedAt: _r, operations: _o, ...rest } = stored.state as Record<string, unknown>;
    const v1 = { ...rest, rowVersion: 1 };
    const bytes = (value: unknown) => [...Buffer.from(JSON.stringify(value))];
    const newState: Record<string, number[]> = { row: bytes(v1), logLength: bytes(stored.messages.length) };
    stored.messages.forEach((message, i) => (newState[`log:${i}`] = bytes(message)));
    const response = await fetch(`${server.adminUrl}/services/loopchartSession/state`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ object_key: 'old', new_state: newState }),
    });
    expect(response.status).toBeLessThan(300);
    const before = await waitFor('the injected state', async () => {
      const state = await client.ok<Summary>('old', 'state');
      return state.messageCount === 7 ? state : undefined;
    });
    expect(before.outcome?.type).toBe('Completed');
    const reply = await client.ok<Summary>('old', 'send', { message: 'second' });
    expect(reply.outcome).toEqual({ type: 'Completed', finalText: 'done: old (second) after 6 tool results' });
    const rows = await server.query<{ value_utf8: string }>(
      "SELECT value_utf8 FROM state WHERE service_name = 'loopchartSession' AND service_key = 'old' AND key = 'row'",
    );
    expect(JSON.parse(rows[0]!.value_utf8).rowVersion).toBe(SESSION_ROW_VERSION);
  });
});

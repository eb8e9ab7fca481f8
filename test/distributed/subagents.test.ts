/**
 * Agents inside agents on Restate (issue 22, item 3), against a real server and two real worker
 * processes behind a balancer: an agent tool's child runs inside its parent's invocation, each of
 * its side effects a journaled step keyed by the child's own keys, so a worker SIGKILLed mid-child
 * leaves the invocation to the other worker, which resumes the child where it was; a handoff
 * restored on another worker goes on with the agent that has the conversation.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Message, Outcome, Usage } from '../../src/index.js';
import type { ModelLine } from './fixtures/subagents.js';
import { startBalancer, type Balancer } from './support/balancer.js';
import { IngressClient } from './support/ingress.js';
import { RestateServer, waitFor } from './support/server.js';
import { SERVER_BINARY, readToolLog } from './support/suite.js';
import { SUBAGENT_WORKER, startWorker, type Worker } from './support/workers.js';

interface Streamed {
  events: { index: number; event: { type: string; calls?: { id: string; name: string }[] } }[];
}
interface Summary {
  state: string;
  running: boolean;
  outcome: Outcome | null;
  usage: Usage | null;
}

describe.skipIf(!SERVER_BINARY)('subagents on Restate (real server, two real workers)', () => {
  let server: RestateServer;
  let workers: Worker[];
  let balancer: Balancer;
  let dir: string;
  let modelLog: string;
  let toolLog: string;
  let coordinator: IngressClient;
  let triage: IngressClient;

  const workerEnv = () => ({ TOOL_LOG: toolLog, MODEL_LOG: modelLog, INACTIVITY_MS: '500' });

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'loopchart-restate-subagents-'));
    modelLog = join(dir, 'models.log');
    toolLog = join(dir, 'tools.log');
    server = await RestateServer.start(SERVER_BINARY!);
    workers = await Promise.all([0, 1].map(() => startWorker(workerEnv(), SUBAGENT_WORKER)));
    balancer = await startBalancer(workers.map((worker) => worker.url));
    await server.register(balancer.url);
    coordinator = new IngressClient(server.ingressUrl, 'coordinatorSession');
    triage = new IngressClient(server.ingressUrl, 'triageSession');
  });

  afterAll(async () => {
    await Promise.all((workers ?? []).map((worker) => worker.kill('SIGTERM')));
    await balancer?.close();
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  /**
   * The model calls, and the tool runs, whose keys hold `session` (the session ids here are no
   * part of another's or of a key's fixed words): a child that lost its parent's scope would run
   * under `session/<call key>`, which still holds it, so its repeats are counted too.
   */
  const modelCalls = (session: string): ModelLine[] =>
    existsSync(modelLog)
      ? readFileSync(modelLog, 'utf8').split('\n').filter(Boolean).map((line) => JSON.parse(line) as ModelLine).filter((line) => line.key.includes(session))
      : [];
  const notes = (session: string) => (existsSync(toolLog) ? readToolLog(readFileSync(toolLog, 'utf8')).filter((line) => line.key.includes(`${session}`)) : []);
  const count = (lines: readonly { key: string }[]) => Object.fromEntries([...new Set(lines.map((l) => l.key))].map((key) => [key, lines.filter((l) => l.key === key).length]));
  /** SIGKILLs the worker that made `line`'s call; the other one takes the retried invocation. */
  const killWorkerOf = async (line: ModelLine) => {
    const victim = workers.find((worker) => worker.child.pid === line.pid)!;
    await victim.kill('SIGKILL');
    return victim.child.pid;
  };

  it("a worker SIGKILLed mid-child: the other worker resumes the child where it was, finished child steps are not run again, and the parent's call waits for the child", async () => {
    const reference = await coordinator.ok<Summary>('ref', 'send', { message: 'slow question' });
    expect(reference.outcome).toEqual({ type: 'Completed', finalText: 'coordinator: found: slow question (2 notes)' });

    const invocation = await coordinator.enqueue('boss', 'send', { message: 'slow question' });
    // The child's second model call (the slow one) is in flight: its own key, under the child's session id.
    const childSession = 'boss/run-1:turn-1:r1';
    const inFlight = await waitFor('the child mid-run', async () => modelCalls('boss').find((line) => line.model === 'researcher' && line.key.endsWith(':run-1:turn-2:model')));
    // The parent's call is in flight: its run goes on, its model is not asked again before the child answers.
    expect(await coordinator.ok<Summary>('boss', 'state')).toMatchObject({ running: true, outcome: null });
    expect(modelCalls('boss').filter((line) => line.model === 'coordinator').map((line) => line.key)).toEqual(['boss:run-1:turn-1:model']);
    const killed = await killWorkerOf(inFlight);

    const reply = await coordinator.attach<Summary>(invocation);
    expect(reply.outcome).toEqual(reference.outcome);
    expect(await coordinator.ok<Message[]>('boss', 'transcript')).toEqual(await coordinator.ok<Message[]>('ref', 'transcript'));
    // Finished before the kill, journaled: never again. In flight at the kill: once more, same key, on the other worker.
    const calls = modelCalls('boss');
    expect(count(calls)).toEqual({
      'boss:run-1:turn-1:model': 1,
      [`${childSession}:run-1:turn-1:model`]: 1,
      [`${childSession}:run-1:turn-2:model`]: 2,
      [`${childSession}:run-1:turn-3:model`]: 1,
      'boss:run-1:turn-2:model': 1,
    });
    expect(calls.filter((line) => line.key === `${childSession}:run-1:turn-2:model`).map((line) => line.pid === killed)).toEqual([true, false]);
    expect(count(notes('boss'))).toEqual({ [`${childSession}:run-1:turn-1:tools:n1`]: 1, [`${childSession}:run-1:turn-2:tools:n2`]: 1 });
    // The parent's next model call came after the child's last one: its tool call waited for the child.
    expect(calls.map((line) => line.key).slice(-2)).toEqual([`${childSession}:run-1:turn-3:model`, 'boss:run-1:turn-2:model']);
    // The child's three model calls count in the parent's run, once (the retried one too): 5 calls of 10 + 5 tokens.
    expect(reference.usage).toEqual({ inputTokens: 50, outputTokens: 25 });
    expect(reply.usage).toEqual(reference.usage);
  });

  it("a worker SIGKILLed during the child's tool call: the call runs again with the same key on the other worker, the child's model calls do not", async () => {
    await restartKilled();
    const invocation = await coordinator.enqueue('tooler', 'send', { message: 'please hang' });
    const childSession = 'tooler/run-1:turn-1:r1';
    const inFlight = await waitFor('the child tool call in flight', async () => notes('tooler').find((line) => line.line === 'please hang/b'));
    const victim = workers.find((worker) => worker.child.pid === inFlight.pid)!;
    await victim.kill('SIGKILL');
    const reply = await coordinator.attach<Summary>(invocation);
    expect(reply.outcome).toEqual({ type: 'Completed', finalText: 'coordinator: found: please hang (2 notes)' });
    const n2 = `${childSession}:run-1:turn-2:tools:n2`;
    expect(count(notes('tooler'))).toEqual({ [`${childSession}:run-1:turn-1:tools:n1`]: 1, [n2]: 2 });
    expect(notes('tooler').filter((line) => line.key === n2).map((line) => line.pid === inFlight.pid)).toEqual([true, false]);
    expect(Object.values(count(modelCalls('tooler')))).toEqual([1, 1, 1, 1, 1]);
  });

  it("an approval inside the child surfaces at the parent, waits suspended while the child's worker dies, and is approved from another client", async () => {
    await restartKilled();
    const invocation = await coordinator.enqueue('ops', 'send', { message: 'deploy it' });
    const requested = await waitFor('approval.requested at the parent', async () => {
      const page = await coordinator.ok<Streamed>('ops', 'events', { cursor: 0, limit: 1000 });
      return page.events.find((e) => e.event.type === 'approval.requested')?.event.calls?.[0];
    });
    // The child's call, as the parent shows it: the parent's call id, then the child's.
    expect(requested).toMatchObject({ id: 'r1/n2', name: 'deploy' });
    const status = await waitFor('the waiting run to be suspended', async () => {
      const rows = await server.query<{ status: string }>(`SELECT status FROM sys_invocation WHERE id = '${invocation}'`);
      return rows[0]?.status === 'suspended' ? rows[0].status : undefined;
    });
    expect(status).toBe('suspended');
    const childSession = 'ops/run-1:turn-1:r1';
    await killWorkerOf(modelCalls(childSession).find((line) => line.key.endsWith(':run-1:turn-2:model'))!);
    await new IngressClient(server.ingressUrl, 'coordinatorSession').ok('ops', 'approve', { toolCallId: 'r1/n2' });
    const reply = await coordinator.attach<Summary>(invocation);
    expect(reply.outcome).toEqual({ type: 'Completed', finalText: 'coordinator: found: deploy it (2 notes)' });
    expect(count(notes('ops'))).toEqual({ [`${childSession}:run-1:turn-1:tools:n1`]: 1, [`${childSession}:run-1:turn-2:tools:n2`]: 1 });
    expect(notes('ops').map((line) => line.line)).toEqual(['deploy it/a', 'deployed deploy it']);
    // Nothing the child finished before the wait ran again on the worker that took over.
    expect(Object.values(count(modelCalls('ops')))).toEqual([1, 1, 1, 1, 1]);
  });

  it("a cancel from another client while the child runs ends the child and the parent's run: the child's next step never runs", async () => {
    await restartKilled();
    const invocation = await coordinator.enqueue('halt', 'send', { message: 'slow question' });
    const childSession = 'halt/run-1:turn-1:r1';
    await waitFor('the child mid-run', async () => modelCalls(childSession).find((line) => line.key.endsWith(':run-1:turn-2:model')));
    await new IngressClient(server.ingressUrl, 'coordinatorSession').ok('halt', 'cancel', {});
    const reply = await coordinator.attach<Summary>(invocation);
    expect(reply.outcome?.type).toBe('Cancelled');
    // The cancel reached the child at once: its model call in flight was the last step it made.
    expect(modelCalls('halt').map((line) => line.key)).toEqual(['halt:run-1:turn-1:model', `${childSession}:run-1:turn-1:model`, `${childSession}:run-1:turn-2:model`]);
    expect(notes('halt').map((line) => line.line)).toEqual(['slow question/a']);
  });

  it("a seal with a target from another client seals the child's run only: its call gets the Sealed outcome and the parent answers with it", async () => {
    await restartKilled();
    const invocation = await coordinator.enqueue('sealer', 'send', { message: 'slow question' });
    const childSession = 'sealer/run-1:turn-1:r1';
    await waitFor('the child mid-run', async () => modelCalls(childSession).find((line) => line.key.endsWith(':run-1:turn-2:model')));
    await new IngressClient(server.ingressUrl, 'coordinatorSession').ok('sealer', 'seal', { reason: 'enough research', target: 'r1' });
    const reply = await coordinator.attach<Summary>(invocation);
    // The parent's run was not sealed: its model read the child's outcome and answered.
    expect(reply.outcome).toMatchObject({ type: 'Completed', finalText: expect.stringContaining("subagent 'research' ended Sealed: enough research") });
    // The child's model call in flight was its last step; the parent went on to its second call.
    expect(modelCalls('sealer').map((line) => line.key)).toEqual(['sealer:run-1:turn-1:model', `${childSession}:run-1:turn-1:model`, `${childSession}:run-1:turn-2:model`, 'sealer:run-1:turn-2:model']);
  });

  it('a steer with a target reaches the child; a malformed target is a 400 naming it, one no call runs a child under is refused on the event stream', async () => {
    await restartKilled();
    const invocation = await coordinator.enqueue('steerer', 'send', { message: 'slow question' });
    const childSession = 'steerer/run-1:turn-1:r1';
    await waitFor('the child mid-run', async () => modelCalls(childSession).find((line) => line.key.endsWith(':run-1:turn-2:model')));
    const other = new IngressClient(server.ingressUrl, 'coordinatorSession');
    for (const [handler, body] of [
      ['seal', { reason: 'x', target: '' }],
      ['steer', { message: 'x', target: 5 }],
      ['raise', { budget: { maxToolCalls: 9 }, target: 'r'.repeat(1_001) }],
      ['resumeOperation', { operation: 'budget', payload: {}, target: ['r1'] }],
    ] as const) {
      const refused = await other.call('steerer', handler, body);
      expect(refused.status, handler).toBe(400);
      expect(JSON.stringify(refused.body)).toMatch(new RegExp(`${handler}: invalid payload: target: `));
    }
    await other.ok('steerer', 'steer', { message: 'nobody', target: 'zz' });
    // The child of call r1 takes the steer as its new task (its model works on the last user message: two more notes).
    await other.ok('steerer', 'steer', { message: 'also the river', target: 'r1' });
    const reply = await coordinator.attach<Summary>(invocation);
    expect(reply.outcome).toEqual({ type: 'Completed', finalText: 'coordinator: found: also the river (4 notes)' });
    const page = await coordinator.ok<{ events: { event: { type: string; reason?: string } }[] }>('steerer', 'events', { cursor: 0, limit: 1000 });
    expect(page.events.map((e) => e.event).filter((event) => event.type === 'event.rejected')).toEqual([
      expect.objectContaining({ event: 'steer', reason: "no child run of call 'zz' is running to take it (target 'zz')" }),
    ]);
    // The parent's own conversation has no steer: it went down to the child.
    expect((await coordinator.ok<Message[]>('steerer', 'transcript')).filter((m) => m.role === 'user').map((m) => m.content)).toEqual(['slow question']);
  });

  it("a raise with a target lifts a child's budget pause (shown at the parent with that target): the child goes on, the parent answers", async () => {
    await restartKilled();
    const budgeted = new IngressClient(server.ingressUrl, 'budgetedSession');
    const invocation = await budgeted.enqueue('raiser', 'send', { message: 'budget question' });
    const paused = await waitFor('budget.paused at the parent', async () => {
      const page = await budgeted.ok<{ events: { event: { type: string; target?: string } }[] }>('raiser', 'events', { cursor: 0, limit: 1000 });
      return page.events.find((e) => e.event.type === 'budget.paused')?.event;
    });
    expect(paused).toMatchObject({ kind: 'toolCalls', target: 'r1' });
    await new IngressClient(server.ingressUrl, 'budgetedSession').ok('raiser', 'raise', { budget: { maxToolCalls: 5 }, target: 'r1' });
    const reply = await budgeted.attach<Summary>(invocation);
    expect(reply.outcome).toEqual({ type: 'Completed', finalText: 'coordinator: found: budget question (2 notes)' });
  });

  it('a handoff restored on another worker goes on with the agent that has the conversation', async () => {
    await restartKilled();
    const invocation = await triage.enqueue('desk', 'send', { message: 'slow refund please' });
    // Handed over, billing's model is answering: kill its worker.
    const speaking = await waitFor('billing answering', async () => modelCalls('desk:').find((line) => line.model === 'billing'));
    await killWorkerOf(speaking);
    const first = await triage.attach<Summary>(invocation);
    expect(first.outcome).toEqual({ type: 'Completed', finalText: 'billing: slow refund please' });
    // A new run, on whichever worker: restored from the session's state, billing still has the conversation.
    const second = await triage.ok<Summary>('desk', 'send', { message: 'and the invoice' });
    expect(second.outcome).toEqual({ type: 'Completed', finalText: 'billing: and the invoice' });
    expect(modelCalls('desk:').map((line) => [line.key, line.model])).toEqual([
      ['desk:run-1:turn-1:model', 'triage'],
      ['desk:run-1:turn-2:model', 'billing'],
      ['desk:run-1:turn-2:model', 'billing'],
      ['desk:run-2:turn-1:model', 'billing'],
    ]);
  });

  /** Starts the workers an earlier test killed again, each on its port (the balancer knows its URL). */
  async function restartKilled(): Promise<void> {
    const alive = (worker: Worker) => worker.child.exitCode === null && worker.child.signalCode === null;
    workers = await Promise.all(workers.map((worker) => (alive(worker) ? worker : startWorker({ ...workerEnv(), PORT: new URL(worker.url).port }, SUBAGENT_WORKER))));
  }
});

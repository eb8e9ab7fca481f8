/**
 * A call that had finished keeps its answer however the run ends and however the session was
 * opened. A batch of two calls, `lookup` (runs at once, returns "found ana") and `write` (waits
 * for a person's approval): the run is ended while `write` waits by a cancel, a seal or its time
 * budget, sent to the live session or to the session reopened from its SQLite file (resumed or
 * not, on a second connection). The stored conversation has lookup's "found ana" and write's
 * interrupted result, and the next run's model request reads those. Before, a session reopened
 * from the store held lookup's result only in its tool journal until the resumed IO replayed it:
 * an end arriving first answered lookup "interrupted" too. The results a restored state brings
 * (the journal a session passes, a persisted snapshot) are checked against its batch.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createActor, waitFor } from 'xstate';
import { z } from 'zod';
import { createAgentMachine } from '../../machines/agent.machine.js';
import type { ModelRequest } from '../../src/model.js';
import { scriptedModel } from '../../src/models/scripted.js';
import type { Message } from '../../src/schemas.js';
import { DurableSession } from '../../src/sessions/durable-session.js';
import { SqliteSessionStore } from '../../src/stores/sqlite.js';
import { interruptedContent } from '../../src/tools/run-tools.js';
import { defineTool } from '../../src/tools/define-tool.js';

const root = mkdtempSync(join(tmpdir(), 'loopchart-answered-kept-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

type End = 'cancel' | 'seal' | 'budget';
type Where = 'live' | 'reopened' | 'reopened, not resumed';

/** Settles as `promise` does, or rejects after `ms`: a wait that never ends fails the test instead of hanging it. */
function within<T>(promise: Promise<T>, what: string, ms = 5_000): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what}: still waiting after ${ms} ms`)), ms)));
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

const toolResults = (messages: readonly Message[]) =>
  Object.fromEntries(messages.flatMap((m) => (m.role === 'tool' ? [[m.toolCallId, m.content]] : [])));

async function scenario(end: End, where: Where) {
  const name = `${end}-${where.replace(/\W+/g, '-')}`;
  const path = join(root, `${name}.db`);
  const store = new SqliteSessionStore({ path });
  let looked = 0;
  let wrote = 0;
  const lookup = defineTool({ name: 'lookup', description: 'finds a user', input: z.object({ who: z.string() }), execute: ({ who }) => (looked++, `found ${who}`) });
  const write = defineTool({ name: 'write', description: 'writes a record', input: z.object({ what: z.string() }), needsApproval: true, execute: () => (wrote++, 'written') });
  const requests: ModelRequest[] = [];
  const machine = () =>
    createAgentMachine({
      model: scriptedModel([
        { toolCalls: [{ id: 'l1', name: 'lookup', args: { who: 'ana' } }, { id: 'w1', name: 'write', args: { what: 'note' } }] },
        (request) => (requests.push(request), { text: 'next run answered' }),
      ]),
      tools: [lookup, write],
      // The budget case: the limit passes while write waits (the live run is sealed by its timer, a reopened one at once).
      ...(end === 'budget' && { budget: { maxDurationMs: 300 } }),
    });
  let ask!: () => void;
  const asked = new Promise<void>((resolve) => (ask = resolve));
  let found!: () => void;
  const finished = new Promise<void>((resolve) => (found = resolve));
  const attach = (actor: DurableSession['actor']) => {
    actor.on('approval.requested', () => ask());
    actor.on('tool.finished', (e) => e.call.id === 'l1' && found());
  };
  const first = await DurableSession.open({ machine: machine(), store, sessionId: 's', attach });
  let session = first;
  let second: SqliteSessionStore | undefined;
  try {
    first.send({ type: 'input', message: 'note ana' });
    await within(Promise.all([asked, finished]), 'lookup finished and write asked about');
    await first.flush();
    expect(looked).toBe(1);
    if (where !== 'live') {
      await first.close();
      if (end === 'budget') await new Promise((resolve) => setTimeout(resolve, 400));
      second = new SqliteSessionStore({ path });
      session = await DurableSession.open({ machine: machine(), store: second, sessionId: 's', resume: where === 'reopened' });
    }
    // Not resumed at open: the resume and the end arrive together, before anything was replayed.
    if (where === 'reopened, not resumed') session.send({ type: 'resume' });
    if (end === 'cancel') session.send({ type: 'cancel' });
    if (end === 'seal') session.send({ type: 'seal', reason: 'enough' });
    const output = await within(session.whenIdle(), 'run ended');
    const stored = (await (second ?? store).load('s'))!;
    const outcome = output?.outcome.type;
    // The next run reads what the first one left.
    session.send({ type: 'input', message: 'and now?' });
    const next = await within(session.whenIdle(), 'next run');
    const outcomeReason = output?.outcome.type === 'Sealed' ? output.outcome.reason : undefined;
    return { outcome, outcomeReason, stored: toolResults(stored.messages), next: toolResults(requests[0]?.messages ?? []), nextOutcome: next?.outcome, looked, wrote };
  } finally {
    await session.close();
    if (session !== first) await first.close();
    await second?.close();
    await store.close();
  }
}

const expected = { cancel: 'Cancelled', seal: 'Sealed', budget: 'Sealed' } as const;
/** What the waiting call is answered: never started, and why the run ended (the budget's reason is the outcome's). */
const notStarted = (end: End, reason: string | undefined) =>
  interruptedContent(end === 'cancel' ? { type: 'cancelled' } : { type: 'stopped', reason: end === 'seal' ? 'enough' : reason! }, false);

describe('an answered call keeps its answer whatever ends the run, however the session was opened', () => {
  for (const end of ['cancel', 'seal', 'budget'] as const) {
    for (const where of ['live', 'reopened', 'reopened, not resumed'] as const) {
      it(`${end}, ${where}: lookup keeps "found ana", write is interrupted, in the store and in the next run's request`, async () => {
        const result = await scenario(end, where);
        // write waited for its approval: it never started, and its answer says what ended the run.
        const answers = { l1: 'found ana', w1: notStarted(end, result.outcomeReason) };
        expect(result.outcome).toBe(expected[end]);
        expect(result.stored).toEqual(answers);
        expect(result.next).toEqual(answers);
        expect(result.nextOutcome).toEqual({ type: 'Completed', finalText: 'next run answered' });
        // lookup ran once (replayed, not run again), write never.
        expect(result).toMatchObject({ looked: 1, wrote: 0 });
        if (end === 'budget') expect(result.outcomeReason).toMatch(/^budget: \d+ ms elapsed, limit 300 ms$/);
      });
    }
  }
});

describe('the results a restored batch brings are checked against it', () => {
  it('a snapshot whose journal holds a result of no call of the batch, and one call twice: only the batch\'s, once; the waiting call still waits', async () => {
    const lookup = defineTool({ name: 'lookup', description: 'finds a user', input: z.object({ who: z.string() }), execute: ({ who }) => `found ${who}` });
    const write = defineTool({ name: 'write', description: 'writes a record', input: z.object({ what: z.string() }), needsApproval: true, execute: () => 'written' });
    const agent = createAgentMachine({
      model: scriptedModel([{ toolCalls: [{ id: 'l1', name: 'lookup', args: { who: 'ana' } }, { id: 'w1', name: 'write', args: { what: 'note' } }] }, { text: 'done' }]),
      tools: [lookup, write],
    });
    const first = createActor(agent, { input: { prompt: 'note ana', sessionId: 's' } }).start();
    await waitFor(first, (s) => s.context.toolJournal.length === 1 && s.context.approvals.waiting.length === 1, { timeout: 3_000 });
    const snapshot = JSON.parse(JSON.stringify(first.getPersistedSnapshot())) as { context: { toolJournal: unknown[] } };
    first.stop();
    const [found] = snapshot.context.toolJournal;
    snapshot.context.toolJournal = [found, { role: 'tool', toolCallId: 'zz', toolName: 'lookup', content: 'not of this batch' }, { ...(found as object), content: 'again' }];

    const restored = createActor(agent, { snapshot: snapshot as never }).start();
    try {
      const { context } = restored.getSnapshot();
      expect(context.toolJournal).toEqual([found]);
      expect(context.approvals.waiting).toEqual(['w1']);
      restored.send({ type: 'cancel' });
      const done = await waitFor(restored, (s) => s.status === 'done', { timeout: 3_000 });
      expect(toolResults(done.output!.messages)).toEqual({ l1: 'found ana', w1: interruptedContent({ type: 'cancelled' }, false) });
    } finally {
      restored.stop();
    }
  });
});

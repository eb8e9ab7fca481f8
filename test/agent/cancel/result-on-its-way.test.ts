/**
 * A tool call whose `execute` has its result when a cancel or a seal arrives, before the chart
 * recorded it (the end sent in the same tick the tool resolved, or in a microtask of it), keeps
 * that result: the tool ran and its result exists. Only calls without one are answered
 * interrupted, and a call queued behind `toolConcurrency` does not start meanwhile. Before, the
 * end answered it "interrupted: the run was cancelled before this tool call finished" (a seal too)
 * on the plain actor and through a DurableSession on SQLite alike, and the next run's model read
 * that although `pay` had paid.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createActor } from 'xstate';
import { z } from 'zod';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import type { ModelRequest } from '../../../src/model.js';
import { scriptedModel } from '../../../src/models/scripted.js';
import type { Message } from '../../../src/schemas.js';
import { DurableSession } from '../../../src/sessions/durable-session.js';
import { SqliteSessionStore } from '../../../src/stores/sqlite.js';
import { defineTool } from '../../../src/tools/define-tool.js';
import { interruptedContent } from '../../../src/tools/run-tools.js';

const root = mkdtempSync(join(tmpdir(), 'loopchart-result-on-its-way-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

type End = { type: 'cancel' } | { type: 'seal'; reason: string };
/** How the end follows the result: sent right after the tool's promise resolves, or in a microtask of a tool that returns at once. */
type When = 'right after resolve' | 'same microtask';

const results = (messages: readonly Message[]) => Object.fromEntries(messages.flatMap((m) => (m.role === 'tool' ? [[m.toolCallId, m.content]] : [])));

function within<T>(promise: Promise<T>, what: string, ms = 5_000): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what}: still waiting after ${ms} ms`)), ms)));
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

/** `pay` resolves and the end is sent at once; `later` is queued behind it (toolConcurrency 1). */
function agent(when: When, end: End, send: (end: End) => void, requests: ModelRequest[]) {
  const ran: string[] = [];
  const pay = defineTool({
    name: 'pay',
    description: 'pays',
    input: z.object({}),
    execute: () => {
      ran.push('pay');
      if (when === 'same microtask') {
        queueMicrotask(() => send(end));
        return 'paid';
      }
      return new Promise<string>((resolve) =>
        setTimeout(() => {
          resolve('paid');
          send(end);
        }, 10),
      );
    },
  });
  const later = defineTool({ name: 'later', description: 'runs after pay', input: z.object({}), execute: () => (ran.push('later'), 'done later') });
  const machine = createAgentMachine({
    model: scriptedModel([{ toolCalls: [{ id: 'p1', name: 'pay', args: {} }, { id: 'l1', name: 'later', args: {} }] }, (request) => (requests.push(request), { text: 'next run' })]),
    tools: [pay, later],
    toolConcurrency: 1,
  });
  return { machine, ran };
}

const outcomeOf = (end: End) => (end.type === 'cancel' ? { type: 'Cancelled' } : { type: 'Sealed', reason: end.reason });
const expected = (end: End) => ({
  p1: 'paid',
  l1: interruptedContent(end.type === 'cancel' ? { type: 'cancelled' } : { type: 'stopped', reason: end.reason }, false),
});

describe('a result that exists when the run is cancelled or sealed is kept', () => {
  for (const end of [{ type: 'cancel' }, { type: 'seal', reason: 'enough' }] as End[]) {
    for (const when of ['right after resolve', 'same microtask'] as When[]) {
      it(`${end.type} ${when}, plain actor: pay keeps "paid", the queued call never starts`, async () => {
        const requests: ModelRequest[] = [];
        let actor!: ReturnType<typeof createActor<ReturnType<typeof agent>['machine']>>;
        const { machine, ran } = agent(when, end, (e) => actor.send(e), requests);
        actor = createActor(machine, { input: { sessionId: 's' } });
        actor.start();
        actor.send({ type: 'input', message: 'pay' });
        await within(new Promise<void>((resolve) => actor.on('run.finished', () => resolve())), 'first run');
        const { lastRun, brain } = actor.getSnapshot().context;
        expect(lastRun?.outcome).toEqual(outcomeOf(end));
        expect(results(brain.context.history)).toEqual(expected(end));
        actor.send({ type: 'input', message: 'and now?' });
        await within(new Promise<void>((resolve) => actor.on('run.finished', () => resolve())), 'next run');
        expect(results(requests[0]!.messages)).toEqual(expected(end));
        expect(ran).toEqual(['pay']);
        actor.stop();
      });

      it(`${end.type} ${when}, DurableSession on SQLite: pay keeps "paid" in the store and the next run's request`, async () => {
        const store = new SqliteSessionStore({ path: join(root, `${end.type}-${when.replace(/\W+/g, '-')}.db`) });
        const requests: ModelRequest[] = [];
        let session!: DurableSession;
        const { machine, ran } = agent(when, end, (e) => session.send(e), requests);
        session = await DurableSession.open({ machine, store, sessionId: 's' });
        try {
          session.send({ type: 'input', message: 'pay' });
          const output = await within(session.whenIdle(), 'first run');
          expect(output?.outcome).toEqual(outcomeOf(end));
          await session.flush();
          expect(results((await store.load('s'))!.messages)).toEqual(expected(end));
          session.send({ type: 'input', message: 'and now?' });
          await within(session.whenIdle(), 'next run');
          expect(results(requests[0]!.messages)).toEqual(expected(end));
          expect(ran).toEqual(['pay']);
        } finally {
          await session.close();
          await store.close();
        }
      });
    }
  }

  it('a call still running when the end comes is aborted at once, and what it answers the abort with is not kept', async () => {
    const aborted: number[] = [];
    let abortedAtCancel = -1;
    const slow = defineTool({
      name: 'slow',
      description: 'runs until stopped',
      input: z.object({}),
      execute: (_, { signal }) => new Promise<string>((resolve) => signal.addEventListener('abort', () => (aborted.push(Date.now()), resolve('stopped')), { once: true })),
    });
    const actor = createActor(createAgentMachine({ model: scriptedModel([{ toolCalls: [{ id: 's1', name: 'slow', args: {} }] }, { text: 'never' }]), tools: [slow] }), { input: { prompt: 'go' } });
    actor.on('tool.started', () =>
      setTimeout(() => {
        actor.send({ type: 'cancel' });
        abortedAtCancel = aborted.length;
      }, 20),
    );
    const done = new Promise<void>((resolve) => actor.subscribe({ complete: () => resolve() }));
    actor.start();
    await within(done, 'cancelled');
    const output = actor.getSnapshot().output!;
    expect(output.outcome).toEqual({ type: 'Cancelled' });
    expect(results(output.messages)).toEqual({ s1: interruptedContent({ type: 'cancelled' }, true) });
    // Its signal fired during the cancel itself; its 'stopped' came after the abort: interrupted.
    expect(abortedAtCancel).toBe(1);
    expect(aborted).toHaveLength(1);
  });
});

/**
 * What a call without a result is answered when the run stops: why the run stopped (cancelled,
 * stopped with the seal's reason, a budget's included) and whether the call had started or never
 * did (queued behind `toolConcurrency`, waiting for an approval). Before, every such call read
 * "interrupted: the run was cancelled before this tool call finished", also a call that never
 * started of a run a budget sealed: the next run's model read that a user had cancelled a call
 * that may have partly run. Checked on the plain actor and through a `DurableSession` on SQLite
 * (stored, read by the next run, replayed without divergence).
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
import { replaySession } from '../../../src/sessions/replay.js';
import { SqliteSessionStore } from '../../../src/stores/sqlite.js';
import { defineTool } from '../../../src/tools/define-tool.js';
import { INTERRUPTED_CONTENT } from '../../../src/tools/run-tools.js';

const root = mkdtempSync(join(tmpdir(), 'loopchart-interrupted-wording-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const NOT_STARTED_CANCEL = 'interrupted: the run was cancelled before this tool call started; it did not run';
const results = (messages: readonly Message[]) => Object.fromEntries(messages.flatMap((m) => (m.role === 'tool' ? [[m.toolCallId, m.content]] : [])));

/** Settles as `promise` does, or rejects after `ms`. */
function within<T>(promise: Promise<T>, what: string, ms = 5_000): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what}: still waiting after ${ms} ms`)), ms)));
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

/** `slow` runs until its signal aborts; `write` needs an approval; what really ran, in order (`onRun` hears each). */
function tools(onRun: (what: string) => void = () => {}) {
  const ran: string[] = [];
  const run = (what: string) => (ran.push(what), onRun(what));
  const slow = defineTool({
    name: 'slow',
    description: 'runs until stopped',
    input: z.object({ n: z.number() }),
    execute: ({ n }, { signal }) => (run(`slow ${n}`), new Promise<string>((resolve) => signal.addEventListener('abort', () => resolve('stopped'), { once: true }))),
  });
  const write = defineTool({ name: 'write', description: 'writes', input: z.object({}), needsApproval: true, execute: () => (run('write'), 'written') });
  const lookup = defineTool({ name: 'lookup', description: 'finds', input: z.object({}), execute: () => (run('lookup'), 'found') });
  return { ran, list: [slow, write, lookup] };
}

const batch = (...calls: [string, string, object][]) => ({ toolCalls: calls.map(([id, name, args]) => ({ id, name, args })) });

describe('what a call without a result is answered when the run stops', () => {
  it('a cancel: the running call was cancelled before it finished, the one queued behind toolConcurrency never started', async () => {
    // Cancelled once s1's execute runs.
    const { ran, list } = tools((what) => what === 'slow 1' && queueMicrotask(() => actor.send({ type: 'cancel' })));
    const agent = createAgentMachine({ model: scriptedModel([batch(['s1', 'slow', { n: 1 }], ['s2', 'slow', { n: 2 }]), { text: 'never' }]), tools: list, toolConcurrency: 1 });
    const actor = createActor(agent, { input: { prompt: 'go' } });
    const done = new Promise<void>((resolve) => actor.subscribe({ complete: () => resolve() }));
    actor.start();
    await within(done, 'cancelled run');
    const output = actor.getSnapshot().output!;
    expect(output.outcome.type).toBe('Cancelled');
    expect(results(output.messages)).toEqual({ s1: INTERRUPTED_CONTENT, s2: NOT_STARTED_CANCEL });
    expect(ran).toEqual(['slow 1']);
  });

  it('the time budget seals the run: its reason, and which calls never started (queued, waiting for an approval)', async () => {
    const { ran, list } = tools();
    const agent = createAgentMachine({
      model: scriptedModel([batch(['s1', 'slow', { n: 1 }], ['s2', 'slow', { n: 2 }], ['w1', 'write', {}]), { text: 'never' }]),
      tools: list,
      toolConcurrency: 1,
      budget: { maxDurationMs: 300 },
    });
    const actor = createActor(agent, { input: { prompt: 'go' } });
    const done = new Promise<void>((resolve) => actor.subscribe({ complete: () => resolve() }));
    actor.start();
    await within(done, 'sealed run');
    const output = actor.getSnapshot().output!;
    expect(output.outcome).toMatchObject({ type: 'Sealed', reason: expect.stringMatching(/^budget: \d+ ms elapsed, limit 300 ms$/) });
    const reason = (output.outcome as { reason: string }).reason;
    expect(results(output.messages)).toEqual({
      s1: `interrupted: the run was stopped (${reason}) before this tool call finished`,
      s2: `interrupted: the run was stopped (${reason}) before this tool call started; it did not run`,
      w1: `interrupted: the run was stopped (${reason}) before this tool call started; it did not run`,
    });
    expect(ran).toEqual(['slow 1']);
  });

  it('a seal from the host, through a DurableSession on SQLite: stored, read by the next run, replayed without divergence', async () => {
    const store = new SqliteSessionStore({ path: join(root, 'seal.db') });
    const { ran, list } = tools((what) => what === 'slow 1' && slowRuns());
    const requests: ModelRequest[] = [];
    const agent = createAgentMachine({
      model: scriptedModel([batch(['l1', 'lookup', {}], ['w1', 'write', {}], ['s1', 'slow', { n: 1 }]), (request) => (requests.push(request), { text: 'next' })]),
      tools: list,
    });
    let asked!: () => void;
    const waiting = new Promise<void>((resolve) => (asked = resolve));
    let found!: () => void;
    const finished = new Promise<void>((resolve) => (found = resolve));
    let slowRuns!: () => void;
    const running = new Promise<void>((resolve) => (slowRuns = resolve));
    const attach = (actor: DurableSession['actor']) => {
      actor.on('approval.requested', () => asked());
      actor.on('tool.finished', (e) => e.call.id === 'l1' && found());
    };
    const session = await DurableSession.open({ machine: agent, store, sessionId: 's', attach });
    try {
      session.send({ type: 'input', message: 'go' });
      await within(Promise.all([waiting, finished, running]), 'approval asked, lookup finished, slow running');
      await within(session.flush(), 'flush');
      session.send({ type: 'seal', reason: 'the operator stopped it' });
      const output = await within(session.whenIdle(), 'sealed');
      expect(output?.outcome).toEqual({ type: 'Sealed', reason: 'the operator stopped it' });
      const answers = {
        l1: 'found',
        w1: 'interrupted: the run was stopped (the operator stopped it) before this tool call started; it did not run',
        s1: 'interrupted: the run was stopped (the operator stopped it) before this tool call finished',
      };
      expect(results((await store.load('s'))!.messages)).toEqual(answers);
      session.send({ type: 'input', message: 'and now?' });
      await within(session.whenIdle(), 'next run');
      expect(results(requests[0]!.messages)).toEqual(answers);
      await session.flush();
      expect((await replaySession(store, 's')).divergence).toBeNull();
      expect(ran.sort()).toEqual(['lookup', 'slow 1']);
    } finally {
      await session.close();
      await store.close();
    }
  });

  it('a DurableSession reopened while a call ran, cancelled before anything runs again: the call may have run, so it is not said not to have', async () => {
    const path = join(root, 'reopened.db');
    const first = new SqliteSessionStore({ path });
    let slowRuns!: () => void;
    const running = new Promise<void>((resolve) => (slowRuns = resolve));
    const { list } = tools((what) => what === 'slow 1' && slowRuns());
    const agent = () => createAgentMachine({ model: scriptedModel([batch(['s1', 'slow', { n: 1 }], ['w1', 'write', {}]), { text: 'never' }]), tools: list });
    const session = await DurableSession.open({ machine: agent(), store: first, sessionId: 's' });
    session.send({ type: 'input', message: 'go' });
    await within(running, 'slow running');
    await session.close();
    await first.close();
    const second = new SqliteSessionStore({ path });
    const reopened = await DurableSession.open({ machine: agent(), store: second, sessionId: 's', resume: false });
    try {
      reopened.send({ type: 'resume' });
      reopened.send({ type: 'cancel' });
      const output = await within(reopened.whenIdle(), 'cancelled');
      expect(output?.outcome.type).toBe('Cancelled');
      expect(results((await second.load('s'))!.messages)).toEqual({ s1: INTERRUPTED_CONTENT, w1: NOT_STARTED_CANCEL });
    } finally {
      await reopened.close();
      await second.close();
    }
  });

  it('a DurableSession reopened after a crash while a call ran, cancelled once it has resumed (the IO on its way to run the call again): the call may have run, so it is not said not to have', async () => {
    // Found by the matrix's schedules column: a person cancelling a scheduled run through a DurableSession on its store.
    const path = join(root, 'resumed.db');
    const store = new SqliteSessionStore({ path });
    let slowRuns!: () => void;
    const running = new Promise<void>((resolve) => (slowRuns = resolve));
    const first = tools((what) => what === 'slow 1' && slowRuns());
    const agent = (list: ReturnType<typeof tools>['list']) => createAgentMachine({ model: scriptedModel([batch(['s1', 'slow', { n: 1 }]), { text: 'never' }]), tools: list });
    const session = await DurableSession.open({ machine: agent(first.list), store, sessionId: 's' });
    session.send({ type: 'input', message: 'go' });
    await within(running, 'slow running');
    // As a killed process leaves it: what was stored stays, nothing more is written.
    await session.flush();
    session.actor.stop();
    const again = tools();
    const reopened = await DurableSession.open({ machine: agent(again.list), store, sessionId: 's' });
    try {
      reopened.send({ type: 'cancel' });
      const output = await within(reopened.whenIdle(), 'cancelled');
      expect(output?.outcome.type).toBe('Cancelled');
      expect(again.ran).toEqual([]);
      // Before: 'interrupted: the run was cancelled before this tool call started; it did not run' (the IO's words for its own attempt, though the process before had run it).
      expect(results((await store.load('s'))!.messages)).toEqual({ s1: INTERRUPTED_CONTENT });
    } finally {
      await reopened.close();
      await store.close();
    }
  });
});

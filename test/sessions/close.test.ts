/**
 * A closed `DurableSession` neither loses what it is told nor leaves anyone waiting: after
 * `close()`, `send`, `decide` and `rewindTo` throw `SessionClosedError` and store nothing (a denial
 * sent to a closed session used to resolve as if stored, and the reopened session then asked
 * again); a `whenIdle()` waiting when the session closes, or asked after, rejects with it (it used
 * to wait forever on the stopped actor). A session opened with `resume: false` over a stored run in
 * flight refuses `whenIdle()` at once (`SessionNotIdleError`) instead of answering with the
 * previous run's outcome. On real SQLite files.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createAgentMachine } from '../../machines/agent.machine.js';
import type { ApprovalRequest } from '../../src/agent/approvals/approval-binding.js';
import { scriptedModel } from '../../src/models/scripted.js';
import { DurableSession, SessionClosedError, SessionNotIdleError } from '../../src/sessions/durable-session.js';
import { SqliteSessionStore } from '../../src/stores/sqlite.js';
import { defineTool } from '../../src/tools/define-tool.js';

const root = mkdtempSync(join(tmpdir(), 'loopchart-close-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const sqlite = (name: string) => new SqliteSessionStore({ path: join(root, `${name}.db`) });

/** Settles as `promise` does, or with 'still waiting' after `ms`: a wait that never ends fails the test instead of hanging it. */
function settled<T>(promise: Promise<T>, ms = 2_000): Promise<{ value: T } | { error: unknown } | 'still waiting'> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'still waiting'>((resolve) => (timer = setTimeout(() => resolve('still waiting'), ms)));
  return Promise.race([promise.then((value) => ({ value }), (error: unknown) => ({ error })), late]).finally(() => clearTimeout(timer));
}

describe('a closed DurableSession refuses to act', () => {
  it('a denial decided after close throws SessionClosedError and stores nothing; the reopened session takes it', async () => {
    const store = sqlite('decide');
    let wired = 0;
    const wire = defineTool({ name: 'wire', description: 'wires money', input: z.object({ to: z.string() }), needsApproval: true, execute: ({ to }) => (wired++, `wired to ${to}`) });
    const machine = () => createAgentMachine({ model: scriptedModel([{ toolCalls: [{ id: 'w1', name: 'wire', args: { to: 'bob' } }] }, { text: 'not wired' }]), tools: [wire] });
    const asked = () => {
      let ask!: (request: ApprovalRequest) => void;
      const request = new Promise<ApprovalRequest>((resolve) => (ask = resolve));
      return { request, attach: (actor: DurableSession['actor']) => void actor.on('approval.requested', (e) => ask(e.requests[0]!)) };
    };
    try {
      const first = asked();
      const session = await DurableSession.open({ machine: machine(), store, sessionId: 'pay', attach: first.attach });
      session.send({ type: 'input', message: 'pay bob' });
      const request = await first.request;
      await session.close();
      const before = (await store.load('pay'))!.version;

      const denied = await settled(session.decide(request, { approved: false, by: 'ana', reason: 'fraud' }));
      expect(denied).toMatchObject({ error: { code: 'SessionClosed' } });
      expect(SessionClosedError.isInstance((denied as { error: unknown }).error)).toBe(true);
      expect(String((denied as { error: Error }).error.message)).toMatch(/session 'pay' is closed: cannot decide a call; nothing was sent or stored/);
      expect(() => session.send({ type: 'cancel' })).toThrow(SessionClosedError);
      expect(() => session.send({ type: 'steer', message: 'stop' })).toThrow(SessionClosedError);
      // A rewind is refused as closed, not as "a run is in flight".
      await expect(session.rewindTo(0)).rejects.toSatisfy((error) => SessionClosedError.isInstance(error));
      expect((await store.load('pay'))!.version).toBe(before);
      // Reads still work on the closed object.
      expect(session.actor.getSnapshot().context.runIndex).toBe(1);
      // close() again is the same close: nothing more to do.
      await session.close();

      // The call still waits in the store: the reopened session asks again, and the denial sent there holds.
      const second = asked();
      const reopened = await DurableSession.open({ machine: machine(), store, sessionId: 'pay', attach: second.attach });
      await reopened.decide(await second.request, { approved: false, by: 'ana', reason: 'fraud' });
      expect((await reopened.whenIdle())?.outcome).toEqual({ type: 'Completed', finalText: 'not wired' });
      expect(wired).toBe(0);
      await reopened.close();
    } finally {
      await store.close();
    }
  });

  it('a whenIdle() waiting when the session closes, and one asked after, reject with SessionClosedError; the run stays stored', async () => {
    const store = sqlite('idle');
    let runs = 0;
    let started!: () => void;
    const running = new Promise<void>((resolve) => (started = resolve));
    let release!: (text: string) => void;
    const released = new Promise<string>((resolve) => (release = resolve));
    // The first call waits for the test to let it go; the reopened session's call answers at once.
    const slow = defineTool({ name: 'slow', description: 'slow', input: z.object({}), execute: () => (++runs === 1 ? (started(), released) : 'ok') });
    const machine = () => createAgentMachine({ model: scriptedModel([{ toolCalls: [{ id: 's1', name: 'slow', args: {} }] }, { text: 'fin' }]), tools: [slow] });
    try {
      const session = await DurableSession.open({ machine: machine(), store, sessionId: 'slow' });
      session.send({ type: 'input', message: 'go' });
      await running;
      const waiting = settled(session.whenIdle());
      await session.close();
      const pending = await waiting;
      expect(pending).not.toBe('still waiting');
      expect(SessionClosedError.isInstance((pending as { error: unknown }).error)).toBe(true);
      const after = await settled(session.whenIdle(), 500);
      expect(SessionClosedError.isInstance((after as { error: unknown }).error)).toBe(true);
      release('late');

      const reopened = await DurableSession.open({ machine: machine(), store, sessionId: 'slow' });
      expect((await reopened.whenIdle())?.outcome).toEqual({ type: 'Completed', finalText: 'fin' });
      await reopened.close();
    } finally {
      release('late');
      await store.close();
    }
  });
});

describe('resume: false over a stored run in flight', () => {
  it('whenIdle() refuses at once (SessionNotIdleError) instead of answering with the previous run; after a resume it waits for that run', async () => {
    const store = sqlite('held');
    let calls = 0;
    let started!: () => void;
    const running = new Promise<void>((resolve) => (started = resolve));
    // The first process's call never ends (it is "killed" mid-call); the resumed one answers.
    const tool = defineTool({ name: 't', description: 't', input: z.object({}), execute: () => (++calls === 1 ? (started(), new Promise<string>(() => {})) : 'ok') });
    const machine = () => createAgentMachine({ model: scriptedModel([{ text: 'first run answer' }, { toolCalls: [{ id: 'x', name: 't', args: {} }] }, { text: 'second run answer' }]), tools: [tool] });
    try {
      const crashed = await DurableSession.open({ machine: machine(), store, sessionId: 'held' });
      crashed.send({ type: 'input', message: 'one' });
      await crashed.whenIdle();
      crashed.send({ type: 'input', message: 'two' });
      await running;
      await crashed.flush();
      // A crash: the actor stops with no close, the second run stored in flight.
      crashed.actor.stop();

      const held = await DurableSession.open({ machine: machine(), store, sessionId: 'held', resume: false });
      const refused = await settled(held.whenIdle(), 500);
      expect(refused).not.toHaveProperty('value');
      expect(SessionNotIdleError.isInstance((refused as { error: unknown }).error)).toBe(true);
      expect(String((refused as { error: Error }).error.message)).toContain("send { type: 'resume' } first");
      held.send({ type: 'resume' });
      expect((await held.whenIdle())?.outcome).toEqual({ type: 'Completed', finalText: 'second run answer' });
      await held.close();
    } finally {
      await store.close();
    }
  });
});

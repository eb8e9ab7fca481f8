/**
 * `budget.maxDurationMs` is a deadline on the side effect in flight, not only a check between
 * steps: a model call (over real HTTP to a server that never answers, or a custom model) or a
 * tool that honours its signal but never returns is aborted when the run's time is up, and the
 * run ends by the budget (Sealed, with the budget's reason). Before, such a run was still
 * pending seconds after its 300 ms budget, and for ever.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createActor, toPromise } from 'xstate';
import { z } from 'zod';
import { DEADLINE_STATES } from '../../../src/agent/budget/deadline.js';
import { createAgentMachine, defineTool, openAICompatibleModel, runAgent, type Model } from '../../../src/index.js';
import { DurableSession } from '../../../src/sessions/durable-session.js';
import { SqliteSessionStore } from '../../../src/stores/sqlite.js';
import { scriptedModel } from '../../../src/testing.js';

/** Settles within `ms` or fails the test. */
async function within<T>(ms: number, promise: Promise<T>): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([promise, new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`still pending after ${ms} ms`)), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

/** Resolves once `done()` holds (looked at every 5 ms), or fails the test after `ms`. */
async function until(done: () => boolean, ms = 1_000): Promise<void> {
  for (const end = Date.now() + ms; !done(); await new Promise((resolve) => setTimeout(resolve, 5))) {
    if (Date.now() > end) throw new Error(`not so after ${ms} ms`);
  }
}

/** A model that honours its signal and never answers; `aborted` records that it saw the abort. */
function stuckModel() {
  const seen = { calls: 0, aborted: 0 };
  const model: Model = {
    name: 'stuck',
    generate: (request) =>
      new Promise((_, reject) => {
        seen.calls++;
        request.signal.addEventListener('abort', () => (seen.aborted++, reject(request.signal.reason)), { once: true });
      }),
  };
  return { model, seen };
}

/** A tool that honours its signal and never returns otherwise; `signal()` is the one its call got. */
function waitingTool() {
  let seen: AbortSignal | undefined;
  const wait = defineTool({
    name: 'wait',
    description: 'Waits.',
    input: z.object({}),
    execute: (_, { signal }) => new Promise((resolve) => ((seen = signal), signal.addEventListener('abort', () => resolve('stopped'), { once: true }))),
  });
  return { wait, signal: () => seen };
}

const budgetReason = /^budget: \d+ ms elapsed, limit 300 ms$/;
const elapsedOf = (outcome: { type: string; reason?: string }) => Number(/(\d+) ms elapsed/.exec(outcome.reason ?? '')?.[1]);

// Concurrent: each test waits out its budget on its own actor (only the first uses the server).
describe.concurrent('a time budget is a deadline on the side effect in flight', () => {
  // A server that takes the request and never answers (nor closes): the socket stays open.
  let server: Server;
  let baseURL: string;
  const sockets = new Set<Socket>();
  const requests = { count: 0, closed: 0 };
  beforeAll(async () => {
    server = createServer((request) => {
      requests.count++;
      request.socket.once('close', () => requests.closed++);
    });
    server.on('connection', (socket) => (sockets.add(socket), socket.once('close', () => sockets.delete(socket))));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    baseURL = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  });
  afterAll(async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise((resolve) => server.close(resolve));
  });

  it('a model call over HTTP to a server that never answers is aborted and the run sealed by the budget', async () => {
    // The first run of a process loads the tokenizer (seconds under load) inside the run's time:
    // warm it up, so the 1 s budget is spent with the request at the server.
    await runAgent({ model: scriptedModel([{ text: 'warm' }]), prompt: 'Hi.' });
    const model = openAICompatibleModel({ baseURL, model: 'silent' });
    const result = await within(10_000, runAgent({ model, retry: false, prompt: 'Hi.', budget: { maxDurationMs: 1_000 } }));
    expect(result.outcome).toMatchObject({ type: 'Sealed', reason: expect.stringMatching(/^budget: \d+ ms elapsed, limit 1000 ms$/) });
    // Sealed by the deadline, on the run's own clock, well before the model's 5-minute default read timeout.
    expect(elapsedOf(result.outcome)).toBeLessThan(3_000);
    expect(requests.count).toBe(1);
    // The HTTP request itself was aborted: its socket closes.
    await within(2_000, (async () => {
      while (requests.closed < 1) await new Promise((resolve) => setTimeout(resolve, 10));
    })());
  });

  it('a custom model that honours its signal and never answers: aborted, Sealed by the budget', async () => {
    const { model, seen } = stuckModel();
    const result = await within(3_000, runAgent({ model, prompt: 'Hi.', budget: { maxDurationMs: 300 } }));
    expect(result.outcome).toMatchObject({ type: 'Sealed', reason: expect.stringMatching(budgetReason) });
    expect(seen).toEqual({ calls: 1, aborted: 1 });
  });

  it('a tool in flight that never returns is aborted and the run sealed by the budget', async () => {
    const { wait, signal } = waitingTool();
    const model = scriptedModel([{ toolCalls: [{ name: 'wait', args: {} }] }, { text: 'never' }]);
    const result = await within(3_000, runAgent({ model, tools: [wait], prompt: 'Wait.', budget: { maxDurationMs: 300 } }));
    expect(result.outcome).toMatchObject({ type: 'Sealed', reason: expect.stringMatching(budgetReason) });
    expect(signal()?.aborted).toBe(true);
  });

  it('a duration budget that pauses: the model call is aborted and the run waits in BudgetPaused for a raise', async () => {
    const { model, seen } = stuckModel();
    const actor = createActor(createAgentMachine({ model, budget: { maxDurationMs: 300, pause: ['duration'] } }), { input: { prompt: 'Hi.' } });
    const paused = new Promise<{ kind: string }>((resolve) => actor.on('budget.paused', (event) => resolve(event as never)));
    actor.start();
    try {
      expect(await within(3_000, paused)).toMatchObject({ kind: 'duration' });
      expect(seen.aborted).toBe(1);
      expect(actor.getSnapshot().matches({ Running: 'BudgetPaused' })).toBe(true);
    } finally {
      actor.stop();
    }
  });

  // A timer counts on the process's monotonic clock, the budget on the run's `clock` (wall time by
  // default): a wall clock stepped back (NTP), or the ms both round, makes the timer fire while the
  // run's time is not up. Before, no branch took that event and the call went on with no deadline.
  it('a deadline that fires before the run\'s clock says the time is up is armed again for the time left', async () => {
    const { wait } = waitingTool();
    const cases = [
      { name: 'model call', model: stuckModel().model, tools: [] },
      { name: 'tool batch', model: scriptedModel([{ toolCalls: [{ name: 'wait', args: {} }] }, { text: 'never' }]), tools: [wait] },
    ];
    for (const { name, model, tools } of cases) {
      let offset = 0;
      const clock = () => Date.now() + offset;
      // Before createActor: the run's clock starts there (its input starts the run), not at start().
      const started = Date.now();
      const actor = createActor(createAgentMachine({ model, tools, clock, budget: { maxDurationMs: 300 } }), { input: { prompt: 'Hi.' } });
      actor.start();
      await until(() => actor.getSnapshot().matches({ Running: name === 'model call' ? 'AwaitingModel' : 'AwaitingTools' }));
      offset = -200;
      const output = await within(3_000, toPromise(actor)).catch((error: Error) => (actor.stop(), Promise.reject(new Error(`${name}: ${error.message}`))));
      expect(output.outcome, name).toMatchObject({ type: 'Sealed', reason: expect.stringMatching(budgetReason) });
      // Held to the run's clock: 300 ms of it, which the wall saw as at least 500 ms.
      expect(Date.now() - started, name).toBeGreaterThanOrEqual(500);
    }
  });

  // setTimeout holds at most 2^31 - 1 ms (24.8 days): a longer delay is cut to 1 ms, with a
  // TimeoutOverflowWarning. The deadline's delay is the time the run has left, which passes that
  // bound for a budget of weeks, or once the run's clock stepped back that far: before, the timer
  // fired after 1 ms, was armed again for the same delay, and fired again, ~200 times in 300 ms.
  it('a deadline further away than a timer can wait is armed at the timer\'s bound, not fired again every ms', async () => {
    const DAY_MS = 24 * 3_600_000;
    const cases = [
      { name: 'a budget of 40 days', maxDurationMs: 40 * DAY_MS, stepBack: 0 },
      { name: 'a clock stepped back 30 days', maxDurationMs: 300, stepBack: 30 * DAY_MS },
    ];
    const overflows: string[] = [];
    const onWarning = (warning: Error) => void (warning.name === 'TimeoutOverflowWarning' && overflows.push(warning.message));
    process.on('warning', onWarning);
    try {
      for (const { name, maxDurationMs, stepBack } of cases) {
        let offset = 0;
        const clock = () => Date.now() + offset;
        let fired = 0;
        const { model, seen } = stuckModel();
        const actor = createActor(createAgentMachine({ model, clock, budget: { maxDurationMs } }), {
          input: { prompt: 'Hi.' },
          inspect: (event) => void (event.type === '@xstate.event' && event.event.type.startsWith('xstate.after.budgetDeadline') && fired++),
        });
        actor.start();
        try {
          await until(() => seen.calls === 1);
          offset = -stepBack;
          // The first timer (armed for 300 ms) fires while the stepped clock says 30 days are left.
          if (stepBack > 0) await until(() => fired >= 1);
          await new Promise((resolve) => setTimeout(resolve, 300));
          expect(fired, name).toBe(stepBack > 0 ? 1 : 0);
          expect(actor.getSnapshot().matches({ Running: 'AwaitingModel' }), name).toBe(true);
          expect(seen.aborted, name).toBe(0);
        } finally {
          actor.stop();
        }
      }
      // Warnings are emitted on a later tick: one more turn of the loop before they are read.
      await new Promise((resolve) => setImmediate(resolve));
      expect(overflows).toEqual([]);
    } finally {
      process.off('warning', onWarning);
    }
  });

  it('a run inside its time budget is not touched by the deadline', async () => {
    const result = await within(3_000, runAgent({ model: scriptedModel([{ text: 'quick' }]), prompt: 'Hi.', budget: { maxDurationMs: 60_000 } }));
    expect(result.outcome).toMatchObject({ type: 'Completed', finalText: 'quick' });
  });
});

// Concurrent: each test waits out a few hundred ms of budget on its own actor.
describe.concurrent('a raise while a side effect is in flight moves its deadline', () => {
  /** A run whose model call never answers, and a `budget.raise` 100 ms into it. */
  async function raisedInFlight(budget: Record<string, number>, raise: Record<string, number>) {
    const { model, seen } = stuckModel();
    // Before createActor: the run's clock starts there (its input starts the run), not at start().
    const started = Date.now();
    const actor = createActor(createAgentMachine({ model, budget }), { input: { prompt: 'Hi.' } });
    const rejected: string[] = [];
    actor.on('event.rejected', (event) => rejected.push(event.reason));
    actor.start();
    const raising = setTimeout(() => actor.send({ type: 'budget.raise', budget: raise }), 100);
    try {
      const output = await within(3_000, toPromise(actor));
      return { outcome: output.outcome, ms: Date.now() - started, seen, rejected };
    } finally {
      clearTimeout(raising);
      actor.stop();
    }
  }

  it('raised from 300 to 600 ms: the call runs past 300 ms and is sealed at 600 (before, it was never cut: no timer was left)', async () => {
    const { outcome, ms, seen, rejected } = await raisedInFlight({ maxDurationMs: 300 }, { maxDurationMs: 600 });
    expect(outcome).toMatchObject({ type: 'Sealed', reason: expect.stringMatching(/^budget: \d+ ms elapsed, limit 600 ms$/) });
    expect(elapsedOf(outcome)).toBeGreaterThanOrEqual(600);
    // The call ran past the first limit, 300 ms, to the raised one. Measured from before
    // createActor, where the run's clock starts: from start() a loaded machine saw 583 ms (CI 599),
    // the time createActor took before it.
    expect(ms).toBeGreaterThanOrEqual(600);
    expect(seen).toEqual({ calls: 1, aborted: 1 });
    expect(rejected).toEqual([]);
  });

  it('a time limit added to a budget that had none holds the call in flight', async () => {
    const { outcome, seen } = await raisedInFlight({ maxToolCalls: 5 }, { maxDurationMs: 300 });
    expect(outcome).toMatchObject({ type: 'Sealed', reason: expect.stringMatching(budgetReason) });
    expect(seen).toEqual({ calls: 1, aborted: 1 });
  });

  it('a limit set lower cuts the call at the new limit, not the old one', async () => {
    const { outcome, ms } = await raisedInFlight({ maxDurationMs: 60_000 }, { maxDurationMs: 300 });
    expect(outcome).toMatchObject({ type: 'Sealed', reason: expect.stringMatching(budgetReason) });
    expect(ms).toBeLessThan(2_500);
  });

  it('a tool batch in flight is held to the raised deadline too', async () => {
    const { wait, signal } = waitingTool();
    const model = scriptedModel([{ toolCalls: [{ name: 'wait', args: {} }] }, { text: 'never' }]);
    const actor = createActor(createAgentMachine({ model, tools: [wait], budget: { maxDurationMs: 60_000 } }), { input: { prompt: 'Wait.' } });
    actor.start();
    try {
      await within(2_000, (async () => {
        while (!signal()) await new Promise((resolve) => setTimeout(resolve, 10));
      })());
      actor.send({ type: 'budget.raise', budget: { maxDurationMs: 300 } });
      const output = await within(3_000, toPromise(actor));
      expect(output.outcome).toMatchObject({ type: 'Sealed', reason: expect.stringMatching(budgetReason) });
      expect(signal()?.aborted).toBe(true);
    } finally {
      actor.stop();
    }
  });

  it('every state that holds a side effect to the deadline is one a raise arms again', () => {
    const timed = createAgentMachine({ model: scriptedModel([{ text: 'x' }]), budget: { maxDurationMs: 1_000 } });
    const underDeadline = Object.entries(timed.root.states.Running!.states)
      .filter(([, node]) => node.after.some((transition) => transition.delay === 'budgetDeadline'))
      .map(([name]) => name);
    expect(underDeadline).toEqual([...DEADLINE_STATES]);
  });
});

describe.concurrent('a raise in flight on a DurableSession over SQLite', () => {
  const root = mkdtempSync(join(tmpdir(), 'loopchart-deadline-'));
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it('the session cuts its own call at the raised limit', async () => {
    const { model, seen } = stuckModel();
    const store = new SqliteSessionStore({ path: join(root, 'live.db') });
    const session = await DurableSession.open({ machine: createAgentMachine({ model, budget: { maxDurationMs: 300 } }), store, sessionId: 's' });
    try {
      session.send({ type: 'input', message: 'Hi.' });
      await new Promise((resolve) => setTimeout(resolve, 100));
      session.send({ type: 'budget.raise', budget: { maxDurationMs: 600 } });
      const output = (await within(3_000, session.whenIdle()))!;
      expect(output.outcome).toMatchObject({ type: 'Sealed', reason: expect.stringMatching(/^budget: \d+ ms elapsed, limit 600 ms$/) });
      expect(seen).toEqual({ calls: 1, aborted: 1 });
    } finally {
      await session.close();
      await store.close();
    }
  });

  // The early-fire rule through a session: its actor is stepped and its steps stored, so a timer
  // the chart only arms again must not reach the store or seal the run (see the actor's test above).
  it('a deadline that fires before the run\'s clock says the time is up is armed again, and the run is sealed on the run\'s clock', async () => {
    const { wait } = waitingTool();
    const cases = [
      { name: 'model call', model: stuckModel().model, tools: [] },
      { name: 'tool batch', model: scriptedModel([{ toolCalls: [{ name: 'wait', args: {} }] }, { text: 'never' }]), tools: [wait] },
    ];
    for (const [index, { name, model, tools }] of cases.entries()) {
      let offset = 0;
      const clock = () => Date.now() + offset;
      const store = new SqliteSessionStore({ path: join(root, `stepped-${index}.db`) });
      const session = await DurableSession.open({ machine: createAgentMachine({ model, tools, clock, budget: { maxDurationMs: 300 } }), store, sessionId: 's' });
      try {
        const started = Date.now();
        session.send({ type: 'input', message: 'Hi.' });
        await until(() => session.actor.getSnapshot().matches({ Running: name === 'model call' ? 'AwaitingModel' : 'AwaitingTools' }));
        offset = -200;
        const output = (await within(3_000, session.whenIdle()).catch((error: Error) => Promise.reject(new Error(`${name}: ${error.message}`))))!;
        expect(output.outcome, name).toMatchObject({ type: 'Sealed', reason: expect.stringMatching(budgetReason) });
        expect(Date.now() - started, name).toBeGreaterThanOrEqual(500);
        // What is stored is the sealed run, as the actor ended it.
        expect((await store.load('s'))?.state, name).toMatchObject({ lastRun: { outcome: { type: 'Sealed', reason: expect.stringMatching(budgetReason) } } });
      } finally {
        await session.close();
        await store.close();
      }
    }
  });

  it('is stored with the run: after a restart past the old limit, the call made again is held to the raised one', async () => {
    const path = join(root, 'raised.db');
    const first = stuckModel();
    const storeA = new SqliteSessionStore({ path });
    const a = await DurableSession.open({ machine: createAgentMachine({ model: first.model, budget: { maxDurationMs: 300 } }), store: storeA, sessionId: 's' });
    const started = Date.now();
    a.send({ type: 'input', message: 'Hi.' });
    await new Promise((resolve) => setTimeout(resolve, 100));
    a.send({ type: 'budget.raise', budget: { maxDurationMs: 900 } });
    // Past the old limit, before the new one: the run is still going, and then this process stops.
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(a.actor.getSnapshot().matches({ Running: 'AwaitingModel' })).toBe(true);
    await a.close();
    await storeA.close();
    // Another session on the same file takes the run up: the call is made again under the raised limit.
    const second = stuckModel();
    const storeB = new SqliteSessionStore({ path });
    const b = await DurableSession.open({ machine: createAgentMachine({ model: second.model, budget: { maxDurationMs: 300 } }), store: storeB, sessionId: 's' });
    try {
      const output = (await within(3_000, b.whenIdle()))!;
      expect(output.outcome).toMatchObject({ type: 'Sealed', reason: expect.stringMatching(/^budget: \d+ ms elapsed, limit 900 ms$/) });
      expect(Date.now() - started).toBeGreaterThanOrEqual(900);
      expect([first.seen.calls, second.seen]).toEqual([1, { calls: 1, aborted: 1 }]);
    } finally {
      await b.close();
      await storeB.close();
    }
  });

  it.each([
    ['sealed at once, no call made again', undefined],
    ['with pause on duration, paused for a raise, and the raise makes the call again', ['duration'] as const],
  ])('a run whose process was down past its limit: reopened, %s', async (_, pause) => {
    const path = join(root, `down-${pause ? 'pause' : 'seal'}.db`);
    const budget = { maxDurationMs: 300, ...(pause && { pause: [...pause] }) };
    const first = stuckModel();
    const storeA = new SqliteSessionStore({ path });
    const a = await DurableSession.open({ machine: createAgentMachine({ model: first.model, budget }), store: storeA, sessionId: 's' });
    a.send({ type: 'input', message: 'Hi.' });
    await new Promise((resolve) => setTimeout(resolve, 100));
    // The process stops mid-call, 100 ms into the run, and stays down past the 300 ms limit.
    await a.flush();
    a.actor.stop();
    await storeA.close();
    await new Promise((resolve) => setTimeout(resolve, 400));
    const second = stuckModel();
    const storeB = new SqliteSessionStore({ path });
    const b = await DurableSession.open({ machine: createAgentMachine({ model: second.model, budget }), store: storeB, sessionId: 's' });
    try {
      if (!pause) {
        // The downtime counts: whoever waits for the answer waited through it.
        const output = (await within(1_000, b.whenIdle()))!;
        expect(output.outcome).toMatchObject({ type: 'Sealed', reason: expect.stringMatching(/^budget: \d+ ms elapsed, limit 300 ms$/) });
        expect(elapsedOf(output.outcome as { type: string; reason: string })).toBeGreaterThanOrEqual(500);
        expect(second.seen.calls).toBe(0);
        return;
      }
      await until(() => b.actor.getSnapshot().matches({ Running: 'BudgetPaused' }));
      expect(second.seen.calls).toBe(0);
      b.send({ type: 'budget.raise', budget: { maxDurationMs: 60_000 } });
      await until(() => second.seen.calls === 1);
      b.send({ type: 'seal', reason: 'done looking' });
      expect((await within(1_000, b.whenIdle()))!.outcome).toMatchObject({ type: 'Sealed', reason: 'done looking' });
    } finally {
      await b.close();
      await storeB.close();
    }
  });
});

/**
 * Budgets that pause (issue 26, item 3): with `budget.pause`, a run past a limit of a pausing kind
 * waits in `Running.BudgetPaused` (emitting `budget.paused` and an `operation.yielded` named
 * 'budget') until a raise that lifts that limit continues the same run, or a seal ends it.
 * Durable: the pause is the stored run's own state, so a second DurableSession on the same
 * SQLite file (another process, after a restart) finds it paused and its raise continues it.
 * Paused time is not wall time: a duration limit counts only the time the run ran.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createActor } from 'xstate';
import { createAgentMachine, type AgentActor } from '../../../machines/agent.machine.js';
import { type AgentEmitted } from '../../../src/agent/protocol/actor-types.js';
import { activeMs, pausedAt, raiseOf, raiseProblem, raisedBy } from '../../../src/agent/budget/budget-pause.js';
import type { Budget } from '../../../src/agent/budget/budget.js';
import { scriptedModel, type ScriptEntry } from '../../../src/models/scripted.js';
import { DurableSession } from '../../../src/sessions/durable-session.js';
import { SqliteSessionStore } from '../../../src/stores/sqlite.js';
import { runToCompletion, WAIT_MS } from '../../support/driver.js';
import { ask, collect, freeTool, providerValid, recordingModel } from '../../support/hitl.js';

const root = mkdtempSync(join(tmpdir(), 'loopchart-budget-pause-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const usage = (inputTokens: number, outputTokens: number) => ({ inputTokens, outputTokens });
const PRICES = { inputPerMillionUsd: 3, outputPerMillionUsd: 15 };
const PAUSED = { Running: 'BudgetPaused' } as const;
/** Three tool turns of 100 in / 10 out tokens each, then an answer. */
const THREE_TURNS: ScriptEntry[] = [
  { text: 'one', toolCalls: [ask('lookup', { key: 'a' })], usage: usage(100, 10) },
  { text: 'two', toolCalls: [ask('lookup', { key: 'b' }), ask('lookup', { key: 'c' })], usage: usage(100, 10) },
  { text: 'three', toolCalls: [ask('lookup', { key: 'd' })], usage: usage(100, 10) },
  { text: 'all done', usage: usage(100, 10) },
];

/** An agent over the script whose model calls each advance `clock.now` by 10 s. */
function agent(budget: Budget, clock = { now: 0 }) {
  const scripted = scriptedModel(THREE_TURNS);
  const model = recordingModel({ name: 'ticking', generate: async (request) => ((clock.now += 10_000), scripted.generate(request)) });
  const machine = createAgentMachine({ model: model.model, tools: [freeTool().tool], retry: false, budget, prices: PRICES, clock: () => clock.now });
  return { machine, model, clock };
}

function paused(actor: AgentActor): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`not paused within ${WAIT_MS} ms: ${JSON.stringify(actor.getSnapshot().value)}`)), WAIT_MS);
    const check = () => actor.getSnapshot().matches(PAUSED) && (clearTimeout(timer), resolve(), true);
    if (check()) return;
    const sub = actor.subscribe(() => check() && sub.unsubscribe());
  });
}

function started(budget: Budget) {
  const built = agent(budget);
  const actor = createActor(built.machine, { input: { prompt: 'go', sessionId: 's' } });
  const events = collect(actor, 'budget.paused', 'operation.yielded', 'event.rejected');
  actor.start();
  return { ...built, actor, events };
}

describe('the pure rules', () => {
  it('paused time is left out of the wall time; a raise banks it and keeps the raised limits', () => {
    expect(activeMs(1_000, 5_000, undefined)).toBe(4_000);
    const pause = pausedAt(undefined, 5_000);
    expect(activeMs(1_000, 65_000, pause)).toBe(4_000); // a minute paused: still 4 s
    expect(pausedAt(pause, 9_000)).toBe(pause); // a pause in progress keeps its start
    const raised = raisedBy(pause, { maxTokens: 500 }, 65_000);
    expect(raised).toEqual({ raised: { maxTokens: 500 }, pausedAt: null, pausedMs: 60_000 });
    expect(activeMs(1_000, 66_000, raised)).toBe(5_000);
    expect(raisedBy(raised, { maxToolCalls: 9 }, 70_000).raised).toEqual({ maxTokens: 500, maxToolCalls: 9 });
  });

  it('a raise must lift the limit the run paused on; malformed raises are not raises', () => {
    const over = { kind: 'tokens' as const, used: 220, limit: 200, reason: 'budget: 220 tokens used, limit 200' };
    expect(raiseProblem(over, { maxTokens: 220 })).toBeNull();
    expect(raiseProblem(over, { maxTokens: 210 })).toMatch(/does not lift the limit: 220 already used/);
    expect(raiseProblem(over, { maxToolCalls: 10 })).toMatch(/must set maxTokens/);
    expect(raiseOf({ type: 'budget.raise', budget: { maxTokens: 5 } })).toEqual({ maxTokens: 5 });
    expect(raiseOf({ type: 'operation.resume', operation: 'budget', payload: { budget: { maxCostUsd: 1 } } })).toEqual({ maxCostUsd: 1 });
    expect(raiseOf({ type: 'operation.resume', operation: 'budget', payload: { budget: { maxTokens: -1 } } })).toBeNull();
    expect(raiseOf({ type: 'operation.resume', operation: 'other', payload: { budget: {} } })).toBeNull();
    expect(raiseOf({ type: 'budget.raise', budget: { maxTokenz: 5 } })).toBeNull();
  });
});

const KINDS: Array<{ kind: string; budget: Budget; reason: string; raise: Budget; tooLow: Budget; calls: number }> = [
  { kind: 'tokens', budget: { maxTokens: 200 }, reason: 'budget: 220 tokens used, limit 200', raise: { maxTokens: 1_000 }, tooLow: { maxTokens: 210 }, calls: 2 },
  { kind: 'cost', budget: { maxCostUsd: 0.0008 }, reason: 'budget: $0.0009 spent, limit $0.0008', raise: { maxCostUsd: 1 }, tooLow: { maxCostUsd: 0.00085 }, calls: 2 },
  { kind: 'toolCalls', budget: { maxToolCalls: 2 }, reason: 'budget: 3 tool calls made, limit 2', raise: { maxToolCalls: 10 }, tooLow: { maxToolCalls: 2 }, calls: 2 },
  { kind: 'duration', budget: { maxDurationMs: 15_000 }, reason: 'budget: 20000 ms elapsed, limit 15000 ms', raise: { maxDurationMs: 60_000 }, tooLow: { maxDurationMs: 19_000 }, calls: 2 },
];

describe.each(KINDS)('a $kind budget that pauses', ({ kind, budget, reason, raise, tooLow, calls }) => {
  it('waits in BudgetPaused with no further model call; a raise too low is refused; a raise that lifts it finishes the same run', async () => {
    const r = started({ ...budget, pause: true });
    await paused(r.actor);
    expect(r.model.requests).toHaveLength(calls);
    expect(r.events.find((e) => e.type === 'budget.paused')).toMatchObject({ kind, reason });
    expect(r.events.find((e) => e.type === 'operation.yielded')).toMatchObject({ operation: 'budget', reason });
    r.actor.send({ type: 'budget.raise', budget: tooLow });
    expect(r.events.find((e) => e.type === 'event.rejected')).toMatchObject({ event: 'budget.raise', reason: expect.stringMatching(/does not lift/) });
    expect(r.actor.getSnapshot().matches(PAUSED)).toBe(true);
    r.actor.send({ type: 'budget.raise', budget: raise });
    const output = await runToCompletion(r.actor);
    expect(output.outcome).toEqual({ type: 'Completed', finalText: 'all done' });
    expect(r.model.requests).toHaveLength(4);
    expect(r.actor.getSnapshot().context.runIndex).toBe(1); // the same run
    expect(providerValid(output.messages)).toBe(true);
  });
});

describe('a paused run', () => {
  it('is continued by the budget operation\'s resume, like a raise', async () => {
    const r = started({ maxTokens: 200, pause: true });
    await paused(r.actor);
    r.actor.send({ type: 'operation.resume', operation: 'budget', payload: { budget: { maxTokens: 1_000 } } });
    expect((await runToCompletion(r.actor)).outcome.type).toBe('Completed');
  });

  it('sealed instead: ends Sealed with the reason, its coherent work kept, no further model call', async () => {
    const r = started({ maxTokens: 200, pause: true });
    await paused(r.actor);
    r.actor.send({ type: 'seal', reason: 'out of money' });
    const output = await runToCompletion(r.actor);
    expect(output.outcome).toEqual({ type: 'Sealed', reason: 'out of money' });
    expect(r.model.requests).toHaveLength(2);
    expect(providerValid(output.messages)).toBe(true);
    expect(output.messages.filter((m) => m.role === 'tool')).toHaveLength(3);
  });

  it('a kind not listed in pause still seals', async () => {
    const r = started({ maxToolCalls: 2, maxTokens: 10_000, pause: ['tokens'] });
    expect((await runToCompletion(r.actor)).outcome).toEqual({ type: 'Sealed', reason: 'budget: 3 tool calls made, limit 2' });
  });
});

describe('a pause across processes (a second DurableSession on the same SQLite file)', () => {
  it('survives a restart, is raised from the other process, and the hour it waited is not wall time', async () => {
    const path = join(root, 'paused.db');
    const budget: Budget = { maxDurationMs: 15_000, pause: ['duration'] };
    // Process A: the run pauses after two model calls (20 s on its clock), then A dies.
    const a = agent(budget);
    const storeA = new SqliteSessionStore({ path });
    const sessionA = await DurableSession.open({ machine: a.machine, store: storeA, sessionId: 's' });
    sessionA.send({ type: 'input', message: 'go' });
    await paused(sessionA.actor);
    await sessionA.flush();
    sessionA.actor.stop();
    await storeA.close();
    // Process B, an hour later on the driver clock: the stored run is paused, in the chart too.
    const b = agent(budget, { now: a.clock.now + 3_600_000 });
    const storeB = new SqliteSessionStore({ path });
    const seen: AgentEmitted[] = [];
    const sessionB = await DurableSession.open({ machine: b.machine, store: storeB, sessionId: 's', attach: (actor) => actor.on('budget.paused', (e) => seen.push(e)) });
    await paused(sessionB.actor);
    expect(seen).toMatchObject([{ kind: 'duration', used: 20_000, limit: 15_000 }]);
    expect(b.model.requests).toHaveLength(0);
    // Two more model calls take 20 s: 40 s of running in all fits 45 s; the paused hour does not count.
    sessionB.send({ type: 'budget.raise', budget: { maxDurationMs: 45_000 } });
    const output = (await sessionB.whenIdle())!;
    expect(output.outcome).toEqual({ type: 'Completed', finalText: 'all done' });
    expect([a.model.requests.length, b.model.requests.length]).toEqual([2, 2]);
    expect(sessionB.actor.getSnapshot().context.runIndex).toBe(1);
    await sessionB.close();
    await storeB.close();
  });
});

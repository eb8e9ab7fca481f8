/**
 * Budgets (issue 6, seed 004's `seal(reason)`): `budget: { maxTokens, maxCostUsd, maxToolCalls,
 * maxDurationMs }` is checked between steps (after tool results, before a model call); going past
 * one seals the run with the reason, keeping its coherent work. Usage and cost (from `prices`) are
 * reported per run (output, run.finished) and per session (`context.sessionUsage`).
 */
import { describe, expect, it } from 'vitest';
import { createActor } from 'xstate';
import { z } from 'zod';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import { InvalidConfigError } from '../../../src/errors.js';
import { scriptedModel, type ScriptEntry } from '../../../src/models/scripted.js';
import { DurableSession } from '../../../src/sessions/durable-session.js';
import { MemoryBacking, MemorySessionStore } from '../../../src/stores/memory.js';
import { defineTool } from '../../../src/tools/define-tool.js';
import { runFinished, runToCompletion, sleepOrAbort } from '../../support/driver.js';
import { ask, awaitingApproval, collect, freeTool, guardedTool, providerValid, recordingModel, user } from '../../support/hitl.js';

const usage = (inputTokens: number, outputTokens: number) => ({ inputTokens, outputTokens });
const PRICES = { inputPerMillionUsd: 3, outputPerMillionUsd: 15 };
const lookup = (key: string) => ask('lookup', { key });

type Config = Parameters<typeof createAgentMachine>[0];

function run(script: ScriptEntry[], config: Omit<Config, 'model'>) {
  const model = recordingModel(scriptedModel(script));
  const actor = createActor(createAgentMachine({ model: model.model, retry: false, ...config }), { input: { prompt: 'go', sessionId: 's' } });
  const finished = collect(actor, 'run.finished');
  return { model, actor, finished, output: () => runToCompletion(actor) };
}

/** Three tool turns of 100 in / 10 out tokens each, then an answer. */
const THREE_TURNS: ScriptEntry[] = [
  { text: 'one', toolCalls: [lookup('a')], usage: usage(100, 10) },
  { text: 'two', toolCalls: [lookup('b'), lookup('c')], usage: usage(100, 10) },
  { text: 'three', toolCalls: [lookup('d')], usage: usage(100, 10) },
  { text: 'all done', usage: usage(100, 10) },
];

/** The sealed run kept its coherent work: every call it made is answered, the prompt is first. */
function expectSalvaged(messages: readonly { role: string }[], toolResults: number) {
  expect(providerValid(messages as never)).toBe(true);
  expect(messages[0]).toEqual(user('go'));
  expect(messages.filter((m) => m.role === 'tool')).toHaveLength(toolResults);
  expect(messages.at(-1)!.role).toBe('tool');
}

describe('each budget kind seals the run between steps, with its reason and the coherent work', () => {
  it('maxTokens: sealed after the tool results that follow the reply going past the limit; no further model call', async () => {
    const free = freeTool();
    const r = run(THREE_TURNS, { tools: [free.tool], budget: { maxTokens: 200 } });
    const output = await r.output();
    expect(output.outcome).toEqual({ type: 'Sealed', reason: 'budget: 220 tokens used, limit 200' });
    expect(r.model.requests).toHaveLength(2);
    expect(free.log.finished).toHaveLength(3); // turn 2's batch ran: the check is between steps
    expectSalvaged(output.messages, 3);
    expect(output.usage).toEqual(usage(200, 20));
    expect(r.model.invalid()).toEqual([]);
  });

  it('maxCostUsd: sealed with the cost spent, and the output reports the run cost', async () => {
    const free = freeTool();
    // Each turn costs (100 * 3 + 10 * 15) / 1e6 = $0.00045.
    const r = run(THREE_TURNS, { tools: [free.tool], budget: { maxCostUsd: 0.0008 }, prices: PRICES });
    const output = await r.output();
    expect(output.outcome.type).toBe('Sealed');
    expect((output.outcome as { reason: string }).reason).toBe('budget: $0.0009 spent, limit $0.0008');
    expect(r.model.requests).toHaveLength(2);
    expect(output.costUsd).toBeCloseTo(0.0009, 12);
    expectSalvaged(output.messages, 3);
    expect(r.finished[0]!.output.costUsd).toBeCloseTo(0.0009, 12);
  });

  it('maxToolCalls: sealed once the calls made go past the limit', async () => {
    const free = freeTool();
    const r = run(THREE_TURNS, { tools: [free.tool], budget: { maxToolCalls: 2 } });
    const output = await r.output();
    expect(output.outcome).toEqual({ type: 'Sealed', reason: 'budget: 3 tool calls made, limit 2' });
    expect(r.model.requests).toHaveLength(2);
    expectSalvaged(output.messages, 3);
  });

  it('maxToolCalls: reaching the limit exactly is not going past it', async () => {
    const free = freeTool();
    const r = run([THREE_TURNS[0]!, THREE_TURNS[1]!, { text: 'fine', usage: usage(1, 1) }], { tools: [free.tool], budget: { maxToolCalls: 3 } });
    const output = await r.output();
    expect(output.outcome).toEqual({ type: 'Completed', finalText: 'fine' });
  });

  it('maxDurationMs: a batch in flight past the limit is aborted at the deadline and the run sealed, with the time elapsed', async () => {
    // The time budget is a deadline on the side effect in flight (test/agent/budget/deadline.test.ts):
    // the 800 ms lookup does not run to its end past a 40 ms budget.
    const slow = defineTool({
      name: 'lookup',
      description: 'slow lookup',
      input: z.object({ key: z.string() }),
      execute: async ({ key }, { signal }) => {
        await sleepOrAbort(800, signal);
        return key;
      },
    });
    const r = run(THREE_TURNS, { tools: [slow], budget: { maxDurationMs: 40 } });
    const output = await r.output();
    expect(output.outcome.type).toBe('Sealed');
    const reason = (output.outcome as { reason: string }).reason;
    const match = /^budget: (\d+) ms elapsed, limit 40 ms$/.exec(reason);
    expect(match, reason).not.toBeNull();
    expect(Number(match![1])).toBeGreaterThanOrEqual(40);
    expect(Number(match![1])).toBeLessThan(800);
    expect(r.model.requests).toHaveLength(1);
    expectSalvaged(output.messages, 1);
  });

  it('several limits passed at once: one seal, the first reason wins (tokens before cost before calls before time)', async () => {
    const free = freeTool();
    const r = run(THREE_TURNS, {
      tools: [free.tool],
      budget: { maxTokens: 50, maxCostUsd: 0.0001, maxToolCalls: 1, maxDurationMs: 1_000_000 },
      prices: PRICES,
    });
    const output = await r.output();
    expect(output.outcome).toEqual({ type: 'Sealed', reason: 'budget: 110 tokens used, limit 50' });
    expect(r.finished).toHaveLength(1);
  });

  it('a user seal while the over-budget batch runs wins over the budget (first reason wins)', async () => {
    const free = freeTool('lookup', { held: true });
    const r = run(THREE_TURNS, { tools: [free.tool], budget: { maxTokens: 50 } });
    r.actor.start();
    await free.started;
    r.actor.send({ type: 'seal', reason: 'user stopped it' });
    free.release();
    const output = await runToCompletion(r.actor);
    expect(output.outcome).toEqual({ type: 'Sealed', reason: 'user stopped it' });
    expect(providerValid(output.messages)).toBe(true);
    expect(r.finished).toHaveLength(1);
  });

  it('a run within every limit completes, and reports usage and cost', async () => {
    const free = freeTool();
    const r = run(THREE_TURNS, {
      tools: [free.tool],
      budget: { maxTokens: 10_000, maxCostUsd: 1, maxToolCalls: 10, maxDurationMs: 60_000 },
      prices: PRICES,
    });
    const output = await r.output();
    expect(output.outcome).toEqual({ type: 'Completed', finalText: 'all done' });
    expect(output.usage).toEqual(usage(400, 40));
    expect(output.costUsd).toBeCloseTo((400 * 3 + 40 * 15) / 1e6, 12);
    expect(r.model.invalid()).toEqual([]);
  });

  it('a budget seal while calls wait for a human never happens mid-batch: the batch is decided first', async () => {
    const { tool, ran } = guardedTool();
    const r = run(
      [{ text: 'w', toolCalls: [ask('write_file', { path: 'a', content: 'x' })], usage: usage(500, 10) }, { text: 'never' }],
      { tools: [tool], budget: { maxTokens: 100 } },
    );
    r.actor.start();
    await awaitingApproval(r.actor);
    r.actor.send({ type: 'approve', toolCallId: 'call_1_0' });
    const output = await runToCompletion(r.actor);
    expect(output.outcome).toEqual({ type: 'Sealed', reason: 'budget: 510 tokens used, limit 100' });
    expect(ran).toHaveLength(1);
    expectSalvaged(output.messages, 1);
    expect(r.model.requests).toHaveLength(1);
  });

  it('a bad budget is refused when the machine is made: maxCostUsd needs prices, limits are positive', () => {
    const model = scriptedModel([{ text: 'x' }]);
    expect(() => createAgentMachine({ model, budget: { maxCostUsd: 1 } })).toThrow(InvalidConfigError);
    expect(() => createAgentMachine({ model, budget: { maxTokens: -1 } })).toThrow();
    expect(() => createAgentMachine({ model, budget: { maxToolCalls: 1.5 } })).toThrow();
  });
});

describe('usage and cost, per run and per session', () => {
  it('each run reports its own usage and cost (output and run.finished); the session adds them up; budgets are per run', async () => {
    const free = freeTool();
    const model = recordingModel(
      scriptedModel([
        { text: 'a', toolCalls: [lookup('a'), lookup('b')], usage: usage(100, 10) },
        { text: 'run one', usage: usage(120, 5) },
        { text: 'c', toolCalls: [lookup('c'), lookup('d')], usage: usage(200, 20) },
        { text: 'run two', usage: usage(250, 7) },
      ]),
    );
    const actor = createActor(
      createAgentMachine({ model: model.model, tools: [free.tool], retry: false, prices: PRICES, budget: { maxToolCalls: 2 } }),
      { input: { sessionId: 's' } },
    );
    const finished = collect(actor, 'run.finished');
    const turns = collect(actor, 'turn.finished');
    actor.start();
    actor.send({ type: 'input', message: 'one' });
    const first = await runFinished(actor, 1);
    actor.send({ type: 'input', message: 'two' });
    const second = await runFinished(actor, 2);

    expect(first.outcome).toEqual({ type: 'Completed', finalText: 'run one' });
    expect(second.outcome).toEqual({ type: 'Completed', finalText: 'run two' });
    expect(first.usage).toEqual(usage(220, 15));
    expect(second.usage).toEqual(usage(450, 27));
    expect(first.costUsd).toBeCloseTo((220 * 3 + 15 * 15) / 1e6, 12);
    expect(second.costUsd).toBeCloseTo((450 * 3 + 27 * 15) / 1e6, 12);
    expect(finished.map((e) => e.output.usage)).toEqual([usage(220, 15), usage(450, 27)]);
    expect(finished.map((e) => e.output.costUsd)).toEqual([first.costUsd, second.costUsd]);
    expect(turns.map((e) => e.reply.usage)).toEqual([usage(100, 10), usage(120, 5), usage(200, 20), usage(250, 7)]);
    expect(actor.getSnapshot().context.sessionUsage).toEqual(usage(670, 42));
    expect(actor.getSnapshot().context.runUsage).toEqual(usage(450, 27));
    // run.finished also carries the session so far, tokens and cost.
    expect(finished.map((e) => e.sessionUsage)).toEqual([usage(220, 15), usage(670, 42)]);
    expect(finished[1]!.sessionCostUsd).toBeCloseTo((670 * 3 + 42 * 15) / 1e6, 12);
    expect(model.invalid()).toEqual([]);
  });

  it('without prices there is no cost, only usage', async () => {
    const r = run([{ text: 'hi', usage: usage(7, 3) }], {});
    const output = await r.output();
    expect(output.usage).toEqual(usage(7, 3));
    expect(output.costUsd).toBeUndefined();
  });

  it('run usage survives a restore of a durable session: the budget counts tokens spent before it', async () => {
    const backing = new MemoryBacking();
    const { tool, ran } = guardedTool();
    const script: ScriptEntry[] = [
      { text: 'w1', toolCalls: [ask('write_file', { path: 'a', content: '1' })], usage: usage(100, 0) },
      { text: 'w2', toolCalls: [ask('write_file', { path: 'b', content: '2' })], usage: usage(100, 0) },
      { text: 'never reached', usage: usage(1, 1) },
    ];
    const make = () => {
      const model = recordingModel(scriptedModel(script));
      return { model, machine: createAgentMachine({ model: model.model, tools: [tool], retry: false, budget: { maxTokens: 150 }, prices: PRICES }) };
    };
    const a = make();
    const first = await DurableSession.open({ machine: a.machine, store: new MemorySessionStore(backing), sessionId: 'budget' });
    first.send({ type: 'input', message: 'go' });
    await awaitingApproval(first.actor);
    await first.close();

    const b = make();
    const second = await DurableSession.open({ machine: b.machine, store: new MemorySessionStore(backing), sessionId: 'budget' });
    await awaitingApproval(second.actor);
    expect(second.actor.getSnapshot().context.runUsage).toEqual(usage(100, 0));
    second.send({ type: 'approve', toolCallId: 'call_1_0', always: true });
    const output = (await second.whenIdle())!;
    await second.close();
    expect(output.outcome).toEqual({ type: 'Sealed', reason: 'budget: 200 tokens used, limit 150' });
    expect(output.usage).toEqual(usage(200, 0));
    expect(output.costUsd).toBeCloseTo((200 * 3) / 1e6, 12);
    expect(second.actor.getSnapshot().context.sessionUsage).toEqual(usage(200, 0));
    expect(ran.map((x) => x.path)).toEqual(['a', 'b']);
    expect(b.model.requests).toHaveLength(1);
    expect([...a.model.requests, ...b.model.requests].every(providerValid)).toBe(true);
  });
});

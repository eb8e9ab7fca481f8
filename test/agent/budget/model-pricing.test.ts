/**
 * Pricing by model (budget/model-pricing.ts), the agent's `pricing` hook when its runs may use more
 * than one model (a list, a handoff agent's own model, a child agent's): each call's usage is
 * booked under the model that made it at that model's prices, a child's under its models at the
 * child's, and every row carries its cost. A row stored by the previous build, without its cost
 * (and a child counted without its models), still reads and is priced by its model's name.
 */
import { describe, expect, it } from 'vitest';
import { createActor, waitFor } from 'xstate';
import { compileAgent } from '../../../src/agent/core/compile.js';
import type { AgentContext } from '../../../src/agent/core/context.js';
import { modelPricing } from '../../../src/agent/budget/model-pricing.js';
import { startModels, modelList } from '../../../src/agent/fallback/fallback.js';
import { agentTool, createAgentMachine } from '../../../src/index.js';
import { decodeRow, encodeRow } from '../../../src/sessions/session-row.js';
import { scriptedModel } from '../../../src/testing.js';

/** $1 and $10 a token, in and out. */
const CHEAP = { inputPerMillionUsd: 1_000_000, outputPerMillionUsd: 1_000_000 };
const DEAR = { inputPerMillionUsd: 10_000_000, outputPerMillionUsd: 10_000_000 };
const usage = (n: number) => ({ inputTokens: n, outputTokens: n });

const primary = scriptedModel([], { name: 'primary' });
const backup = scriptedModel([], { name: 'backup' });

describe('modelPricing', () => {
  const models = [{ name: 'primary', prices: CHEAP }, { name: 'backup', prices: DEAR }];
  const start = (): AgentContext => ({ models: startModels(modelList([primary, backup], undefined, undefined), undefined), runUsage: usage(0), sessionUsage: usage(0) }) as AgentContext;

  it("books a reply under the model that speaks, at its prices, for the run and the session; without usage nothing changes", () => {
    const pricing = modelPricing(models, () => 1);
    const context = start();
    const booked = { ...context, ...pricing.book!(context, usage(1)), runUsage: usage(1), sessionUsage: usage(1) } as AgentContext;
    expect(booked.models!.run).toEqual([{ model: 'backup', usage: usage(1), costUsd: 20 }]);
    expect(booked.models!.session).toEqual(booked.models!.run);
    expect(pricing.book!(context, undefined)).toEqual({});
    expect(pricing.run(booked)).toEqual({ costUsd: 20, usageByModel: [{ model: 'backup', usage: usage(1), costUsd: 20 }] });
    expect(pricing.session(booked)).toBe(20);
  });

  it("books a child's spend under its models at its own cost; one it could not price, at the speaking model's prices", () => {
    const pricing = modelPricing(models, () => 0);
    const context = start();
    const after = { ...context, ...pricing.bookSpent!(context, [{ model: 'child', usage: usage(2), costUsd: 7 }, { model: 'unpriced', usage: usage(1) }]) } as AgentContext;
    expect(after.models!.run).toEqual([
      { model: 'child', usage: usage(2), costUsd: 7 },
      // The child had no prices: at primary's ($1 a token), as the run's own tokens.
      { model: 'unpriced', usage: usage(1), costUsd: 2 },
    ]);
  });

  it('one name priced twice (the run and a child on models of one name) adds each part at its own prices', () => {
    const pricing = modelPricing(models, () => 0);
    let context = start();
    context = { ...context, ...pricing.book!(context, usage(1)) } as AgentContext;
    context = { ...context, ...pricing.bookSpent!(context, [{ model: 'primary', usage: usage(1), costUsd: 20 }]), runUsage: usage(2) } as AgentContext;
    expect(pricing.run(context).usageByModel).toEqual([{ model: 'primary', usage: usage(2), costUsd: 22 }]);
  });

  it('an agent books by model with a list, a handoff agent of its own model or an agent tool; else it has one price list', () => {
    const child = createAgentMachine({ model: scriptedModel([], { name: 'child' }) });
    expect(compileAgent({ model: [primary, backup] }).pricing.book).toBeDefined();
    expect(compileAgent({ model: primary, handoffs: { agents: [{ name: 'b', description: 'b', model: backup }] } }).pricing.book).toBeDefined();
    expect(compileAgent({ model: primary, tools: [agentTool({ agent: child, name: 'ask', description: 'x' })] }).pricing.book).toBeDefined();
    expect(compileAgent({ model: primary }).pricing.book).toBeUndefined();
    expect(compileAgent({ model: primary, handoffs: { agents: [{ name: 'b', description: 'b' }] } }).pricing.book).toBeUndefined();
  });
});

describe('a stored row of the current version (rows without their cost, a child counted without its models)', () => {
  it('reads, and its runs are priced by each model name as before; the next reply is booked with its cost', async () => {
    const model = scriptedModel([{ text: 'one', usage: usage(1) }, { text: 'two', usage: usage(2) }], { name: 'primary' });
    const agent = createAgentMachine({ model: [{ model, prices: CHEAP }, { model: backup, prices: DEAR }] });
    const actor = createActor(agent, { input: { sessionId: 's' } }).start();
    actor.send({ type: 'input', message: 'go' });
    const idle = await waitFor(actor, (s) => s.matches('Idle') && s.context.runIndex === 1, { timeout: 5_000 });
    actor.stop();
    // The row as the previous build stored it: no cost in the books, a child counted as plain usage.
    const row = JSON.parse(JSON.stringify(encodeRow(idle.context))) as Record<string, unknown> & { models: { run: object[]; session: object[] } };
    for (const books of [row.models.run, row.models.session]) for (const entry of books) delete (entry as { costUsd?: number }).costUsd;
    expect(row.models.session).toEqual([{ model: 'primary', usage: usage(1) }]);
    row.childUsage = { 's/run-1:turn-1:c1': usage(3) };
    const restored = decodeRow('s', row, [...idle.context.brain.context.history]);
    const { pricing } = compileAgent({ model: [{ model, prices: CHEAP }, { model: backup, prices: DEAR }] });
    expect(pricing.session(restored)).toBe(2);
    // The session goes on: the next reply is booked with its cost beside the row that had none.
    const again = createActor(agent, { input: { stored: restored } }).start();
    again.send({ type: 'input', message: 'more' });
    const next = await waitFor(again, (s) => s.matches('Idle') && s.context.runIndex === 2, { timeout: 5_000 });
    again.stop();
    expect(next.context.lastRun).toMatchObject({ costUsd: 4, usageByModel: [{ model: 'primary', usage: usage(2), costUsd: 4 }] });
    expect(pricing.session(next.context)).toBe(6);
    expect(next.context.models!.session).toEqual([{ model: 'primary', usage: usage(3), costUsd: 6 }]);
  });
});

/**
 * A model list's pricing (fallback/list-pricing.ts), the agent's `pricing` hook: a reply's usage is
 * booked to the model that made it, for the run and the session, and each model's usage is priced
 * at its own prices. The loop asks the hook; it names no model list.
 */
import { describe, expect, it } from 'vitest';
import { compileAgent } from '../../../src/agent/core/compile.js';
import type { AgentContext } from '../../../src/agent/core/context.js';
import { listPricing } from '../../../src/agent/fallback/list-pricing.js';
import { modelList, startModels } from '../../../src/agent/fallback/fallback.js';
import { scriptedModel } from '../../../src/models/scripted.js';

const primary = scriptedModel([], { name: 'primary' });
const backup = scriptedModel([], { name: 'backup' });
const list = modelList([{ model: primary, prices: { inputPerMillionUsd: 1_000_000, outputPerMillionUsd: 0 } }, backup], undefined, undefined);

describe('listPricing', () => {
  it("books a reply's usage to the active model, for the run and the session; without usage nothing changes", () => {
    const pricing = listPricing(list);
    const models = startModels(list, undefined);
    const context = { models } as AgentContext;
    const booked = pricing.book!(context, { inputTokens: 3, outputTokens: 1 });
    expect(booked.models?.run).toEqual([{ model: 'primary', usage: { inputTokens: 3, outputTokens: 1 } }]);
    expect(booked.models?.session).toEqual(booked.models?.run);
    expect(pricing.book!(context, undefined).models).toBe(models);
    // Priced at the primary's own prices: $1 per input token.
    expect(pricing.run({ ...context, ...booked } as AgentContext).costUsd).toBe(3);
  });

  it('is the pricing of an agent given a model list; an agent with one model books nothing by model', () => {
    expect(compileAgent({ model: [primary, backup] }).pricing.book).toBeDefined();
    expect(compileAgent({ model: primary }).pricing.book).toBeUndefined();
  });
});

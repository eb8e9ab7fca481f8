/**
 * A handoff agent with a model of its own speaks with it, and its tokens are that model's: booked
 * under it in `usageByModel` and priced at its agent's `prices` (else the entry agent's). Before,
 * they were booked to the entry agent's model at the entry's prices (with a model list), or
 * priced at the one price list with no `usageByModel` at all (with one model).
 */
import { describe, expect, it } from 'vitest';
import { createAgentMachine, InvalidConfigError, runAgent, type HandoffsConfig, type Model } from '../../../src/index.js';
import { scriptedModel } from '../../../src/testing.js';

/** $1 and $10 a token, in and out. */
const CHEAP = { inputPerMillionUsd: 1_000_000, outputPerMillionUsd: 1_000_000 };
const DEAR = { inputPerMillionUsd: 10_000_000, outputPerMillionUsd: 10_000_000 };
const usage = (n: number) => ({ inputTokens: n, outputTokens: n });

/** Triage (1 + 1 tokens) hands to billing, whose model answers (2 + 2 tokens at turn 2). */
const entryModel = () => scriptedModel([{ toolCalls: [{ id: 't1', name: 'transfer_to_billing', args: {} }], usage: usage(1) }], { name: 'triage-model' });
const billingModel = () => scriptedModel([{ text: 'not triage' }, { text: 'Refunded.', usage: usage(2) }], { name: 'billing-model' });
const team = (model: Model, prices?: typeof DEAR): HandoffsConfig => ({
  name: 'triage',
  agents: [{ name: 'billing', description: 'Refunds.', model, ...(prices && { prices }) }],
});

describe("a handoff agent's own model books its tokens", () => {
  it('with one entry model and one price list: each model under its name, at its prices', async () => {
    const output = await runAgent({ model: entryModel(), prices: CHEAP, handoffs: team(billingModel(), DEAR), prompt: 'Refund A-7.' });
    expect(output.outcome).toEqual({ type: 'Completed', finalText: 'Refunded.' });
    expect(output.usage).toEqual(usage(3));
    expect(output.usageByModel).toEqual([
      { model: 'triage-model', usage: usage(1), costUsd: 2 },
      { model: 'billing-model', usage: usage(2), costUsd: 40 },
    ]);
    expect(output.costUsd).toBe(42);
  });

  it('with a model list: the handoff model is not booked to the list model in use', async () => {
    const output = await runAgent({ model: [{ model: entryModel(), prices: CHEAP }], handoffs: team(billingModel(), DEAR), prompt: 'Refund A-7.' });
    expect(output.usageByModel).toEqual([
      { model: 'triage-model', usage: usage(1), costUsd: 2 },
      { model: 'billing-model', usage: usage(2), costUsd: 40 },
    ]);
    expect(output.costUsd).toBe(42);
  });

  it("without prices of its own, the handoff model is priced at the entry agent's prices", async () => {
    const output = await runAgent({ model: entryModel(), prices: CHEAP, handoffs: team(billingModel()), prompt: 'Refund A-7.' });
    expect(output.usageByModel).toEqual([
      { model: 'triage-model', usage: usage(1), costUsd: 2 },
      { model: 'billing-model', usage: usage(2), costUsd: 4 },
    ]);
    expect(output.costUsd).toBe(6);
  });

  it('maxCostUsd counts the handoff model at its own prices: $42 spent goes past $10, sealed between steps', async () => {
    // Billing hands back (2 + 2 tokens at $10): the check after its batch finds $42 spent.
    const billing = scriptedModel([{ text: 'not triage' }, { toolCalls: [{ id: 't2', name: 'transfer_to_triage', args: {} }], usage: usage(2) }], { name: 'billing-model' });
    const handoffs: HandoffsConfig = { name: 'triage', agents: [{ name: 'billing', description: 'Refunds.', model: billing, prices: DEAR, handoffs: ['triage'] }] };
    const output = await runAgent({ model: entryModel(), prices: CHEAP, handoffs, budget: { maxCostUsd: 10 }, prompt: 'Refund A-7.' });
    expect(output.outcome).toEqual({ type: 'Sealed', reason: 'budget: $42.0000 spent, limit $10' });
    expect(output.costUsd).toBe(42);
  });

  it('prices without a model of its own, or malformed, are refused when the agent is made', () => {
    const model = entryModel();
    expect(() => createAgentMachine({ model, handoffs: { agents: [{ name: 'billing', description: 'x', prices: DEAR }] } })).toThrow(InvalidConfigError);
    expect(() => createAgentMachine({ model, handoffs: team(billingModel(), { inputPerMillionUsd: -1 } as never) })).toThrow(/handoffs\.agents\[0\]\.prices/);
    // A budget on cost needs a price for every model that may speak.
    expect(() => createAgentMachine({ model: [{ model, prices: CHEAP }], handoffs: team(billingModel()), budget: { maxCostUsd: 1 } })).toThrow(/budget\.maxCostUsd needs prices/);
  });
});

/**
 * A child agent (an agent tool) with a model of its own: its tokens join the parent's run under
 * that model in `usageByModel`, at the child's own prices, so the parent's cost and its
 * `maxCostUsd` count the tree at each model's prices (a grandchild's too). Before, the parent
 * priced the child's tokens at its own prices and booked them to its own model. Also under a
 * `DurableSession` on a SQLite file, where a child that finished before a crash gives its stored
 * result and its spend is still booked at its prices, and the stored rows say so.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { agentTool, createAgentMachine, runAgent, type AgentMachine } from '../../../src/index.js';
import type { ScriptEntry } from '../../../src/testing.js';
import { DurableSession } from '../../../src/sessions/durable-session.js';
import { SqliteSessionStore } from '../../../src/stores/sqlite.js';
import { scriptedModel } from '../../../src/testing.js';

const root = mkdtempSync(join(tmpdir(), 'loopchart-usage-by-model-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** $1 and $10 a token, in and out. */
const CHEAP = { inputPerMillionUsd: 1_000_000, outputPerMillionUsd: 1_000_000 };
const DEAR = { inputPerMillionUsd: 10_000_000, outputPerMillionUsd: 10_000_000 };
const usage = (n: number) => ({ inputTokens: n, outputTokens: n });
const delegate = (name: string): ScriptEntry => ({ toolCalls: [{ id: 'c1', name, args: { task: 'find it' } }], usage: usage(1) });

/** A child on its own model at $10 a token (null: no prices): one reply of 2 + 2 tokens ($40). */
const child = (prices: typeof DEAR | null = DEAR) =>
  createAgentMachine({ model: scriptedModel([{ text: 'found it', usage: usage(2) }], { name: 'child-model' }), ...(prices && { prices }) });

/** A parent on its own model at $1 a token: delegates (1 + 1), then answers (1 + 1). */
const parentConfig = (agent: AgentMachine) => ({
  model: scriptedModel([delegate('research'), { text: 'done', usage: usage(1) }], { name: 'parent-model' }),
  prices: CHEAP,
  tools: [agentTool({ agent, name: 'research', description: 'Researches.' })],
});

const EXPECTED = [
  { model: 'parent-model', usage: usage(2), costUsd: 4 },
  { model: 'child-model', usage: usage(2), costUsd: 40 },
];

describe("a child agent's tokens are booked under its model, at its prices", () => {
  it('usageByModel has each model, and the cost adds each at its own prices', async () => {
    const output = await runAgent({ ...parentConfig(child()), prompt: 'go' });
    expect(output.outcome).toEqual({ type: 'Completed', finalText: 'done' });
    expect(output.usage).toEqual(usage(4));
    expect(output.usageByModel).toEqual(EXPECTED);
    expect(output.costUsd).toBe(44);
  });

  it("maxCostUsd bounds the tree at the child's prices: $42 after the delegation goes past $10", async () => {
    const output = await runAgent({ ...parentConfig(child()), budget: { maxCostUsd: 10 }, prompt: 'go' });
    expect(output.outcome).toEqual({ type: 'Sealed', reason: 'budget: $42.0000 spent, limit $10' });
  });

  it("a grandchild's tokens reach the top under its own model, at its own prices", async () => {
    const grandchild = createAgentMachine({ model: scriptedModel([{ text: 'deep', usage: usage(3) }], { name: 'grandchild-model' }), prices: { inputPerMillionUsd: 100_000_000, outputPerMillionUsd: 0 } });
    const middle = createAgentMachine({
      model: scriptedModel([delegate('dig'), { text: 'found it', usage: usage(2) }], { name: 'child-model' }),
      prices: DEAR,
      tools: [agentTool({ agent: grandchild, name: 'dig', description: 'Digs.' })],
    });
    const output = await runAgent({ ...parentConfig(middle), prompt: 'go' });
    expect(output.usageByModel).toEqual([
      { model: 'parent-model', usage: usage(2), costUsd: 4 },
      { model: 'child-model', usage: usage(3), costUsd: 60 },
      { model: 'grandchild-model', usage: usage(3), costUsd: 300 },
    ]);
    expect(output.costUsd).toBe(364);
    expect(output.usage).toEqual(usage(8));
  });

  it("a child without prices is priced at the parent's, still under its own model", async () => {
    const output = await runAgent({ ...parentConfig(child(null)), prompt: 'go' });
    expect(output.usageByModel).toEqual([
      { model: 'parent-model', usage: usage(2), costUsd: 4 },
      { model: 'child-model', usage: usage(2), costUsd: 4 },
    ]);
    expect(output.costUsd).toBe(8);
  });

  it('under durable sessions on SQLite: the same books, stored with the parent, also for a child that finished before a crash', async () => {
    const path = join(root, 'tree.db');
    // The child's session finished before the parent's (crashed) process called it: its stored result is taken.
    const store = new SqliteSessionStore({ path });
    const done = await DurableSession.open({ machine: child(), store, sessionId: 'boss/run-1:turn-1:c1' });
    done.send({ type: 'input', message: 'find it' });
    expect((await done.whenIdle())?.outcome).toEqual({ type: 'Completed', finalText: 'found it' });
    await done.close();
    const parent = await DurableSession.open({ machine: createAgentMachine(parentConfig(child())), store, sessionId: 'boss' });
    parent.send({ type: 'input', message: 'go' });
    const output = await parent.whenIdle();
    await parent.close();
    await store.close();
    expect(output?.usageByModel).toEqual(EXPECTED);
    expect(output?.costUsd).toBe(44);
    // Reopened from the file in another store: the stored run says the same, and the session's cost is its.
    const reopenedStore = new SqliteSessionStore({ path });
    const reopened = await DurableSession.open({ machine: createAgentMachine(parentConfig(child())), store: reopenedStore, sessionId: 'boss' });
    const { context } = reopened.actor.getSnapshot();
    expect(context.lastRun).toMatchObject({ costUsd: 44, usageByModel: EXPECTED });
    expect(context.models?.session).toEqual(EXPECTED);
    await reopened.close();
    await reopenedStore.close();
  });
});

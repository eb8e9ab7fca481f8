/**
 * Recording a store's sessions as cases leaves a subagent's session out: it is a part of its
 * parent's run (the agent tool's call, whose result the parent's case holds), run by the agent
 * tool's agent, not the dataset's. Named by id, it is recorded as asked.
 */
import { z } from 'zod';
import { describe, expect, it } from 'vitest';
import { createAgentMachine } from '../../machines/agent.machine.js';
import { agentTool } from '../../src/agent/subagents/agent-tool.js';
import { recordCases } from '../../src/evals/record.js';
import { runEval } from '../../src/evals/run-eval.js';
import { scriptedModel } from '../../src/models/scripted.js';
import { MemorySessionStore } from '../../src/stores/memory.js';
import { defineTool } from '../../src/tools/define-tool.js';
import { recordSession } from './support.js';

const refund = defineTool({ name: 'refund', description: 'Refunds an order.', input: z.object({ order: z.string() }), execute: ({ order }) => `refunded ${order}` });

/** A coordinator whose billing subagent refunds the order. */
const coordinator = () => ({
  model: scriptedModel([{ toolCalls: [{ id: 'a1', name: 'billing', args: { task: 'Refund order A1.' } }] }, { text: 'Billing refunded A1.' }]),
  tools: [agentTool({ agent: createAgentMachine({ model: scriptedModel([{ toolCalls: [{ id: 'p1', name: 'refund', args: { order: 'A1' } }] }, { text: 'Refunded A1.' }]), tools: [refund] }), name: 'billing', description: 'Refunds.' })],
});

describe('recordCases', () => {
  it("leaves a subagent's session out of a selection by prefix, so the dataset evaluates against its own agent; named by id, the child is recorded", async () => {
    const store = new MemorySessionStore();
    await recordSession(store, 'support-1', coordinator(), 'Refund order A1.');
    expect((await store.list()).map((s) => s.sessionId).sort()).toEqual(['support-1', 'support-1/run-1:turn-1:a1']);
    const { cases, problems } = await recordCases(store, { prefix: 'support-' });
    expect(problems).toEqual([]);
    expect(cases.map((c) => c.recording!.sessionId)).toEqual(['support-1']);
    const report = await runEval({ dataset: { cases, problems: [] }, agent: coordinator, model: 'recorded' });
    expect(report.failedCases).toBe(0);
    expect(report.passed).toBe(true);
    const named = await recordCases(store, { ids: ['support-1/run-1:turn-1:a1'] });
    expect(named.cases.map((c) => c.recording!.sessionId)).toEqual(['support-1/run-1:turn-1:a1']);
  });
});

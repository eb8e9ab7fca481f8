/** A dry run calls nothing: every effect that reaches outside is answered from the recording, or named as missing. */
import { z } from 'zod';
import { describe, expect, it } from 'vitest';
import { createAgentMachine } from '../../machines/agent.machine.js';
import type { AgentConfig } from '../../src/agent/core/config.js';
import { summarizingCompactor } from '../../src/compaction/summarize.js';
import { recordCase } from '../../src/evals/record.js';
import { runCase } from '../../src/evals/run-case.js';
import type { Model, ModelRequest } from '../../src/model.js';
import { DurableSession } from '../../src/sessions/durable-session.js';
import { MemorySessionStore } from '../../src/stores/memory.js';
import { defineTool } from '../../src/tools/define-tool.js';

/** Counts its calls: three lookups, then an answer; a call offered no tools is a summary (the compactor's). */
function countingModel(counter: { calls: number }): Model {
  return {
    name: 'counting',
    async generate(request: ModelRequest) {
      counter.calls++;
      const usage = { inputTokens: 10, outputTokens: 5 };
      if (request.tools.length === 0) return { message: { role: 'assistant', content: 'SUMMARY' }, finishReason: 'stop', usage };
      const done = request.messages.filter((m) => m.role === 'tool').length;
      if (done < 3) return { message: { role: 'assistant', content: '', toolCalls: [{ id: `c${done}`, name: 'lookup', args: { order: `A${done}` } }] }, finishReason: 'tool-calls', usage };
      return { message: { role: 'assistant', content: 'done' }, finishReason: 'stop', usage };
    },
  };
}

const lookup = defineTool({ name: 'lookup', description: 'Looks up.', input: z.object({ order: z.string() }), execute: ({ order }) => `${order}: ${'lorem ipsum dolor sit amet '.repeat(60)}` });

/** Compacts with a summary from its own model once the lookups fill the window. */
const compacting = (counter: { calls: number }, threshold = 60): AgentConfig => ({
  model: countingModel(counter),
  tools: [lookup],
  policy: { contextWindow: 1500, compactThreshold: threshold, maxTurns: 4 },
  compactor: summarizingCompactor({ keepTokens: 100 }),
});

async function record(config: AgentConfig, sessionId: string) {
  const store = new MemorySessionStore();
  const session = await DurableSession.open({ machine: createAgentMachine(config), store, sessionId });
  session.send({ type: 'input', message: 'look up A0, A1, A2' });
  await session.whenIdle();
  await session.close();
  return recordCase(store, sessionId);
}

describe('a dry run', () => {
  it('answers a summarizing compaction from the recording: the model is not called, the decisions are as recorded', async () => {
    const evalCase = await record(compacting({ calls: 0 }), 's1');
    expect(evalCase.recording!.trace.filter((e) => e.type === 'compaction' && e.rewritten)).toHaveLength(1);
    const counter = { calls: 0 };
    const run = await runCase(evalCase, compacting(counter), { model: 'recorded' });
    expect(counter.calls).toBe(0);
    expect(run.difference).toBeNull();
    expect(run.decisions.map((d) => d.kind)).toContain('compact');
    // The conversation it left is the one the recording's next model call was sent.
    expect(run.messages.some((m) => m.role === 'assistant' && m.content.startsWith('Summary of the earlier conversation:\nSUMMARY'))).toBe(true);
  });

  it('a compaction the recording does not have fails the run naming it, and shows as the first difference', async () => {
    const evalCase = await record(compacting({ calls: 0 }, 95), 's2');
    expect(evalCase.recording!.trace.some((e) => e.type === 'compaction')).toBe(false);
    const counter = { calls: 0 };
    const run = await runCase(evalCase, compacting(counter), { model: 'recorded' });
    expect(counter.calls).toBe(0);
    expect(run.outcome).toMatchObject({ type: 'Failed', error: { message: expect.stringContaining('unrecorded compaction (run 1, turn 3, ThresholdExceeded): a dry run calls nothing') } });
    expect(run.difference?.got).toMatchObject({ kind: 'compact' });
  });

  it('answers a guardrail from the recording: its check does not run', async () => {
    let checks = 0;
    const config = (check: () => { type: 'pass' }): AgentConfig => ({
      model: countingModel({ calls: 0 }),
      tools: [lookup],
      guardrails: { input: [{ name: 'moderation', check }] },
    });
    const evalCase = await record(config(() => ({ type: 'pass' })), 's3');
    const run = await runCase(evalCase, config(() => {
      checks++;
      return { type: 'pass' };
    }), { model: 'recorded' });
    expect(checks).toBe(0);
    expect(run.guardrails).toEqual([{ name: 'moderation', stage: 'input', verdict: 'pass' }]);
    expect(run.difference).toBeNull();
  });

  it('an operation hook, which no recording holds, runs as the agent\'s own code, as a dry run always did', async () => {
    let hooks = 0;
    const config: AgentConfig = { model: countingModel({ calls: 0 }), tools: [lookup], operations: [{ name: 'fetcher', beforeModelCall: async () => void hooks++ }] };
    const evalCase = await record(config, 's4');
    hooks = 0;
    const run = await runCase(evalCase, config, { model: 'recorded' });
    expect(hooks).toBeGreaterThan(0);
    expect(run.outcome.type).toBe('Completed');
  });
});

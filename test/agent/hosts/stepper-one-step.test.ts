/**
 * AgentStepper: one step, one side effect. Each `step()` performs the effects of one step only
 * (one model call, one compaction, one tool batch, one hook point), whatever the chart asks for
 * next in the same breath: after a steer sends the run straight back to the model, after an
 * approval, a compaction and an operation's yield.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import type { Executor, SideEffect } from '../../../src/agent/protocol/executor.js';
import type { Operation } from '../../../src/agent/operations/operation.js';
import { AgentStepper } from '../../../src/agent/hosts/stepper.js';
import { scriptedModel } from '../../../src/testing.js';
import { defineTool } from '../../../src/tools/define-tool.js';
import { echoTool } from '../../support/driver.js';

const stepId = (effect: SideEffect) =>
  effect.kind === 'tool' || effect.kind === 'toolStart' ? `tools ${(effect.input as { batchKey: string }).batchKey}` : effect.kind === 'operation' ? `point ${(effect.input as { pointKey: string }).pointKey}` : effect.kind === 'approval' ? 'approvals' : `${effect.kind} ${effect.key}`;

describe('AgentStepper: one step, one side effect', () => {
  it('counts the effects each step performs across steer, approval, compaction and an operation yield', async () => {
    const performed: SideEffect[] = [];
    const counting: Executor = (effect, perform) => {
      performed.push(effect);
      return perform();
    };
    const gate: Operation<{ ok: boolean }, { ok: boolean }> = {
      name: 'gate',
      state: { schema: z.object({ ok: z.boolean() }), initial: { ok: false } },
      resume: { schema: z.object({ ok: z.boolean() }), apply: ({ ok }) => ({ state: { ok } }) },
      beforeTools: (_calls, ctx) => (ctx.state.ok ? undefined : { yield: { reason: 'check' } }),
    };
    const ask = defineTool({ name: 'ask', description: 'Needs a human.', input: z.object({}), needsApproval: true, execute: () => 'asked' });
    const model = scriptedModel([
      { text: 'thinking' }, // answered while a steer is queued: the run goes straight back to the model
      { toolCalls: [{ id: 'e', name: 'echo', args: { text: 'word '.repeat(1_800) } }, { id: 'q', name: 'ask', args: {} }] },
      { text: 'done' },
    ]);
    const compactor = async ({ messages }: { messages: readonly unknown[] }) => ({ messages: [messages[0] as never], tokensAfter: 5 });
    const machine = createAgentMachine({ model, tools: [echoTool, ask], operations: [gate], compactor, executor: counting, policy: { contextWindow: 2_500, compactThreshold: 60 } });
    const stepper = new AgentStepper(machine, { input: { prompt: 'Go.' } });
    const perStep: SideEffect[][] = [];
    for (let n = 0; n < 30 && stepper.status() !== 'finished'; n++) {
      const before = performed.length;
      if (n === 0) stepper.apply([{ type: 'steer', message: 'also this' }]);
      const status = stepper.status();
      if (status === 'yielded') {
        const session = stepper.session as unknown as { context: { operations: { waiting: { operation: string } | null }; approvals: { waiting: string[] } } };
        if (session.context.operations.waiting) stepper.apply([{ type: 'operation.resume', operation: 'gate', payload: { ok: true } }]);
        else for (const id of session.context.approvals.waiting) stepper.apply([{ type: 'approve', toolCallId: id }]);
        continue;
      }
      const { effects } = await stepper.step();
      perStep.push(performed.slice(before));
      stepper.apply(effects);
    }
    expect(stepper.status()).toBe('finished');
    for (const effects of perStep) {
      expect(new Set(effects.map(stepId)).size).toBeLessThanOrEqual(1);
      expect(effects.filter((e) => e.kind === 'model').length).toBeLessThanOrEqual(1);
    }
    // Every model call was a step of its own: three replies, plus the call after the steer.
    expect(perStep.filter((effects) => effects.some((e) => e.kind === 'model')).length).toBe(performed.filter((e) => e.kind === 'model').length);
    expect(performed.filter((e) => e.kind === 'model').length).toBeGreaterThanOrEqual(3);
    expect(performed.some((e) => e.kind === 'compaction')).toBe(true);
    const { output } = stepper.session as unknown as { output: { outcome: { type: string } } };
    expect(output.outcome.type).toBe('Completed');
  });
});

/**
 * Handoffs per run are bounded (issue 41): agents that hand the conversation round in a cycle
 * stop at `maxHandoffs` (default 10), sealed with a `maxHandoffs:` reason and their conversation
 * kept, not after 200 model calls.
 */
import { createActor, waitFor } from 'xstate';
import { describe, expect, it } from 'vitest';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import type { AgentOutput } from '../../../src/agent/protocol/actor-types.js';
import type { AgentConfig } from '../../../src/agent/core/config.js';
import { DEFAULT_MAX_HANDOFFS } from '../../../src/agent/handoffs/handoffs.js';
import { InvalidConfigError } from '../../../src/errors.js';
import type { Model } from '../../../src/model.js';
import type { ToolMessage } from '../../../src/schemas.js';

/** A model that hands the conversation to `to` on every call, counting its calls. */
function handsTo(to: string, counter: { calls: number }): Model {
  return {
    name: `to-${to}`,
    generate: async () => {
      counter.calls++;
      return { message: { role: 'assistant', content: '', toolCalls: [{ id: `t${counter.calls}`, name: `transfer_to_${to}`, args: {} }] }, finishReason: 'tool-calls' };
    },
  };
}

function cycle(maxHandoffs?: number) {
  const counter = { calls: 0 };
  const config: AgentConfig = {
    model: handsTo('billing', counter),
    handoffs: {
      name: 'triage',
      agents: [{ name: 'billing', description: 'Refunds.', model: handsTo('triage', counter), handoffs: ['triage'] }],
      ...(maxHandoffs !== undefined && { maxHandoffs }),
    },
  };
  return { counter, config };
}

describe('maxHandoffs', () => {
  it('a cycle A -> B -> A stops at the default limit, sealed with the reason, the refused transfer answered with an error', async () => {
    const { counter, config } = cycle();
    const actor = createActor(createAgentMachine(config), { input: { sessionId: 's', prompt: 'Refund my order.' } });
    const handoffs: unknown[] = [];
    actor.on('agent.handoff', (event) => handoffs.push(event));
    const done = new Promise<AgentOutput>((resolve, reject) => actor.subscribe({ complete: () => resolve(actor.getSnapshot().output!), error: reject }));
    actor.start();
    const output = await done;
    expect(DEFAULT_MAX_HANDOFFS).toBe(10);
    expect(output.outcome.type).toBe('Sealed');
    expect((output.outcome as { reason: string }).reason).toMatch(/^maxHandoffs: handoff to 'billing' refused, .* 10 times \(limit 10\)$/);
    expect(handoffs).toHaveLength(10);
    // Ten handoffs, then the eleventh transfer is asked for and refused: 11 model calls, not 200.
    expect(counter.calls).toBe(11);
    const last = output.messages.at(-1) as ToolMessage;
    expect(last).toMatchObject({ role: 'tool', toolName: 'transfer_to_billing', isError: true });
    expect(last.content).toMatch(/Not transferred/);
    // The agent that asked keeps the conversation.
    expect(actor.getSnapshot().context.agent).toEqual({ name: 'triage', from: 'billing' });
  });

  it('maxHandoffs sets the limit, and each run counts afresh', async () => {
    const { counter, config } = cycle(2);
    const actor = createActor(createAgentMachine(config), { input: { sessionId: 's' } }).start();
    actor.send({ type: 'input', message: 'one' });
    const first = await waitFor(actor, (s) => s.matches('Idle') && s.context.runIndex === 1, { timeout: 5_000 });
    expect(first.context.lastRun!.outcome).toMatchObject({ type: 'Sealed', reason: expect.stringMatching(/^maxHandoffs: .*limit 2\)$/) });
    expect(counter.calls).toBe(3);
    expect(first.context.handoffs).toBe(2);
    actor.send({ type: 'input', message: 'two' });
    const second = await waitFor(actor, (s) => s.matches('Idle') && s.context.runIndex === 2, { timeout: 5_000 });
    // Two more handoffs before the refusal: the count started at 0 again.
    expect(counter.calls).toBe(6);
    expect(second.context.lastRun!.outcome).toMatchObject({ type: 'Sealed', reason: expect.stringMatching(/^maxHandoffs: /) });
    actor.stop();
  });

  it('a maxHandoffs that is not a positive integer is an InvalidConfigError', () => {
    for (const bad of [0, -1, 1.5, Number.NaN, '3' as never]) {
      expect(() => createAgentMachine(cycle(bad).config), String(bad)).toThrow(InvalidConfigError);
    }
  });
});

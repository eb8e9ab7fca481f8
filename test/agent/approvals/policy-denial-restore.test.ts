/**
 * A tool policy's denial survives a restore (found by the conformance matrix, issue 41). The
 * denial is recorded as a decision; a restore keeps only decisions that name their call's digest,
 * and the call is marked policy-checked, so a denial recorded without a digest was dropped on
 * restore and the denied call then ran unasked: in a DurableSession reopened after a crash during
 * the batch, and in every `AgentStepper` step (a stepped session is restored each step).
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import { AgentStepper } from '../../../src/agent/hosts/stepper.js';
import { scriptedModel } from '../../../src/models/scripted.js';
import { DurableSession } from '../../../src/sessions/durable-session.js';
import { MemorySessionStore } from '../../../src/stores/memory.js';
import { defineTool } from '../../../src/tools/define-tool.js';

function agent(ran: string[], hold: Promise<void>) {
  const remove = defineTool({ name: 'remove', description: 'Removes.', input: z.object({}), execute: () => {
      ran.push('remove');
      return 'removed';
    },
  });
  const slow = defineTool({
    name: 'slow',
    description: 'Takes a while.',
    input: z.object({}),
    execute: async () => {
      ran.push('slow');
      await hold;
      return 'done';
    },
  });
  return createAgentMachine({
    model: scriptedModel([{ toolCalls: [{ name: 'remove', args: {} }, { name: 'slow', args: {} }] }, { text: 'Finished.' }]),
    tools: [remove, slow],
    retry: false,
    toolPolicy: ({ call }) => (call.name === 'remove' ? { type: 'deny', reason: 'not here' } : { type: 'allow' }),
  });
}

describe('a tool policy denial after a restore', () => {
  it('a DurableSession reopened while the batch ran: the denied call still never runs', async () => {
    const store = new MemorySessionStore();
    const first: string[] = [];
    const crashed = await DurableSession.open({ machine: agent(first, new Promise(() => {})), store, sessionId: 's' });
    crashed.send({ type: 'input', message: 'Go.' });
    for (let i = 0; i < 200 && !first.includes('slow'); i++) await new Promise((resolve) => setTimeout(resolve, 5));
    expect(first).toEqual(['slow']);
    await crashed.flush();
    crashed.actor.stop(); // as a crash leaves it: the batch half done

    const second: string[] = [];
    const resumed = await DurableSession.open({ machine: agent(second, Promise.resolve()), store, sessionId: 's' });
    const output = await resumed.whenIdle();
    expect(second).toEqual(['slow']);
    expect(output?.outcome).toEqual({ type: 'Completed', finalText: 'Finished.' });
    expect(output?.messages.filter((m) => m.role === 'tool').map((m) => m.content)).toEqual(['denied: not here', 'done']);
    await resumed.close();
  });

  it('an AgentStepper run: the denied call never runs', async () => {
    const ran: string[] = [];
    const stepper = new AgentStepper(agent(ran, Promise.resolve()), { input: { prompt: 'Go.' } }, { timeoutMs: 5_000 });
    for (let i = 0; i < 10; i++) {
      const { status, effects } = await stepper.step();
      if (status !== 'continues') break;
      stepper.apply(effects);
    }
    expect(stepper.status()).toBe('finished');
    expect(ran).toEqual(['slow']);
  });
});

/**
 * A reply held for the output guardrails was bought: its tokens count whatever ends the run while
 * the check runs (cancel, seal, a guardrail that throws), as they do when a guardrail trips
 * (docs/agent/guardrails.md: "its tokens are counted"). Before, a run ended mid-check reported
 * none of them.
 */
import { describe, expect, it } from 'vitest';
import { createActor, toPromise } from 'xstate';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import type { Guardrail } from '../../../src/agent/guardrails/guardrails.js';
import { scriptedModel } from '../../../src/models/scripted.js';

const usage = (n: number) => ({ inputTokens: n, outputTokens: n });

async function until(check: () => boolean, ms = 3_000): Promise<void> {
  for (const end = Date.now() + ms; !check(); await new Promise((resolve) => setTimeout(resolve, 5))) {
    if (Date.now() > end) throw new Error(`not so after ${ms} ms`);
  }
}

describe('the usage of a reply held for the output guardrails', () => {
  it('counts when the run is cancelled, sealed or failed by a broken guardrail during the check', async () => {
    for (const end of ['cancel', 'seal', 'throws'] as const) {
      let checking = false;
      const slow: Guardrail = {
        name: 'slow',
        check: ({ signal }) =>
          new Promise((resolve, reject) => {
            checking = true;
            if (end === 'throws') return setTimeout(() => reject(new Error('checker down')), 20);
            signal.addEventListener('abort', () => resolve({ type: 'pass' }), { once: true });
          }),
      };
      const agent = createAgentMachine({ model: scriptedModel([{ text: 'the answer', usage: usage(100) }]), guardrails: { output: [slow] } });
      const actor = createActor(agent, { input: { prompt: 'x' } }).start();
      await until(() => checking);
      if (end === 'cancel') actor.send({ type: 'cancel' });
      if (end === 'seal') actor.send({ type: 'seal', reason: 'enough' });
      const output = await Promise.race([toPromise(actor), new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`${end}: still running`)), 3_000))]);
      expect(output.outcome.type, end).toBe({ cancel: 'Cancelled', seal: 'Sealed', throws: 'Failed' }[end]);
      expect(output.usage, end).toEqual(usage(100));
      expect(actor.getSnapshot().context.sessionUsage, end).toEqual(usage(100));
    }
  });
});

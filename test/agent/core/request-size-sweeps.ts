/**
 * The sweep of one measure of a request (request-size.test.ts) over random configurations,
 * through the actor, `DurableSession` and `AgentStepper`: every request stays under the emergency
 * line, the outcome is one the sweep allows, compaction passes stay bounded. request-size.test.ts
 * runs it at a size for `test:fast`, request-size.slow.test.ts at the size CI holds it to.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createActor, toPromise } from 'xstate';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import { type AgentOutput } from '../../../src/agent/protocol/actor-types.js';
import { AgentStepper } from '../../../src/agent/hosts/stepper.js';
import { MAX_COMPACTION_PASSES } from '../../../src/agent/core/run-rules.js';
import { DurableSession } from '../../../src/sessions/durable-session.js';
import { MemorySessionStore } from '../../../src/stores/memory.js';
import { SWEEP_FAILURES, SWEEP_OUTCOMES, sweepAgent, sweepCase, type SweepCase, type SweepRecord } from '../../support/request-sweep.js';

export function checkRun(c: SweepCase, record: SweepRecord, output: AgentOutput): void {
  // The promise: nothing is sent at or over the emergency line (95 % of the window), let alone over the window.
  for (const tokens of record.requests) expect(tokens * 100).toBeLessThan(c.window * 95);
  expect(SWEEP_OUTCOMES).toContain(output.outcome.type);
  if (output.outcome.type === 'Failed') expect(SWEEP_FAILURES).toContain(output.outcome.error.type);
  // Passes in a row are bounded, so a run makes at most that many per model call (and one more series).
  expect(record.compactions).toBeLessThanOrEqual(MAX_COMPACTION_PASSES * (record.requests.length + 1));
}

async function viaActor(c: SweepCase): Promise<void> {
  const { config, record } = sweepAgent(c);
  const actor = createActor(createAgentMachine(config), { input: { prompt: 'Go.' } }).start();
  checkRun(c, record, await toPromise(actor));
}

async function viaSession(c: SweepCase): Promise<void> {
  const { config, record } = sweepAgent(c);
  const session = await DurableSession.open({ store: new MemorySessionStore(), sessionId: 'sweep', machine: createAgentMachine(config) });
  try {
    const done = new Promise<AgentOutput>((resolve) => session.actor.on('run.finished', (e) => resolve(e.output)));
    session.actor.send({ type: 'input', message: 'Go.' });
    checkRun(c, record, await done);
  } finally {
    await session.close();
  }
}

async function viaStepper(c: SweepCase): Promise<void> {
  const { config, record } = sweepAgent(c);
  const stepper = new AgentStepper(createAgentMachine(config), { input: { prompt: 'Go.' } });
  for (let steps = 0; steps < 200; steps++) {
    const { status, effects } = await stepper.step();
    if (status !== 'continues') break;
    stepper.apply(effects);
  }
  expect(stepper.status()).toBe('finished');
  const { output } = stepper.session as unknown as { output: AgentOutput };
  checkRun(c, record, output);
}

/** The three sweeps, `counts` random configurations each, as a describe block. */
export function describeRequestSweeps(counts: { actor: number; session: number; stepper: number }): void {
  describe('one measure of a request, over random configurations', () => {
    it(`holds over ${counts.actor} random configurations (actor)`, async () => {
      await fc.assert(fc.asyncProperty(sweepCase, viaActor), { numRuns: counts.actor });
    }, 120_000);

    it(`holds through DurableSession (${counts.session} configurations)`, async () => {
      await fc.assert(fc.asyncProperty(sweepCase, viaSession), { numRuns: counts.session });
    }, 120_000);

    it(`holds through AgentStepper (${counts.stepper} configurations)`, async () => {
      await fc.assert(fc.asyncProperty(sweepCase, viaStepper), { numRuns: counts.stepper });
    }, 120_000);
  });
}

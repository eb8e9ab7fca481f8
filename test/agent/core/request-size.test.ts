/**
 * One measure of a request (seed 000: the trigger sees the true size of the next request; seed
 * 001: a pass that cannot help ends `Failed(CompactionStalled)`), swept over random
 * configurations through the actor, `DurableSession` and `AgentStepper`.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createActor, toPromise } from 'xstate';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import { type AgentOutput } from '../../../src/agent/protocol/actor-types.js';
import { AgentStepper } from '../../../src/agent/hosts/stepper.js';
import { calibrated, requestTokens } from '../../../src/agent/core/request-size.js';
import { MAX_COMPACTION_PASSES } from '../../../src/agent/core/run-rules.js';
import { DurableSession } from '../../../src/sessions/durable-session.js';
import { MemorySessionStore } from '../../../src/stores/memory.js';
import { estimateTokens } from '../../../src/tokens.js';
import { z } from 'zod';
import type { Model } from '../../../src/model.js';
import { defineTool } from '../../../src/tools/define-tool.js';
import { SWEEP_FAILURES, SWEEP_OUTCOMES, sweepAgent, sweepCase, type SweepCase, type SweepRecord } from '../../support/request-sweep.js';

function checkRun(c: SweepCase, record: SweepRecord, output: AgentOutput): void {
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

describe('one measure of a request', () => {
  it('counts the system parts and the tools beside the conversation', () => {
    const messages = [{ role: 'user' as const, content: 'hello there' }];
    const system = [{ role: 'system' as const, content: 'Be brief. '.repeat(50) }];
    const tools = [{ name: 't', description: 'A tool.', inputSchema: { type: 'object' } }];
    expect(requestTokens({ system, messages, tools })).toBe(estimateTokens([...system, ...messages], tools));
    expect(requestTokens({ system: 40, messages, tools: [] })).toBe(40 + estimateTokens(messages));
  });

  it('a provider count calibrates upwards only', () => {
    expect(calibrated(100, 120)).toBe(120);
    expect(calibrated(100, 3)).toBe(100);
    expect(calibrated(100, undefined)).toBe(100);
    expect(calibrated(100, Number.NaN)).toBe(100);
  });

  it('instructions are counted after a reply without usage (3,000 characters, a 1,000-token window)', async () => {
    const c: SweepCase = { window: 1_000, threshold: 80, instructions: 3_000, promptParts: [], growth: 600, usage: 'absent', compactor: 'helps', claim: 'honest', toolTurns: 3, maxTurns: 6 };
    const { config, record } = sweepAgent(c);
    const output = await toPromise(createActor(createAgentMachine(config), { input: { prompt: 'Go.' } }).start());
    // Every tool turn compacts before the next call: the instructions stay in every measure.
    expect(record.requests.length).toBe(4);
    expect(record.compactions).toBeGreaterThan(0);
    checkRun(c, record, output);
    expect(output.outcome.type).toBe('Completed');
  });

  it('a compactor that cannot shrink the request under instructions and prompt parts ends in bounded passes', async () => {
    const c: SweepCase = { window: 2_000, threshold: 50, instructions: 2_000, promptParts: [1_500], growth: 800, usage: 'absent', compactor: 'cannot', claim: 'low', toolTurns: 5, maxTurns: 8 };
    const { config, record } = sweepAgent(c);
    const output = await toPromise(createActor(createAgentMachine(config), { input: { prompt: 'Go.' } }).start());
    checkRun(c, record, output);
    expect(record.compactions).toBeLessThanOrEqual(MAX_COMPACTION_PASSES * (record.requests.length + 1));
  });

  it("counts the tools a run's sources listed before its first request", async () => {
    const big = defineTool({ name: 'big', description: 'word '.repeat(1_200), input: z.object({}), execute: () => 'x' });
    const seen: number[] = [];
    const model: Model = {
      name: 'measuring',
      generate: async (request) => {
        seen.push(requestTokens({ system: [], messages: request.messages, tools: request.tools }));
        return { message: { role: 'assistant', content: 'ok' }, finishReason: 'stop' };
      },
    };
    const machine = createAgentMachine({ model, toolSources: [{ listTools: async () => [big] }], policy: { contextWindow: 1_000 } });
    const output = await toPromise(createActor(machine, { input: { prompt: 'Go.' } }).start());
    // The listed definition alone is over the emergency line: nothing may be sent.
    expect(seen).toEqual([]);
    expect(output.outcome).toMatchObject({ type: 'Failed', error: { type: 'CompactionStalled' } });
  });

  it('holds over 1,000 random configurations (actor)', async () => {
    await fc.assert(fc.asyncProperty(sweepCase, viaActor), { numRuns: 1_000 });
  }, 120_000);

  it('holds through DurableSession', async () => {
    await fc.assert(fc.asyncProperty(sweepCase, viaSession), { numRuns: 150 });
  }, 120_000);

  it('holds through AgentStepper', async () => {
    await fc.assert(fc.asyncProperty(sweepCase, viaStepper), { numRuns: 150 });
  }, 120_000);
});

/**
 * One measure of a request (seed 000: the trigger sees the true size of the next request; seed
 * 001: a pass that cannot help ends `Failed(CompactionStalled)`), swept over random
 * configurations through the actor, `DurableSession` and `AgentStepper` (request-size-sweeps.ts):
 * here 150, 30 and 30 of them for `test:fast`; request-size.slow.test.ts runs 1,000, 150 and 150.
 */
import { describe, expect, it } from 'vitest';
import { createActor, toPromise } from 'xstate';
import { z } from 'zod';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import { calibrated, requestTokens } from '../../../src/agent/core/request-size.js';
import { MAX_COMPACTION_PASSES } from '../../../src/agent/core/run-rules.js';
import type { Model } from '../../../src/model.js';
import { estimateTokens } from '../../../src/tokens.js';
import { defineTool } from '../../../src/tools/define-tool.js';
import { sweepAgent, type SweepCase } from '../../support/request-sweep.js';
import { checkRun, describeRequestSweeps } from './request-size-sweeps.js';

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

});

describeRequestSweeps({ actor: 150, session: 30, stepper: 30 });

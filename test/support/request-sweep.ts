/**
 * A sweep over agent configurations for the request-size promise (seed 000: "the compaction
 * trigger always sees the true size of the next request"): random windows, thresholds,
 * instructions, prompt parts, tool-result growth, usage reports and compactors. Each case
 * records every request the model receives, measured by `requestTokens`, and the compaction
 * passes the run makes. The same cases run through the actor, `DurableSession` and `AgentStepper`.
 */
import fc from 'fast-check';
import { z } from 'zod';
import type { AgentConfig } from '../../src/agent/core/config.js';
import type { Compactor } from '../../src/compaction/contract.js';
import type { Operation } from '../../src/agent/operations/operation.js';
import { requestTokens } from '../../src/agent/core/request-size.js';
import type { Model, ModelReply } from '../../src/model.js';
import type { Message } from '../../src/schemas.js';
import { estimateTokens } from '../../src/tokens.js';
import { defineTool } from '../../src/tools/define-tool.js';

export type UsageMode = 'absent' | 'exact' | 'low' | 'high';
export type CompactorKind = 'helps' | 'half' | 'cannot' | 'none';

export interface SweepCase {
  window: number;
  threshold: number;
  instructions: number;
  promptParts: number[];
  growth: number;
  usage: UsageMode;
  compactor: CompactorKind;
  /** The compactor's own count: honest, or far too low. */
  claim: 'honest' | 'low';
  toolTurns: number;
  maxTurns: number;
}

export const sweepCase: fc.Arbitrary<SweepCase> = fc.record({
  window: fc.integer({ min: 200, max: 4_000 }),
  threshold: fc.integer({ min: 40, max: 90 }),
  instructions: fc.integer({ min: 0, max: 3_000 }),
  promptParts: fc.array(fc.integer({ min: 0, max: 1_500 }), { maxLength: 2 }),
  growth: fc.integer({ min: 0, max: 1_500 }),
  usage: fc.constantFrom<UsageMode>('absent', 'exact', 'low', 'high'),
  compactor: fc.constantFrom<CompactorKind>('helps', 'half', 'cannot', 'none'),
  claim: fc.constantFrom<'honest' | 'low'>('honest', 'low'),
  toolTurns: fc.integer({ min: 0, max: 5 }),
  maxTurns: fc.integer({ min: 1, max: 8 }),
});

/** Words, so the tokenizer counts about one token per four characters of them. */
const text = (chars: number, seed: string) => `${seed} `.repeat(Math.ceil(chars / (seed.length + 1))).slice(0, chars);

export interface SweepRecord {
  /** The measure of each request the model received. */
  requests: number[];
  compactions: number;
}

/** The agent config of one case, and what its model and compactor saw. */
export function sweepAgent(c: SweepCase): { config: AgentConfig; record: SweepRecord } {
  const record: SweepRecord = { requests: [], compactions: 0 };
  let turn = 0;
  const model: Model = {
    name: 'sweep',
    async generate(request) {
      const measured = requestTokens({ system: [], messages: request.messages, tools: request.tools });
      record.requests.push(measured);
      turn++;
      const message: ModelReply['message'] =
        turn <= c.toolTurns
          ? { role: 'assistant', content: '', toolCalls: [{ id: `c${turn}`, name: 'grow', args: { n: turn } }] }
          : { role: 'assistant', content: 'done' };
      const usage =
        c.usage === 'absent'
          ? undefined
          : c.usage === 'low'
            ? { inputTokens: 1, outputTokens: 0 }
            : { inputTokens: c.usage === 'high' ? Math.ceil(measured * 1.3) : measured, outputTokens: estimateTokens([message]) };
      return { message, finishReason: message.toolCalls ? 'tool-calls' : 'stop', ...(usage && { usage }) };
    },
  };
  const grow = defineTool({ name: 'grow', description: 'Returns text.', input: z.object({ n: z.number() }), execute: () => text(c.growth, 'result') });
  const operations: Operation[] = c.promptParts.map((chars, index) => ({ name: `part${index}`, prompt: (ctx) => text(chars + ctx.turn * 10, `part${index}`) }));
  const compactor: Compactor | undefined =
    c.compactor === 'none'
      ? undefined
      : async (request) => {
          record.compactions++;
          const messages = compacted(c.compactor, request.messages);
          return { messages, tokensAfter: c.claim === 'low' ? 0 : estimateTokens(messages) };
        };
  const config: AgentConfig = {
    model,
    tools: [grow],
    ...(c.instructions > 0 && { instructions: text(c.instructions, 'rule') }),
    operations,
    ...(compactor && { compactor }),
    retry: false,
    policy: { contextWindow: c.window, compactThreshold: c.threshold, maxTurns: c.maxTurns },
  };
  return { config, record };
}

/** helps: the task and the last coherent message; half: drops the oldest exchange; cannot: as it was. */
function compacted(kind: CompactorKind, messages: readonly Message[]): Message[] {
  if (kind === 'cannot') return [...messages];
  const task = messages[0]!;
  const rest = messages.slice(1);
  if (kind === 'helps') return [task, { role: 'assistant', content: 'summary' }];
  const next = rest.findIndex((message, i) => i > 0 && message.role === 'assistant');
  return next < 0 ? [...messages] : [task, ...rest.slice(next)];
}

/** The outcomes a run may end in, and the failure types a sweep run may fail with. */
export const SWEEP_OUTCOMES = ['Completed', 'MaxTurnsExceeded', 'Failed'];
export const SWEEP_FAILURES = ['CompactionStalled'];

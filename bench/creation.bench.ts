/**
 * What a short run costs, the figure most users meet (issue 39, point 7): building an agent
 * (`createAgentMachine` with three tools), `runAgent` of a one-turn answer and of a 10-turn run
 * (nine tool calls, then the answer), each beside the AI SDK's `generateText` (ai 6) doing the
 * same over a model that answers at once, measured in the same run. Medians of many runs, and
 * ratios: the machines are shared and noisy.
 */
import { generateText, stepCountIs, tool } from 'ai-v6';
import { z } from 'zod';
import { createAgentMachine, defineTool, runAgent, type Model, type ModelReply } from '../src/index.js';
import { median, printTable } from './support.js';

const RUNS = Number(process.env.BENCH_RUNS ?? 300);
/**
 * Runs of each side between the first measurement and the second. V8 keeps optimizing a long
 * code path over thousands of calls (and sizes its young generation to the allocation rate), so
 * the first few hundred runs of a process cost more than the later ones, and more for the side
 * with more code: both are printed, what a one-off script meets and what a server meets.
 */
const SETTLE_RUNS = Number(process.env.BENCH_SETTLE_RUNS ?? 3_000);

const tools = ['add', 'echo', 'look'].map((name) =>
  defineTool({ name, description: `The ${name} tool.`, input: z.object({ text: z.string() }), execute: ({ text }) => text }),
);

/** A loopchart model: `turns - 1` replies asking for one tool call, then the answer. */
function instantModel(turns: number): Model {
  let turn = 0;
  return {
    name: 'instant',
    generate: async (): Promise<ModelReply> => {
      turn += 1;
      if (turn < turns) return { message: { role: 'assistant', content: '', toolCalls: [{ id: `c${turn}`, name: 'echo', args: { text: `x${turn}` } }] }, finishReason: 'tool-calls' };
      return { message: { role: 'assistant', content: 'done' }, finishReason: 'stop', usage: { inputTokens: 1, outputTokens: 1 } };
    },
  };
}

/** The same model for the AI SDK (LanguageModelV3). */
function instantAiSdkModel(turns: number) {
  let turn = 0;
  const usage = { inputTokens: { total: 1, noCache: 1, cacheRead: undefined, cacheWrite: undefined }, outputTokens: { total: 1, text: 1, reasoning: undefined } };
  return {
    specificationVersion: 'v3' as const,
    provider: 'bench',
    modelId: 'instant',
    supportedUrls: {},
    doGenerate: async () => {
      turn += 1;
      const content =
        turn < turns
          ? [{ type: 'tool-call' as const, toolCallId: `c${turn}`, toolName: 'echo', input: JSON.stringify({ text: `x${turn}` }) }]
          : [{ type: 'text' as const, text: 'done' }];
      const finish = turn < turns ? 'tool-calls' : 'stop';
      return { content, finishReason: { unified: finish, raw: finish }, usage, warnings: [] };
    },
    doStream: async () => {
      throw new Error('the bench model does not stream');
    },
  };
}

const aiTools = Object.fromEntries(['add', 'echo', 'look'].map((name) => [name, tool({ description: `The ${name} tool.`, inputSchema: z.object({ text: z.string() }), execute: async ({ text }) => text })]));

async function timeAsync(fn: () => Promise<unknown>): Promise<number> {
  for (let i = 0; i < 20; i++) await fn();
  const samples: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const started = performance.now();
    await fn();
    samples.push((performance.now() - started) * 1000);
  }
  return median(samples);
}

/**
 * Two functions timed in alternation, one call of each per round, so the collections one's
 * garbage triggers and a burst of load on the shared machine fall on both alike.
 */
async function timeInterleaved(ours: () => Promise<unknown>, theirs: () => Promise<unknown>, warmup: number): Promise<[number, number]> {
  for (let i = 0; i < warmup; i++) await ours(), await theirs();
  const samples: [number[], number[]] = [[], []];
  for (let i = 0; i < RUNS; i++) {
    for (const [side, fn] of [ours, theirs].entries()) {
      const started = performance.now();
      await fn();
      samples[side]!.push((performance.now() - started) * 1000);
    }
  }
  return [median(samples[0]), median(samples[1])];
}

export async function run(): Promise<void> {
  const create = await timeAsync(async () => createAgentMachine({ model: instantModel(1), tools }));
  const rows: (string | number)[][] = [['createAgentMachine, 3 tools', create, '', '']];
  for (const turns of [1, 10]) {
    const ours = async () => {
      const result = await runAgent({ model: instantModel(turns), tools, prompt: 'go', policy: { maxTurns: 50 } });
      if (result.outcome.type !== 'Completed') throw new Error(`runAgent ended ${result.outcome.type}`);
    };
    const theirs = async () => {
      const result = await generateText({ model: instantAiSdkModel(turns) as never, tools: aiTools, prompt: 'go', stopWhen: stepCountIs(turns) });
      if (result.text !== 'done') throw new Error(`generateText answered ${result.text}`);
    };
    const early = await timeInterleaved(ours, theirs, 20);
    const settled = await timeInterleaved(ours, theirs, SETTLE_RUNS);
    for (const [when, [mine, theirsMedian]] of [['after 20', early], [`after ${(20 + RUNS + SETTLE_RUNS).toLocaleString('en-US')}`, settled]] as const) {
      rows.push([`${turns}-turn run, ${when} runs`, mine, theirsMedian, `${(mine / theirsMedian).toFixed(2)}×`]);
    }
  }
  printTable(
    `creation: µs per agent or run, median of ${RUNS} (runAgent builds its agent each time; the two sides interleaved, measured after 20 runs and again after ${SETTLE_RUNS.toLocaleString('en-US')} more)`,
    ['what', 'loopchart µs', 'AI SDK generateText µs', 'ratio'],
    rows,
  );
}

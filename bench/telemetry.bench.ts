/**
 * Tracing overhead per turn (issue 12): the agent actor with an instant model (one tool call per
 * turn, text on the last) and an instant tool, for runs of 100 and 1,000 turns, with telemetry
 * off, on with a no-op tracer (`@opentelemetry/api` with no SDK registered: what a library user
 * pays when the host has not set up tracing), and on with the real SDK exporting every span to
 * an InMemorySpanExporter through a SimpleSpanProcessor. Each turn makes two spans (chat,
 * execute_tool). Samples are interleaved so load on the shared machine hits every column alike;
 * the ratios are against "off" in the same run.
 */
import { pathToFileURL } from 'node:url';
import { trace } from '@opentelemetry/api';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { createActor, toPromise } from 'xstate';
import { z } from 'zod';
import { createAgentMachine } from '../machines/agent.machine.js';
import type { TelemetryOptions } from '../src/telemetry/options.js';
import type { Model, ModelReply } from '../src/model.js';
import { defineTool } from '../src/tools/define-tool.js';
import { median, printTable } from './support.js';

const RUNS = Number(process.env.BENCH_RUNS ?? 5);
const TURN_COUNTS = process.env.BENCH_TURNS ? process.env.BENCH_TURNS.split(',').map(Number) : [100, 1_000];
/** Short runs are repeated so every sample times about this many turns. */
const TURNS_PER_SAMPLE = 1_000;

const echo = defineTool({ name: 'echo', description: 'Returns ok.', input: z.object({ n: z.number().int() }), execute: () => 'ok' });
const USAGE = { inputTokens: 100, outputTokens: 10 };

function instantModel(): Model & { reset(turns: number): void } {
  let turn = 0;
  let turns = 0;
  return {
    name: 'bench:instant',
    reset(n) {
      turn = 0;
      turns = n;
    },
    generate: async (): Promise<ModelReply> =>
      ++turn < turns
        ? {
            message: { role: 'assistant', content: '', toolCalls: [{ id: `c${turn}`, name: 'echo', args: { n: turn } }] },
            finishReason: 'tool-calls',
            usage: USAGE,
          }
        : { message: { role: 'assistant', content: 'done' }, finishReason: 'stop', usage: USAGE },
  };
}

export async function run(): Promise<void> {
  const exporter = new InMemorySpanExporter();
  const sdk = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  const variants: Array<[string, TelemetryOptions | undefined]> = [
    ['telemetry off', undefined],
    ['no-op tracer (API, no SDK)', { tracer: trace.getTracer('bench') }],
    ['SDK + in-memory exporter', { tracer: sdk.getTracer('bench') }],
  ];
  const model = instantModel();
  const agents = variants.map(([name, telemetry]) => ({
    name,
    machine: createAgentMachine({ model, tools: [echo], policy: { maxTurns: 1_000_000 }, ...(telemetry && { telemetry }) }),
  }));

  const rows: (string | number)[][] = [];
  for (const turns of TURN_COUNTS) {
    const times = new Map(agents.map((agent) => [agent.name, [] as number[]]));
    let spans = 0;
    for (let i = 0; i < RUNS + 1; i++) {
      for (const agent of agents) {
        const repeats = Math.max(1, Math.round(TURNS_PER_SAMPLE / turns));
        exporter.reset();
        const start = process.hrtime.bigint();
        for (let r = 0; r < repeats; r++) {
          model.reset(turns);
          const output = await toPromise(createActor(agent.machine, { input: { prompt: 'go' } }).start());
          if (output.messages.length !== 2 * turns) throw new Error(`${agent.name}: ${output.messages.length} messages`);
        }
        const us = Number(process.hrtime.bigint() - start) / 1000 / (repeats * turns);
        if (agent.name.startsWith('SDK')) spans = exporter.getFinishedSpans().length / repeats;
        if (i > 0) times.get(agent.name)!.push(us); // the first round warms up
      }
    }
    const off = median(times.get('telemetry off')!);
    for (const agent of agents) {
      const us = median(times.get(agent.name)!);
      rows.push([turns, agent.name, us, us - off, `${(us / off).toFixed(2)}x`]);
    }
    if (spans !== 2 * turns) throw new Error(`expected ${2 * turns} chat + execute_tool spans per run (plus the run span), got ${spans}`);
  }
  printTable(
    `telemetry: µs per turn (one model call + one tool call), median of ${RUNS} samples`,
    ['turns / run', 'variant', 'µs / turn', 'added µs', 'vs off'],
    rows,
  );
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await run();

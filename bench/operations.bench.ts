/**
 * What the operation machinery costs per turn (issue 15): the agent actor with 0, 1 and 10
 * no-op operations, each with a hook at all three points (beforeModelCall, afterReply,
 * beforeTools), sync (returns at once) and async (returns a resolved promise), for runs of 100
 * and 1,000 turns with an instant model and an instant tool. Prints µs per turn (median of
 * BENCH_RUNS samples) and the ratio to the same run without operations.
 */
import { createActor, toPromise } from 'xstate';
import { z } from 'zod';
import { createAgentMachine } from '../machines/agent.machine.js';
import type { Operation } from '../src/agent/operations/operation.js';
import type { Model, ModelReply } from '../src/model.js';
import { defineTool } from '../src/tools/define-tool.js';
import { median, printTable } from './support.js';

const RUNS = Number(process.env.BENCH_RUNS ?? 5);
const TURN_COUNTS = process.env.BENCH_TURNS ? process.env.BENCH_TURNS.split(',').map(Number) : [100, 1_000];
const TURNS_PER_SAMPLE = 1_000;

const echo = defineTool({ name: 'echo', description: 'Returns ok.', input: z.object({ n: z.number().int() }), execute: () => 'ok' });

function instantModel(turns: number): Model {
  let turn = 0;
  return {
    name: 'instant',
    generate: async (): Promise<ModelReply> =>
      ++turn < turns
        ? { message: { role: 'assistant', content: '', toolCalls: [{ id: `c${turn}`, name: 'echo', args: { n: turn } }] }, finishReason: 'tool-calls' }
        : { message: { role: 'assistant', content: 'done' }, finishReason: 'stop' },
  };
}

function noOps(count: number, kind: 'sync' | 'async'): Operation[] {
  const hook = kind === 'sync' ? () => undefined : async () => undefined;
  return Array.from({ length: count }, (_, i) => ({ name: `noop-${i}`, beforeModelCall: hook, afterReply: hook, beforeTools: hook }));
}

/** µs per turn of one sample of about TURNS_PER_SAMPLE turns (short runs repeated). */
async function sample(turns: number, operations: Operation[]): Promise<number> {
  const repeats = Math.max(1, Math.round(TURNS_PER_SAMPLE / turns));
  let elapsed = 0;
  for (let r = 0; r < repeats; r++) {
    const agent = createAgentMachine({ model: instantModel(turns), tools: [echo], operations, policy: { maxTurns: 1_000_000 } });
    const started = performance.now();
    const output = await toPromise(createActor(agent, { input: { prompt: 'go' } }).start());
    elapsed += performance.now() - started;
    if (output.messages.length !== 2 * turns) throw new Error(`${output.messages.length} messages after ${turns} turns`);
  }
  return (elapsed * 1000) / (repeats * turns);
}

export async function run(): Promise<void> {
  const configs: [string, Operation[]][] = [
    ['0 operations', []],
    ['1 sync', noOps(1, 'sync')],
    ['1 async', noOps(1, 'async')],
    ['10 sync', noOps(10, 'sync')],
    ['10 async', noOps(10, 'async')],
  ];
  const rows: (string | number)[][] = [];
  for (const turns of TURN_COUNTS) {
    const times = configs.map(() => [] as number[]);
    // Interleaved, so a burst of load on the shared machine hits every column alike; round 0 warms up.
    for (let i = 0; i < RUNS + 1; i++) {
      for (const [c, [, operations]] of configs.entries()) {
        const us = await sample(turns, operations);
        if (i > 0) times[c]!.push(us);
      }
    }
    const base = median(times[0]!);
    for (const [c, [name, operations]] of configs.entries()) {
      const us = median(times[c]!);
      rows.push([turns, name, us, `${(us / base).toFixed(2)}x`, operations.length ? (us - base) / (operations.length * 3) : '-']);
    }
  }
  printTable(
    `operations: µs per turn, median of ${RUNS} interleaved samples of ~${TURNS_PER_SAMPLE} turns (no-op hooks at all three points)`,
    ['turns per run', 'operations', 'µs/turn', 'vs none', 'µs per hook call'],
    rows,
  );
}

if (import.meta.url === `file://${process.argv[1]}`) await run();

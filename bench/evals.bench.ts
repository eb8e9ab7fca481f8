/**
 * `npm run bench evals` (issue 42's measure).
 *
 * 1. An evaluation's speed: 100 recorded sessions of 20 turns each (19 tool calls, then the
 *    answer) as a dataset, run with the model answered from the recording and the tool
 *    quarantined (`runEval({ model: 'recorded' })`: nothing is called), default scorers, at
 *    concurrency 1 and 4; cases per second and µs per turn, against recording the same 100
 *    sessions live (the agent in a DurableSession, its tool run) in the same process; peak heap
 *    growth over the heap after a GC before each, read every 2 ms and at each case's start and end.
 * 2. The cost of recording "why" per step. The driver keeps no separate switch for it: the rule of
 *    each decision is read back from the trace entries the driver stores anyway (`decisionsOf`:
 *    a model call with the tools offered, the tools a reply asked for, a compaction, a guardrail's
 *    verdict, an approval, a repetition, a handoff, a fallback, a run's end). So the cost is those
 *    entries: a 20-turn durable session on the memory store, SQLite NORMAL and SQLite FULL (the
 *    default) with its trace off (a store without `appendTrace`), with the trace but those entries
 *    dropped, and as shipped; µs and trace bytes per stored step, and the time `decisionsOf` takes
 *    to read the rules back.
 *
 * Heap numbers need a callable GC (`npm run bench` passes --expose-gc).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { z } from 'zod';
import { createAgentMachine } from '../machines/agent.machine.js';
import type { AgentConfig } from '../src/agent/core/config.js';
import { decisionsOf } from '../src/evals/decisions.js';
import { recordCases } from '../src/evals/record.js';
import { runEval } from '../src/evals/run-eval.js';
import type { ModelReply } from '../src/model.js';
import { DurableSession } from '../src/sessions/durable-session.js';
import { readSessionTrace, type TraceEntry } from '../src/sessions/trace.js';
import { MemorySessionStore } from '../src/stores/memory.js';
import type { SessionStore } from '../src/stores/session-store.js';
import { SqliteSessionStore } from '../src/stores/sqlite.js';
import { defineTool } from '../src/tools/define-tool.js';
import { median, printTable } from './support.js';

const CASES = Number(process.env.BENCH_CASES ?? 100);
const TURNS = 20;
const RUNS = Number(process.env.BENCH_RUNS ?? 3);
/** The why-cost's samples: short, many and interleaved (the machine is shared). */
const WHY_SAMPLES = Number(process.env.BENCH_WHY_SAMPLES ?? 9);
const SESSIONS_PER_SAMPLE = 10;

const lookup = defineTool({
  name: 'lookup',
  description: 'Looks an order up.',
  input: z.object({ order: z.string(), turn: z.number().int() }),
  execute: ({ order, turn }) => ({ order, turn, status: 'delivered', total: 40 }),
});

/** Stateless (the turn is the count of assistant messages), so every session shares it: a tool call per turn, the answer on the last. */
const model = {
  name: 'recorded-bench',
  generate: async (request: { messages: readonly { role: string }[] }): Promise<ModelReply> => {
    const turn = request.messages.filter((message) => message.role === 'assistant').length + 1;
    const usage = { inputTokens: 100 + turn * 20, outputTokens: 12 };
    if (turn < TURNS) return { message: { role: 'assistant', content: '', toolCalls: [{ id: `c${turn}`, name: 'lookup', args: { order: 'A1', turn } }] }, finishReason: 'tool-calls', usage };
    return { message: { role: 'assistant', content: 'Order A1 was delivered; the total was 40.' }, finishReason: 'stop', usage };
  },
};

const config: AgentConfig = { model, instructions: 'You help with orders.', tools: [lookup], policy: { maxTurns: TURNS + 5 } };
const machine = createAgentMachine(config);

async function runSession(store: SessionStore, sessionId: string): Promise<void> {
  const session = await DurableSession.open({ machine, store, sessionId });
  session.send({ type: 'input', message: 'Where is order A1?' });
  await session.whenIdle();
  await session.close();
}

function collector(): () => void {
  const exposed = (globalThis as { gc?: () => void }).gc;
  if (exposed) return exposed;
  setFlagsFromString('--expose-gc');
  return runInNewContext('gc') as () => void;
}
const gc = collector();

async function heapAfterGc(): Promise<number> {
  await new Promise((resolve) => setTimeout(resolve, 10));
  gc();
  gc();
  return process.memoryUsage().heapUsed;
}

/** Runs `work` with the heap read every 2 ms and whenever `sample` is called: ms taken and peak growth in MB. */
async function measured(work: (sample: () => void) => Promise<void>): Promise<{ ms: number; peakMb: number }> {
  const base = await heapAfterGc();
  let peak = base;
  const sample = () => void (peak = Math.max(peak, process.memoryUsage().heapUsed));
  const timer = setInterval(sample, 2);
  const started = performance.now();
  try {
    await work(sample);
  } finally {
    clearInterval(timer);
  }
  const ms = performance.now() - started;
  sample();
  return { ms, peakMb: (peak - base) / 1e6 };
}

async function evalSpeed(): Promise<void> {
  const recordings = new MemorySessionStore();
  const samples = new Map<string, { ms: number; peakMb: number }[]>();
  const add = (name: string, value: { ms: number; peakMb: number }) => samples.set(name, [...(samples.get(name) ?? []), value]);
  for (let run = 0; run < RUNS + 1; run++) {
    // The first round warms up (JIT, the chart's setup) and is not counted.
    const live = await measured(async (sample) => {
      const store = new MemorySessionStore();
      for (let i = 0; i < CASES; i++) {
        await runSession(run === 0 ? recordings : store, `rec-${i}`);
        sample();
      }
    });
    const { cases, problems } = await recordCases(recordings, { prefix: 'rec-' });
    if (problems.length || cases.length !== CASES) throw new Error(`recording failed: ${problems.map((p) => p.message).join('; ')}`);
    const dataset = { cases, problems: [] };
    const results: Record<string, { ms: number; peakMb: number }> = { 'record live (tool runs), durable session on memory': live };
    for (const concurrency of [1, 4]) {
      results[`eval dry run, concurrency ${concurrency}`] = await measured(async (sample) => {
        const report = await runEval({ dataset, agent: () => (sample(), config), model: 'recorded', concurrency, onProgress: sample });
        if (report.failedCases || report.cases.some((c) => c.run?.difference !== null || c.run.turns !== TURNS)) throw new Error('a case did not replay as recorded');
      });
    }
    if (run > 0) for (const [name, value] of Object.entries(results)) add(name, value);
  }
  const baseline = median(samples.get('record live (tool runs), durable session on memory')!.map((s) => s.ms));
  printTable(
    `evals: ${CASES} recorded sessions of ${TURNS} turns (model recorded, tool quarantined, default scorers), median of ${RUNS}`,
    ['what', 'cases/s', 'µs per turn', 'time vs recording live', 'peak heap growth MB'],
    [...samples].map(([name, values]) => {
      const ms = median(values.map((v) => v.ms));
      return [name, (CASES * 1000) / ms, (ms * 1000) / (CASES * TURNS), `${(ms / baseline).toFixed(2)}x`, median(values.map((v) => v.peakMb))];
    }),
  );
}

/** The entry types `decisionsOf` reads a decision and its rule from. */
const DECIDING = new Set<TraceEntry['type']>(['model', 'compaction', 'guardrail', 'approval.requested', 'approval', 'repetition', 'handoff', 'fallback', 'finished']);

/** The store without a trace (the driver then records none), or with the deciding entries dropped. */
function variant(store: SessionStore, mode: 'off' | 'without deciding entries' | 'as shipped'): SessionStore {
  if (mode === 'as shipped') return store;
  const wrapper: SessionStore = {
    load: (id) => store.load(id),
    apply: (id, write) => store.apply(id, write),
    list: () => store.list(),
    journalToolResult: (id, key, result) => store.journalToolResult(id, key, result),
    journaledToolResults: (id, key) => store.journaledToolResults(id, key),
    close: async () => {},
  };
  if (mode === 'off') return wrapper;
  return {
    ...wrapper,
    appendTrace: (id, entries) => store.appendTrace!(id, entries.filter((entry) => !DECIDING.has((entry as TraceEntry).type))),
    readTrace: (id, after) => store.readTrace!(id, after),
  };
}

const modes = ['off', 'without deciding entries', 'as shipped'] as const;
type Mode = (typeof modes)[number];

/** µs per stored step of a session on `store` in each mode: medians of interleaved samples. */
async function stepTimes(store: SessionStore, steps: number, prefix: string): Promise<Record<Mode, number>> {
  const times = new Map<Mode, number[]>(modes.map((mode) => [mode, []]));
  let n = 0;
  for (let run = 0; run < WHY_SAMPLES + 2; run++) {
    // Interleaved in a turning order, so the machine's load falls on every mode alike; two rounds warm up.
    for (const mode of [...modes.slice(run % 3), ...modes.slice(0, run % 3)]) {
      const started = performance.now();
      for (let i = 0; i < SESSIONS_PER_SAMPLE; i++) await runSession(variant(store, mode), `${prefix}-${n++}`);
      if (run >= 2) times.get(mode)!.push((performance.now() - started) / SESSIONS_PER_SAMPLE);
    }
  }
  return Object.fromEntries(modes.map((mode) => [mode, (median(times.get(mode)!) * 1000) / steps])) as Record<Mode, number>;
}

async function whyCost(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'loopchart-evals-bench-'));
  const stores: [string, SessionStore][] = [
    ['memory', new MemorySessionStore()],
    ['SQLite NORMAL', new SqliteSessionStore({ path: join(dir, 'normal.db'), synchronous: 'NORMAL' })],
    ['SQLite FULL (default)', new SqliteSessionStore({ path: join(dir, 'full.db') })],
  ];
  try {
    // One session as shipped, read back: what its trace holds per stored step.
    const [, memory] = stores[0]!;
    await runSession(memory, 'why-read');
    const records = await readSessionTrace(memory, 'why-read');
    const entries = records.flatMap((record) => ('entry' in record ? [record.entry] : []));
    const steps = entries.filter((entry) => entry.type === 'step').length;
    const bytes = (list: readonly unknown[]) => list.reduce<number>((sum, entry) => sum + Buffer.byteLength(JSON.stringify(entry)), 0);
    const deciding = entries.filter((entry) => DECIDING.has(entry.type));
    const model = deciding.filter((entry) => entry.type === 'model');
    const decisions = decisionsOf(entries);
    const readUs = median(
      Array.from({ length: 50 }, () => {
        const started = performance.now();
        for (let i = 0; i < 20; i++) decisionsOf(entries);
        return ((performance.now() - started) * 1000) / 20;
      }),
    );
    const rows: (string | number)[][] = [];
    for (const [name, store] of stores) {
      const t = await stepTimes(store, steps, name.replace(/\W+/g, '-'));
      rows.push([name, t.off, t['without deciding entries'], t['as shipped'], (t['as shipped'] - t['without deciding entries']).toFixed(1), `${(t['as shipped'] / t.off).toFixed(2)}x`]);
    }
    printTable(
      `evals: the cost of recording "why" per stored step, a ${TURNS}-turn durable session (${steps} stored steps, ${decisions.length} decisions), median of ${WHY_SAMPLES} interleaved samples of ${SESSIONS_PER_SAMPLE} sessions`,
      ['store', 'µs/step trace off', 'µs/step, deciding entries dropped', 'µs/step as shipped', 'µs/step writing the deciding entries', 'as shipped vs off'],
      rows,
    );
    printTable(`evals: trace bytes per stored step (JSON), and reading the rules back`, ['part', 'bytes per step', 'µs per step'], [
      ['the whole trace as shipped', Math.round(bytes(entries) / steps), '-'],
      ["deciding entries (model calls, the run's end)", Math.round(bytes(deciding) / steps), '-'],
      ['...of which prompt deltas and replies (kept for replay, not "why")', Math.round((bytes(model) - bytes(model.map((entry) => ({ ...entry, promptDelta: [], reply: undefined })))) / steps), '-'],
      ['the decisions with their rules, read back (decisionsOf)', Math.round(bytes(decisions) / steps), (readUs / steps).toFixed(2)],
    ]);
  } finally {
    for (const [, store] of stores) await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

export async function run(): Promise<void> {
  await evalSpeed();
  await whyCost();
}

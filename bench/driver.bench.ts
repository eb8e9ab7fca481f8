/**
 * The driver's cost, beside what a person would write by hand.
 *
 * 1. µs per turn with an instant model (a ready reply with one tool call per turn, text on the last
 *    turn) and an instant tool, for runs of 10, 100, 1,000 and 5,000 turns: a hand-written async
 *    loop making the same calls (call the model, validate and run the tool, push the messages,
 *    repeat), the floor (a minimal XState actor doing the same), the agent actor, and the agent in
 *    a `DurableSession` over the memory store and over SQLite (`synchronous = NORMAL`), each store
 *    opened once, as an application does, with a new session per run.
 * 2. Peak heap growth during one 5,000-turn run, floor and agent.
 * 3. Heap per idle session actor with 1,000 sessions alive, each after one short completed run,
 *    against 1,000 plain objects holding copies of the same messages.
 * 4. Work per turn, counted (no clock, so no noise): the microsteps and the events the actor
 *    itself took, per turn of a 100-turn run, floor and agent (a minimal agent, and one with a
 *    budget and an operation hook, whose chart keeps those features' branches), and the V8 hidden
 *    classes the process made per turn (`node --log-maps` in a child, `driver-maps.ts`). Alone:
 *    `BENCH_ONLY=counted`.
 * 5. Only with `BENCH_ONLY=promoted`: what the peak of (2) is made of. V8's sampling heap profiler
 *    keeps the samples of objects that survived the young generation and died in a full
 *    collection (objects promoted, then garbage), by where they were allocated.
 *
 * Heap numbers need a callable GC: run with `node --expose-gc` (`tsx --expose-gc bench/run.ts
 * driver`, or `NODE_OPTIONS=--expose-gc npm run bench`). Without the flag the bench turns it on
 * through `v8.setFlagsFromString`, which works on current Node versions but is not an official API.
 */
import { Session } from 'node:inspector/promises';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createActor, setup, toPromise, type AnyActorLogic, type InspectionEvent } from 'xstate';
import { z } from 'zod';
import { createAgentMachine, type AgentActor } from '../machines/agent.machine.js';
import { outputOf } from '../src/agent/protocol/actor-types.js';
import type { Model, ModelReply, ModelRequest } from '../src/model.js';
import { DurableSession } from '../src/sessions/durable-session.js';
import { MemorySessionStore } from '../src/stores/memory.js';
import type { SessionStore } from '../src/stores/session-store.js';
import { SqliteSessionStore } from '../src/stores/sqlite.js';
import type { Message, ToolMessage } from '../src/schemas.js';
import { defineTool, type Tool } from '../src/tools/define-tool.js';
import { median, printTable } from './support.js';

const RUNS = Number(process.env.BENCH_RUNS ?? 7);
/** `BENCH_TURNS=1000` measures one run length only (a quick look while working on the driver). */
const TURN_COUNTS = process.env.BENCH_TURNS ? process.env.BENCH_TURNS.split(',').map(Number) : [10, 100, 1_000, 5_000];
/** Turns measured per sample: short runs are repeated so every sample times about this many turns. */
const TURNS_PER_SAMPLE = 1_000;
const SESSIONS = 1_000;
/**
 * Turns every runner takes before the per-turn table, in runs of 100: V8 optimizes a long code
 * path over thousands of calls, and without this the first row measured paid for the agent's
 * (one run: agent/floor 10.5× for 1,000 turns measured first, 5.3× for 10 turns measured after
 * it). `BENCH_WARMUP_TURNS=0` measures the cold rows.
 */
const WARMUP_TURNS = Number(process.env.BENCH_WARMUP_TURNS ?? 20_000);

// ---------------------------------------------------------------------------------------------
// The instant model and tool.

const echo = defineTool({
  name: 'echo',
  description: 'Returns ok.',
  input: z.object({ n: z.number().int() }),
  execute: () => 'ok',
});

const USAGE = { inputTokens: 100, outputTokens: 10 };

function toolReply(turn: number): ModelReply {
  return {
    message: { role: 'assistant', content: '', toolCalls: [{ id: `c${turn}`, name: 'echo', args: { n: turn } }] },
    finishReason: 'tool-calls',
    usage: USAGE,
  };
}
const textReply = (): ModelReply => ({ message: { role: 'assistant', content: 'done' }, finishReason: 'stop', usage: USAGE });

/** Answers with a tool call until turn `turns`, then with text. `reset` starts a new run; `onTurn` watches each call. */
export function instantModel(): Model & { reset(turns: number): void; onTurn?: (turn: number) => void } {
  let turn = 0;
  let turns = 0;
  const model: Model & { reset(turns: number): void; onTurn?: (turn: number) => void } = {
    name: 'instant',
    reset(n) {
      turn = 0;
      turns = n;
    },
    generate: async (_request: ModelRequest) => {
      model.onTurn?.(turn + 1);
      return ++turn < turns ? toolReply(turn) : textReply();
    },
  };
  return model;
}

/** What a careful person writes by hand: the same calls, the same validation, no framework. */
async function handLoop(model: Model, tools: readonly Tool[], prompt: string, maxTurns: number): Promise<Message[]> {
  const byName = new Map(tools.map((tool) => [tool.name, tool]));
  const definitions = tools.map((tool) => tool.definition);
  const controller = new AbortController();
  const messages: Message[] = [{ role: 'user', content: prompt }];
  for (let turn = 1; turn <= maxTurns; turn++) {
    const reply = await model.generate({
      messages,
      tools: definitions,
      signal: controller.signal,
      idempotencyKey: `hand:${turn}`,
      onTextDelta: () => {},
    });
    messages.push(reply.message);
    const calls = reply.message.toolCalls ?? [];
    if (calls.length === 0) return messages;
    for (const call of calls) {
      const tool = byName.get(call.name);
      const parsed = tool?.input.safeParse(call.args);
      let result: ToolMessage;
      if (!tool || !parsed?.success) {
        result = { role: 'tool', toolCallId: call.id, toolName: call.name, content: 'bad call', isError: true };
      } else {
        try {
          const value = await tool.execute(parsed.data, { signal: controller.signal, toolCallId: call.id, idempotencyKey: call.id });
          result = { role: 'tool', toolCallId: call.id, toolName: call.name, content: typeof value === 'string' ? value : JSON.stringify(value) };
        } catch (error) {
          result = { role: 'tool', toolCallId: call.id, toolName: call.name, content: String(error), isError: true };
        }
      }
      messages.push(result);
    }
  }
  throw new Error('max turns');
}

// ---------------------------------------------------------------------------------------------
// 1. Cost per turn.

/**
 * The floor: the least an XState actor can do to drive the same model and tool. One long-lived
 * actor, no children, messages pushed in place, the same validation as the hand loop; its
 * entry actions start the IO and feed the result back as an event.
 */
function floorMachine(model: Model, tools: readonly Tool[]) {
  const byName = new Map(tools.map((tool) => [tool.name, tool]));
  const definitions = tools.map((tool) => tool.definition);
  const controller = new AbortController();
  type Ctx = { messages: Message[]; turn: number; reply: ModelReply | null };
  type Ev = { type: 'replied'; reply: ModelReply } | { type: 'ran'; results: ToolMessage[] };
  return setup({
    types: { context: {} as Ctx, events: {} as Ev, input: {} as { prompt: string }, output: {} as Message[] },
    actions: {
      callModel: ({ context, self }) => {
        context.turn++;
        void model
          .generate({ messages: context.messages, tools: definitions, signal: controller.signal, idempotencyKey: `floor:${context.turn}` })
          .then((reply) => self.send({ type: 'replied', reply }));
      },
      runTools: ({ context, self }) => {
        const calls = context.reply!.message.toolCalls ?? [];
        void Promise.all(
          calls.map(async (call): Promise<ToolMessage> => {
            const tool = byName.get(call.name);
            const parsed = tool?.input.safeParse(call.args);
            if (!tool || !parsed?.success) return { role: 'tool', toolCallId: call.id, toolName: call.name, content: 'bad call', isError: true };
            const value = await tool.execute(parsed.data, { signal: controller.signal, toolCallId: call.id, idempotencyKey: call.id });
            return { role: 'tool', toolCallId: call.id, toolName: call.name, content: typeof value === 'string' ? value : JSON.stringify(value) };
          }),
        ).then((results) => self.send({ type: 'ran', results }));
      },
    },
    guards: { hasCalls: ({ event }) => event.type === 'replied' && (event.reply.message.toolCalls?.length ?? 0) > 0 },
  }).createMachine({
    context: ({ input }) => ({ messages: [{ role: 'user', content: input.prompt }], turn: 0, reply: null }),
    initial: 'model',
    states: {
      model: {
        entry: 'callModel',
        on: {
          replied: [
            {
              guard: 'hasCalls',
              target: 'tools',
              actions: ({ context, event }) => {
                context.messages.push(event.reply.message);
                context.reply = event.reply;
              },
            },
            { target: 'done', actions: ({ context, event }) => void context.messages.push(event.reply.message) },
          ],
        },
      },
      tools: {
        entry: 'runTools',
        on: { ran: { target: 'model', actions: ({ context, event }) => void context.messages.push(...event.results) } },
      },
      done: { type: 'final' },
    },
    output: ({ context }) => context.messages,
  });
}

type Runner = (turns: number) => Promise<void>;

function runners(model = instantModel()): Record<string, Runner> {
  const floor = floorMachine(model, [echo]);
  const agent = createAgentMachine({ model, tools: [echo], policy: { maxTurns: 1_000_000 } });
  const expectTurns = (what: string, messages: readonly Message[], turns: number) => {
    if (messages.length !== 2 * turns) throw new Error(`${what}: ${messages.length} messages after ${turns} turns`);
  };
  // One store for all runs, as an application opens it once: a run is a new session in it. The
  // memory store is the exception: it keeps every session in this heap, and the sessions of all
  // earlier runs (the warm-up's 20,000 turns and on) would make every column's collections slower
  // as the bench goes (one run: the agent's 1,000-turn row 132 µs, the 100-turn row before it 79;
  // with a store per run, 75 and 75). It is a new store per run, which costs nothing to open.
  const durable = (open: () => SessionStore, { perRun = false } = {}): Runner => {
    let store: SessionStore | undefined;
    return async (turns) => {
      model.reset(turns);
      if (perRun) store = open();
      store ??= open();
      const session = await DurableSession.open({ machine: agent, store, sessionId: `bench-${++sessions}` });
      session.send({ type: 'input', message: 'go' });
      const output = await session.whenIdle();
      await session.close();
      expectTurns('durable', output!.messages, turns);
    };
  };
  let sessions = 0;
  const dir = mkdtempSync(join(tmpdir(), 'loopchart-bench-'));
  return {
    'hand-written loop': async (turns) => {
      model.reset(turns);
      expectTurns('hand', await handLoop(model, [echo], 'go', 1_000_000), turns);
    },
    'floor (minimal XState actor)': async (turns) => {
      model.reset(turns);
      expectTurns('floor', await toPromise(createActor(floor, { input: { prompt: 'go' } }).start()), turns);
    },
    'agent actor': async (turns) => {
      model.reset(turns);
      const output = await toPromise(createActor(agent, { input: { prompt: 'go' } }).start());
      if (output.outcome.type !== 'Completed') throw new Error(`agent: ${output.outcome.type}`);
      expectTurns('agent', output.messages, turns);
    },
    'durable, memory store': durable(() => new MemorySessionStore(), { perRun: true }),
    'durable, SQLite NORMAL': durable(() => new SqliteSessionStore({ path: join(dir, 'sessions.db'), synchronous: 'NORMAL' })),
  };
}

/** µs per turn of one sample: short runs are repeated so every sample times about TURNS_PER_SAMPLE turns. */
async function sample(run: Runner, turns: number): Promise<number> {
  const repeats = Math.max(1, Math.round(TURNS_PER_SAMPLE / turns));
  const start = process.hrtime.bigint();
  for (let r = 0; r < repeats; r++) await run(turns);
  return Number(process.hrtime.bigint() - start) / 1000 / (repeats * turns);
}

async function perTurn(): Promise<void> {
  const all = runners();
  const names = Object.keys(all);
  const rows: (string | number)[][] = [];
  for (let turns = 0; turns < WARMUP_TURNS; turns += 100) for (const name of names) await all[name]!(100);
  for (const turns of TURN_COUNTS) {
    const times = new Map(names.map((name) => [name, [] as number[]]));
    // Interleaved, so a burst of load on the shared machine hits every column alike.
    for (let i = 0; i < RUNS + 1; i++) {
      for (const name of names) {
        const micros = await sample(all[name]!, turns);
        if (i > 0) times.get(name)!.push(micros); // the first round warms up
      }
    }
    const m = (name: string) => median(times.get(name)!);
    const agent = m('agent actor');
    const floor = m('floor (minimal XState actor)');
    rows.push([
      turns,
      ...names.map(m),
      `${(agent / floor).toFixed(2)}x`,
      m('durable, SQLite NORMAL') - agent,
    ]);
  }
  printTable(
    `driver: µs per turn (instant model, 1 tool call per turn, instant tool), median of ${RUNS} interleaved samples of ~${TURNS_PER_SAMPLE} turns each, after ${WARMUP_TURNS.toLocaleString('en-US')} turns of each column`,
    ['turns per run', ...names, 'agent/floor', 'SQLite − agent'],
    rows,
  );
}

/**
 * Peak heap growth during one long run: the heap is read every 10 turns from inside the model
 * call (a run of instant calls never yields to timers, so a sampling timer would see nothing).
 */
async function peakHeap(): Promise<void> {
  const { gc } = collector();
  const turns = TURN_COUNTS.at(-1)!;
  const model = instantModel();
  const all = runners(model);
  const rows: (string | number)[][] = [];
  for (const name of ['floor (minimal XState actor)', 'agent actor']) {
    await all[name]!(100);
    await heapUsedAfterGc(gc);
    const base = process.memoryUsage().heapUsed;
    let peak = base;
    model.onTurn = (turn) => {
      if (turn % 10 === 0) peak = Math.max(peak, process.memoryUsage().heapUsed);
    };
    await all[name]!(turns);
    model.onTurn = undefined;
    peak = Math.max(peak, process.memoryUsage().heapUsed);
    rows.push([name, ((peak - base) / 1e6).toFixed(1), ((await heapUsedAfterGc(gc)) - base) / 1e6]);
  }
  printTable(`driver: heap during one ${turns.toLocaleString('en-US')}-turn run (MB above the heap after a GC before it, read every 10 turns)`, ['what', 'peak growth MB', 'retained after GC MB'], rows);
}

// ---------------------------------------------------------------------------------------------
// 2. Heap per idle session.

function collector(): { gc: () => void; how: string } {
  const exposed = (globalThis as { gc?: () => void }).gc;
  if (exposed) return { gc: exposed, how: 'global.gc (--expose-gc)' };
  setFlagsFromString('--expose-gc');
  return { gc: runInNewContext('gc') as () => void, how: 'v8.setFlagsFromString fallback (run with --expose-gc to be sure)' };
}

/** Stateless, so 1,000 sessions can share it: a tool call after the user's message, text after the result. */
const sessionModel: Model = {
  name: 'instant-session',
  generate: async (request) => (request.messages.at(-1)?.role === 'user' ? toolReply(1) : textReply()),
};

async function heapUsedAfterGc(gc: () => void): Promise<number> {
  // Let pending promise jobs and timers settle, then collect twice (weak maps clear in a second pass).
  await new Promise((resolve) => setTimeout(resolve, 10));
  gc();
  gc();
  return process.memoryUsage().heapUsed;
}

async function startSessions(agent: ReturnType<typeof createAgentMachine>, count: number): Promise<AgentActor[]> {
  const actors: AgentActor[] = [];
  const finished: Promise<unknown>[] = [];
  for (let i = 0; i < count; i++) {
    const actor = createActor(agent, { input: { sessionId: `session-${i}` } });
    finished.push(new Promise((resolve) => actor.on('run.finished', resolve)));
    actor.start();
    actor.send({ type: 'input', message: `question ${i}` });
    actors.push(actor);
  }
  await Promise.all(finished);
  for (const actor of actors) {
    const snapshot = actor.getSnapshot();
    if (snapshot.value !== 'Idle' || outputOf(snapshot.context)?.outcome.type !== 'Completed') throw new Error('session did not complete');
  }
  return actors;
}

async function perSession(): Promise<void> {
  const { gc, how } = collector();
  const agent = createAgentMachine({ model: sessionModel, tools: [echo] });

  // Warm up (JIT, tokenizer tables, zod) so the first measured phase does not pay for it.
  const [warm] = await startSessions(agent, 1);
  const template = warm!.getSnapshot().context.brain.context.history;
  const persistedBytes = JSON.stringify(warm!.getPersistedSnapshot()).length;
  const plainBytes = JSON.stringify({ sessionId: 'session-0', messages: template }).length;

  const rounds: { actor: number; plain: number }[] = [];
  for (let round = 0; round < 3; round++) {
    let before = await heapUsedAfterGc(gc);
    // Each plain object gets its own copy of the messages, as each session has its own.
    let plain: { sessionId: string; messages: Message[] }[] | null = Array.from({ length: SESSIONS }, (_, i) => ({
      sessionId: `session-${i}`,
      messages: structuredClone(template).map((m) => (m.role === 'user' ? { ...m, content: `question ${i}` } : m)),
    }));
    const plainHeap = (await heapUsedAfterGc(gc)) - before;
    if (plain.length !== SESSIONS) throw new Error('unreachable');
    plain = null;

    before = await heapUsedAfterGc(gc);
    let actors: AgentActor[] | null = await startSessions(agent, SESSIONS);
    const actorHeap = (await heapUsedAfterGc(gc)) - before;
    for (const actor of actors) actor.stop();
    actors = null;
    rounds.push({ actor: actorHeap / SESSIONS, plain: plainHeap / SESSIONS });
  }
  const mid = (values: number[]) => values.sort((a, b) => a - b)[values.length >> 1]!;
  const actorBytes = mid(rounds.map((r) => r.actor));
  const plainHeapBytes = mid(rounds.map((r) => r.plain));

  printTable(
    `driver: heap per idle session with ${SESSIONS.toLocaleString('en-US')} alive, each after one completed run of ${template.length} messages (median of ${rounds.length} rounds; gc: ${how})`,
    ['what', 'heap bytes each', 'JSON bytes each', 'vs plain object'],
    [
      ['idle session actor', Math.round(actorBytes), persistedBytes, `${(actorBytes / plainHeapBytes).toFixed(1)}x`],
      ['plain object, same messages', Math.round(plainHeapBytes), plainBytes, '1.0x'],
    ],
  );
}

// ---------------------------------------------------------------------------------------------
// 4. Where the peak comes from.

type SampledNode = { callFrame: { functionName: string; url: string }; selfSize: number; children: SampledNode[] };

/**
 * A frame as `name file`, the file relative to the repository (or the package it is in). No line:
 * tsx hands V8 each module transformed, so the profiler's lines are not the source's.
 */
function frameName({ functionName, url }: SampledNode['callFrame']): string {
  const file = url.includes('node_modules/') ? url.slice(url.lastIndexOf('node_modules/') + 13).split('/')[0]! : url.replace(/^.*?\/(src|machines|bench)\//, '$1/');
  return `${functionName || '(anonymous)'} ${file || '(native)'}`;
}

/**
 * Bytes of objects promoted to the old generation and collected there during one long agent run,
 * by allocation site: the allocating frame and the nearest loopchart frame that called it.
 */
async function promotedGarbage(): Promise<void> {
  const turns = TURN_COUNTS.at(-1)!;
  const model = instantModel();
  const agentRun = runners(model)['agent actor']!;
  await agentRun(100);
  const session = new Session();
  session.connect();
  await session.post('HeapProfiler.enable');
  await session.post('HeapProfiler.startSampling', { samplingInterval: 4096, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: false });
  await agentRun(turns);
  const { profile } = (await session.post('HeapProfiler.stopSampling')) as unknown as { profile: { head: SampledNode } };
  session.disconnect();
  const bySite = new Map<string, number>();
  const walk = (node: SampledNode, ours: string | undefined) => {
    const name = frameName(node.callFrame);
    const own = /^[^ ]+ (src|machines)\//.test(name) ? name : ours;
    if (node.selfSize > 0) {
      const site = own && own !== name ? `${name} ← ${own}` : name;
      bySite.set(site, (bySite.get(site) ?? 0) + node.selfSize);
    }
    for (const child of node.children) walk(child, own);
  };
  walk(profile.head, undefined);
  const total = [...bySite.values()].reduce((sum, bytes) => sum + bytes, 0);
  const top = [...bySite].sort((a, b) => b[1] - a[1]).slice(0, 15);
  printTable(
    `driver: objects promoted and then collected during one ${turns.toLocaleString('en-US')}-turn agent run, by allocation site (sampled; ${(total / 1e6).toFixed(1)} MB in all)`,
    ['allocated in ← nearest loopchart frame', 'MB', 'share'],
    top.map(([site, bytes]) => [site, bytes / 1e6, `${((100 * bytes) / total).toFixed(1)} %`]),
  );
}

/** The microsteps and events one actor took (its children's not counted) during a run of `turns` turns. */
async function stepsOf(logic: AnyActorLogic, model: ReturnType<typeof instantModel>, turns: number): Promise<{ microsteps: number; events: number }> {
  model.reset(turns);
  let microsteps = 0;
  let events = 0;
  let root: unknown;
  const inspect = (event: InspectionEvent) => {
    if (event.actorRef !== root) return;
    if (event.type === '@xstate.microstep') microsteps++;
    else if (event.type === '@xstate.event') events++;
  };
  const actor = createActor(logic, { input: { prompt: 'go' }, inspect });
  root = actor;
  await toPromise(actor.start());
  return { microsteps, events };
}

/** The actors whose work per turn is counted (`stepsPerTurn`; `driver-maps.ts` runs one by its index). */
export function countedActors(model: ReturnType<typeof instantModel>): [string, AnyActorLogic][] {
  return [
    ['floor (minimal XState actor)', floorMachine(model, [echo])],
    ['agent actor (no budget, no operation)', createAgentMachine({ model, tools: [echo], policy: { maxTurns: 1_000_000 } })],
    [
      'agent actor with a budget and a beforeModelCall hook',
      createAgentMachine({ model, tools: [echo], policy: { maxTurns: 1_000_000 }, budget: { maxToolCalls: 1_000_000 }, operations: [{ name: 'count', beforeModelCall: () => {} }] }),
    ],
  ];
}

/**
 * V8 hidden classes (maps) a process made during one run of `turns` turns of counted actor
 * `index`, read from `node --log-maps`. Maps and their descriptors live in the old generation: a
 * turn that makes maps (an object literal that starts with a spread and adds a key, a literal with
 * a getter) leaves them there, with what they point to, until a full collection.
 */
function mapsMade(index: number, turns: number): number {
  const dir = mkdtempSync(join(tmpdir(), 'loopchart-maps-'));
  try {
    const log = join(dir, 'v8.log');
    const child = fileURLToPath(new URL('./driver-maps.ts', import.meta.url));
    execFileSync(process.execPath, ['--log-maps', `--logfile=${log}`, '--no-logfile-per-isolate', '--import', 'tsx', child, String(index), String(turns)], { timeout: 120_000 });
    return readFileSync(log, 'utf8').split('\n').filter((line) => line.startsWith('map-create,')).length;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function stepsPerTurn(): Promise<void> {
  const turns = 100;
  const model = instantModel();
  const rows: (string | number)[][] = [];
  for (const [index, [name, logic]] of countedActors(model).entries()) {
    const { microsteps, events } = await stepsOf(logic, model, turns);
    // The same process setup either way: the difference is what the 3,000 more turns made.
    const maps = (mapsMade(index, 3_030) - mapsMade(index, 30)) / 3_000;
    rows.push([name, (microsteps / turns).toFixed(2), (events / turns).toFixed(2), maps.toFixed(2)]);
  }
  // The minimal agent again, stepped and stored by a DurableSession (the memory store): the host's own per-step work.
  const durable = countedActors(model).length;
  rows.push(['the agent actor in a DurableSession (memory store)', '', '', ((mapsMade(durable, 3_030) - mapsMade(durable, 30)) / 3_000).toFixed(2)]);
  printTable(
    `driver: work per turn, counted (no clock, so no noise): the actor's own microsteps and events over one ${turns}-turn run, and the V8 hidden classes the process made per turn (node --log-maps, a 3,030-turn run against a 30-turn one)`,
    ['actor', 'microsteps per turn', 'events per turn', 'hidden classes made per turn'],
    rows,
  );
}

export async function run(): Promise<void> {
  if (process.env.BENCH_ONLY === 'heap') return peakHeap();
  if (process.env.BENCH_ONLY === 'promoted') return promotedGarbage();
  if (process.env.BENCH_ONLY === 'counted') return stepsPerTurn();
  await stepsPerTurn();
  await perTurn();
  if (process.env.BENCH_TURNS) return; // the quick look: per-turn table only
  await peakHeap();
  await perSession();
}

/**
 * Agents as tools (issue 22), measured.
 *
 * 1. µs per call of a subagent against a plain tool doing the same work (one call of the same
 *    instant model, its text the result), each inside a parent run of two model calls: the
 *    difference is what a child run costs (its actor, its IO, its brain, its session). Stand-alone
 *    actors, and `DurableSession` over the memory store (children are sessions there).
 * 2. A tree of 100 children (one reply asking for 100 subagent calls, each child one tool call
 *    and two model calls) in a `DurableSession` on SQLite: wall time, heap growth, and the store
 *    writes (state rows and journal entries) per child step.
 *
 * Heap numbers want a callable GC (`node --expose-gc`); without it the bench turns it on through
 * `v8.setFlagsFromString`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { createActor, toPromise } from 'xstate';
import { z } from 'zod';
import { createAgentMachine } from '../machines/agent.machine.js';
import { agentTool } from '../src/agent/subagents/agent-tool.js';
import type { Model, ModelReply, ModelRequest } from '../src/model.js';
import { DurableSession } from '../src/sessions/durable-session.js';
import { MemorySessionStore } from '../src/stores/memory.js';
import type { SessionStore } from '../src/stores/session-store.js';
import { SqliteSessionStore } from '../src/stores/sqlite.js';
import { defineTool, type Tool } from '../src/tools/define-tool.js';
import { median, printTable } from './support.js';

const RUNS = Number(process.env.BENCH_RUNS ?? 200);
const CHILDREN = Number(process.env.BENCH_CHILDREN ?? 100);

const text = (content: string): ModelReply => ({ message: { role: 'assistant', content }, finishReason: 'stop', usage: { inputTokens: 10, outputTokens: 2 } });
const calls = (name: string, n: number): ModelReply => ({
  message: { role: 'assistant', content: '', toolCalls: Array.from({ length: n }, (_, i) => ({ id: `c${i}`, name, args: { task: `t${i}` } })) },
  finishReason: 'tool-calls',
  usage: { inputTokens: 10, outputTokens: 2 },
});
const replies = (request: ModelRequest) => request.messages.filter((m) => m.role === 'assistant').length;

/** The parent: asks for `n` calls of `tool`, then answers. */
const parentModel = (tool: string, n = 1): Model => ({ name: 'parent', generate: async (request) => (replies(request) === 0 ? calls(tool, n) : text('done')) });
/** The work both sides do: one call of an instant model. */
const workModel: Model = { name: 'work', generate: async () => text('ok') };

const plain = defineTool({
  name: 'worker',
  description: 'Does the work.',
  input: z.object({ task: z.string() }),
  execute: async ({ task }, { signal }) => (await workModel.generate({ messages: [{ role: 'user', content: task }], tools: [], signal, idempotencyKey: task })).message.content,
});
const child = createAgentMachine({ model: workModel });
const sub = agentTool({ agent: child, name: 'worker', description: 'Does the work.' });

/** Built once per tool: what is measured is the run, not compiling the config. */
const parents = new Map<Tool, ReturnType<typeof createAgentMachine>>();
const parentOf = (tool: Tool) => parents.get(tool) ?? parents.set(tool, createAgentMachine({ model: parentModel('worker'), tools: [tool] })).get(tool)!;

async function actorRun(tool: Tool): Promise<number> {
  const machine = parentOf(tool);
  const started = performance.now();
  await toPromise(createActor(machine, { input: { prompt: 'go' } }).start());
  return performance.now() - started;
}

let sessions = 0;
async function durableRun(tool: Tool, store: SessionStore): Promise<number> {
  const machine = parentOf(tool);
  const started = performance.now();
  const session = await DurableSession.open({ machine, store, sessionId: `s${sessions++}` });
  session.send({ type: 'input', message: 'go' });
  await session.whenIdle();
  await session.close();
  return performance.now() - started;
}

/** Medians (µs) of `a` and `b`, sampled in turn so a busy machine slows both alike. */
async function medianPair(a: () => Promise<number>, b: () => Promise<number>): Promise<[number, number]> {
  for (let i = 0; i < 20; i++) await a(), await b();
  const as: number[] = [];
  const bs: number[] = [];
  for (let i = 0; i < RUNS; i++) as.push(await a()), bs.push(await b());
  return [median(as) * 1000, median(bs) * 1000];
}

async function overhead(): Promise<void> {
  const rows: (string | number)[][] = [];
  const memory = new MemorySessionStore();
  for (const [label, run] of [
    ['actor', (tool: Tool) => () => actorRun(tool)],
    ['DurableSession (memory)', (tool: Tool) => () => durableRun(tool, memory)],
  ] as const) {
    const [tool, agent] = await medianPair(run(plain), run(sub));
    rows.push([label, tool, agent, agent - tool, agent / tool]);
  }
  printTable(
    `Subagent call vs a plain tool doing the same work (µs per parent run of 2 model calls and 1 tool call, median of ${RUNS}, sampled in turn)`,
    ['host', 'plain tool', 'subagent', 'overhead (µs)', 'ratio'],
    rows,
  );
}

const gc: () => void = (() => {
  if (typeof globalThis.gc === 'function') return globalThis.gc;
  setFlagsFromString('--expose-gc');
  return runInNewContext('gc') as () => void;
})();

/** The store, counting writes into child sessions (their ids name the parent: `parent/...`). */
function counted(inner: SessionStore) {
  const writes = { rows: 0, journal: 0 };
  const store: SessionStore = Object.assign(Object.create(inner) as SessionStore, {
    apply: (sessionId: string, write: Parameters<SessionStore['apply']>[1]) => {
      if (sessionId.includes('/')) writes.rows++;
      return inner.apply(sessionId, write);
    },
    journalToolResult: (sessionId: string, key: string, result: Parameters<SessionStore['journalToolResult']>[2]) => {
      if (sessionId.includes('/')) writes.journal++;
      return inner.journalToolResult(sessionId, key, result);
    },
  });
  return { store, writes };
}

async function tree(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'loopchart-bench-tree-'));
  try {
    const step = defineTool({ name: 'step', description: 'One step.', input: z.object({}), execute: () => 'stepped' });
    const leafModel: Model = { name: 'leaf', generate: async (request) => (replies(request) === 0 ? calls('step', 1) : text('leaf done')) };
    const leaf = agentTool({ agent: createAgentMachine({ model: leafModel, tools: [step] }), name: 'leaf', description: 'A leaf.' });
    const sqlite = new SqliteSessionStore({ path: join(dir, 'tree.db'), synchronous: 'NORMAL' });
    const { store, writes } = counted(sqlite);
    const machine = createAgentMachine({ model: parentModel('leaf', CHILDREN), tools: [leaf], maxToolCallsPerReply: CHILDREN });
    gc();
    const heapBefore = process.memoryUsage().heapUsed;
    const started = performance.now();
    const session = await DurableSession.open({ machine, store, sessionId: 'tree' });
    session.send({ type: 'input', message: 'go' });
    const output = await session.whenIdle();
    const ms = performance.now() - started;
    const heapAfter = process.memoryUsage().heapUsed;
    await session.close();
    if (output?.outcome.type !== 'Completed') throw new Error(`the tree ended ${JSON.stringify(output?.outcome)}`);
    const listed = (await sqlite.list()).filter((s) => s.sessionId.startsWith('tree/')).length;
    await sqlite.close();
    // Each child: two model calls and one tool call.
    const childSteps = CHILDREN * 3;
    printTable(
      `A tree of ${CHILDREN} children in one DurableSession on SQLite (synchronous NORMAL); each child 2 model calls + 1 tool call`,
      ['children stored', 'wall ms', 'ms per child', 'heap growth MB (live, not collected)', 'row writes per child step', 'journal writes per child step'],
      [[listed, ms, ms / CHILDREN, (heapAfter - heapBefore) / 2 ** 20, writes.rows / childSteps, writes.journal / childSteps]],
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export async function run(): Promise<void> {
  await overhead();
  await tree();
}

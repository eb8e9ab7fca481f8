import { outputOf } from '../machines/agent.machine.js';
/**
 * The driver's cost, beside what a person would write by hand.
 *
 * 1. µs per turn with an instant model (a ready reply with one tool call per turn, text on the last
 *    turn) and an instant tool, for runs of 10, 100 and 1,000 turns: the agent actor against a
 *    hand-written async loop making the same calls (call the model, validate and run the tool,
 *    push the messages, repeat). The difference is the framework's overhead per turn.
 * 2. Heap per idle session actor with 1,000 sessions alive, each after one short completed run,
 *    against 1,000 plain objects holding copies of the same messages.
 *
 * Heap numbers need a callable GC: run with `node --expose-gc` (`tsx --expose-gc bench/run.ts
 * driver`, or `NODE_OPTIONS=--expose-gc npm run bench`). Without the flag the bench turns it on
 * through `v8.setFlagsFromString`, which works on current Node versions but is not an official API.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { createActor, toPromise } from 'xstate';
import { z } from 'zod';
import { createAgentMachine, type AgentActor } from '../machines/agent.machine.js';
import type { Model, ModelReply, ModelRequest } from '../src/model.js';
import type { Message, ToolMessage } from '../src/schemas.js';
import { defineTool, type Tool } from '../src/tools/define-tool.js';
import { median, printTable } from './support.js';

const RUNS = 7;
const TURN_COUNTS = [10, 100, 1_000];
/** Turns measured per sample: short runs are repeated so every sample times about this many turns. */
const TURNS_PER_SAMPLE = 1_000;
const SESSIONS = 1_000;

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

/** Answers with a tool call until turn `turns`, then with text. `reset` starts a new run. */
function instantModel(): Model & { reset(turns: number): void } {
  let turn = 0;
  let turns = 0;
  return {
    name: 'instant',
    reset(n) {
      turn = 0;
      turns = n;
    },
    generate: async (_request: ModelRequest) => (++turn < turns ? toolReply(turn) : textReply()),
  };
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
// 1. Overhead per turn.

async function perTurn(): Promise<void> {
  const model = instantModel();
  const agent = createAgentMachine({ model, tools: [echo], policy: { maxTurns: 1_000_000 } });
  const rows: (string | number)[][] = [];

  for (const turns of TURN_COUNTS) {
    const repeats = Math.max(1, Math.round(TURNS_PER_SAMPLE / turns));
    const micros = (start: bigint) => Number(process.hrtime.bigint() - start) / 1000 / (repeats * turns);

    const handSample = async () => {
      const start = process.hrtime.bigint();
      for (let r = 0; r < repeats; r++) {
        model.reset(turns);
        const messages = await handLoop(model, [echo], 'go', 1_000_000);
        if (messages.length !== 2 * turns) throw new Error(`hand loop: ${messages.length} messages`);
      }
      return micros(start);
    };
    const driverSample = async () => {
      const start = process.hrtime.bigint();
      for (let r = 0; r < repeats; r++) {
        model.reset(turns);
        const actor = createActor(agent, { input: { prompt: 'go' } }).start();
        const output = await toPromise(actor);
        if (output.outcome.type !== 'Completed' || output.messages.length !== 2 * turns) {
          throw new Error(`driver: ${output.outcome.type}, ${output.messages.length} messages`);
        }
      }
      return micros(start);
    };
    // Interleaved, so a burst of load on the shared machine hits both columns alike.
    for (let i = 0; i < 2; i++) await handSample(), await driverSample();
    const handTimes: number[] = [];
    const driverTimes: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      handTimes.push(await handSample());
      driverTimes.push(await driverSample());
    }
    const hand = median(handTimes);
    const driver = median(driverTimes);

    rows.push([turns, hand, driver, driver - hand, `${(driver / hand).toFixed(1)}x`]);
  }

  printTable(
    `driver: µs per turn (instant model, 1 tool call per turn, instant tool), median of ${RUNS} interleaved samples of ~${TURNS_PER_SAMPLE} turns each`,
    ['turns per run', 'hand-written loop', 'agent actor', 'overhead', 'actor/hand'],
    rows,
  );
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

export async function run(): Promise<void> {
  await perTurn();
  await perSession();
}

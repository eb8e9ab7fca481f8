/**
 * Memory and the prompt cache (issue 45): how many input tokens of each request repeat the
 * previous request's prefix (what a provider's prompt cache can serve) with memory off, with
 * loopchart's memory (read once per run), and with a memory that re-reads its document on every
 * call (the naive placement), in runs where the model saves to working memory mid-run.
 * Deterministic: token counts, not timings.
 */
import { createAgentMachine } from '../machines/agent.machine.js';
import type { Operation } from '../src/agent/operations/operation.js';
import { DurableSession } from '../src/sessions/durable-session.js';
import { MemorySessionStore } from '../src/stores/memory.js';
import { agentMemory } from '../src/memory.js';
import { memoryBackend } from '../src/memory/memory-store.js';
import type { Model, ModelRequest } from '../src/model.js';
import type { Message } from '../src/schemas.js';
import { estimateMessageTokens, estimateToolTokens } from '../src/tokens.js';
import { defineTool } from '../src/tools/define-tool.js';
import { z } from 'zod';
import { printTable } from './support.js';

const TURNS = 8;
const RUNS = 3;

/** A model that looks something up on each turn and saves to working memory on turns 3 and 6. */
function model(requests: ModelRequest[]): Model {
  let id = 0;
  return {
    name: 'bench',
    async generate(request) {
      requests.push(request);
      const lastUser = request.messages.findLastIndex((m) => m.role === 'user');
      const turn = request.messages.slice(lastUser).filter((m) => m.role === 'assistant').length + 1;
      if (turn === TURNS) return { message: { role: 'assistant', content: 'Done for now.' }, finishReason: 'stop' };
      const saves = turn === 3 || turn === 6;
      const call = saves
        ? { id: `c${++id}`, name: 'memory_update', args: { memory: `Name: Ada. Project: Lovelace engine. Notes after turn ${turn} of run ${requests.length}.` } }
        : { id: `c${++id}`, name: 'lookup', args: { topic: `part ${turn}` } };
      return { message: { role: 'assistant', content: '', toolCalls: [call] }, finishReason: 'tool-calls' };
    },
  };
}

const lookup = defineTool({ name: 'lookup', description: 'Looks a part up.', input: z.object({ topic: z.string() }), execute: ({ topic }) => `${topic}: ${'specification text '.repeat(40)}` });

/** The naive placement: the document read afresh on every call, so a save changes the next request's prefix. */
function liveMemory(store: MemorySessionStore): Operation<{ doc: string | null }> {
  const memory = agentMemory({ store, recall: false });
  const backend = memoryBackend(store);
  return {
    ...memory,
    name: 'live',
    state: { schema: z.object({ doc: z.string().nullable() }), initial: { doc: null } },
    prompt: (ctx) => `Working memory:\n<working-memory>\n${ctx.state.doc ?? '(empty)'}\n</working-memory>`,
    beforeModelCall: async (ctx) => ({ state: { doc: ctx.scope ? ((await backend.readWorking(ctx.scope))?.content ?? null) : null } }),
    afterReply: undefined,
  } as Operation<{ doc: string | null }>;
}

const tokensOf = (messages: readonly Message[]) => messages.reduce((sum, m) => sum + estimateMessageTokens(m), 0);

/** Tokens of `request` that repeat the previous request's leading messages exactly (tools first, as providers cache them). */
function cachedTokens(previous: ModelRequest | undefined, request: ModelRequest): number {
  if (!previous || JSON.stringify(previous.tools) !== JSON.stringify(request.tools)) return 0;
  let same = 0;
  while (same < previous.messages.length && same < request.messages.length && JSON.stringify(previous.messages[same]) === JSON.stringify(request.messages[same])) same++;
  return estimateToolTokens(request.tools) + tokensOf(request.messages.slice(0, same));
}

async function measure(variant: 'off' | 'per run' | 'per call'): Promise<{ input: number; cached: number; requests: number }> {
  const store = new MemorySessionStore();
  const requests: ModelRequest[] = [];
  const operations = variant === 'off' ? [] : variant === 'per run' ? [agentMemory({ store, recall: false })] : [liveMemory(store)];
  const machine = createAgentMachine({ model: model(requests), instructions: 'You are a careful engineering assistant. '.repeat(20), tools: [lookup], operations });
  const session = await DurableSession.open({ machine, store, sessionId: 'bench', scope: 'user:ada' });
  for (let run = 0; run < RUNS; run++) {
    session.send({ type: 'input', message: `Run ${run}: go on with the Lovelace engine parts.` });
    await session.whenIdle();
  }
  await session.close();
  let input = 0;
  let cached = 0;
  // Within a run only: a new run's first request follows a new user message anyway.
  requests.forEach((request, i) => {
    input += estimateToolTokens(request.tools) + tokensOf(request.messages);
    if (i % TURNS !== 0) cached += cachedTokens(requests[i - 1], request);
  });
  return { input, cached, requests: requests.length };
}

export async function run(): Promise<void> {
  const rows: (string | number)[][] = [];
  for (const variant of ['off', 'per run', 'per call'] as const) {
    const { input, cached, requests } = await measure(variant);
    rows.push([variant, requests, input, cached, `${((100 * cached) / input).toFixed(1)}%`]);
  }
  printTable(`memory and the prompt cache: ${RUNS} runs of ${TURNS} calls, working memory saved on calls 3 and 6 (estimated tokens)`, ['memory read', 'requests', 'input tokens', 'prefix repeated from the previous call', 'share'], rows);
}

if (import.meta.url === `file://${process.argv[1]}`) await run();

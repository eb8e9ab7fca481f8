/**
 * A memory operation: before each model call it fetches what the store remembers about the
 * latest user message (async, with the hook's AbortSignal), keeps it in its state slice, and
 * its prompt part hands it to the model. The store here is scripted; a real one is a vector
 * database or a search service behind the same `search` function.
 */
import { z } from 'zod';
import type { Operation } from '../../src/agent/operations/operation.js';

export interface MemoryStore {
  search(query: string, options: { signal: AbortSignal }): Promise<string[]>;
}

/** A memory store that answers from a fixed list after `delayMs`, by words the query shares with each memory. */
export function scriptedMemoryStore(memories: readonly string[], delayMs = 5): MemoryStore & { queries: string[] } {
  const queries: string[] = [];
  return {
    queries,
    search(query, { signal }) {
      queries.push(query);
      const words = new Set(query.toLowerCase().match(/\w{4,}/g) ?? []);
      const found = memories.filter((memory) => (memory.toLowerCase().match(/\w{4,}/g) ?? []).some((word) => words.has(word)));
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => resolve(found), delayMs);
        signal.addEventListener('abort', () => (clearTimeout(timer), reject(signal.reason)), { once: true });
      });
    },
  };
}

const MemoryState = z.object({ query: z.string(), recalled: z.array(z.string()) });
export type MemoryState = z.infer<typeof MemoryState>;

export function memoryOperation(store: MemoryStore): Operation<MemoryState> {
  return {
    name: 'memory',
    state: { schema: MemoryState, initial: { query: '', recalled: [] } },
    async beforeModelCall(ctx) {
      const query = ctx.messages.findLast((message) => message.role === 'user')?.content ?? '';
      // The same question was looked up already (a tool round trip): nothing new to fetch.
      if (query === ctx.state.query) return;
      return { state: { query, recalled: await store.search(query, { signal: ctx.signal }) } };
    },
    prompt: (ctx) => (ctx.state.recalled.length ? `What you remember:\n${ctx.state.recalled.map((m) => `- ${m}`).join('\n')}` : undefined),
  };
}

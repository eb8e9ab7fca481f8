/**
 * agentMemory refuses, when it is made, a store its memory cannot sit beside: an in-memory SQLite
 * store (another connection to it is another database) or a store of the user's own. Before, both
 * were accepted and every run of an agent using the memory Failed at its first model call. And
 * the embedding settings (recall.dimensions, recall.embedTimeoutMs) given without recall.embed.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { InvalidConfigError } from '../../src/errors.js';
import { MemorySessionStore } from '../../src/index.js';
import { foreignStore } from '../support/stores.js';
import { agentMemory, deleteScope, exportScope, listScopes } from '../../src/memory.js';
import { SqliteSessionStore } from '../../src/sqlite.js';

describe('agentMemory: a store that cannot keep memory', () => {
  it('an in-memory SQLite store is refused when the memory is made', async () => {
    const store = new SqliteSessionStore({ path: ':memory:' });
    try {
      expect(() => agentMemory({ store })).toThrow(InvalidConfigError);
      expect(() => agentMemory({ store })).toThrow(/agentMemory: store: an in-memory SQLite store \(:memory:\) cannot keep memory beside its sessions: use a file/);
    } finally {
      await store.close();
    }
  });

  it('a store of the user’s own is refused when the memory is made', () => {
    expect(() => agentMemory({ store: foreignStore() })).toThrow(InvalidConfigError);
    expect(() => agentMemory({ store: foreignStore() })).toThrow(/agentMemory: store: memory is kept beside the sessions of a MemorySessionStore, a SqliteSessionStore or a PostgresSessionStore/);
  });

  it('a memory or SQLite file store is still taken', async () => {
    expect(agentMemory({ store: new MemorySessionStore() }).name).toBe('memory');
    const dir = mkdtempSync(join(tmpdir(), 'loopchart-memory-options-'));
    const store = new SqliteSessionStore({ path: join(dir, 'sessions.db') });
    try {
      expect(agentMemory({ store }).name).toBe('memory');
    } finally {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('agentMemory: embedding settings without an embed', () => {
  const store = new MemorySessionStore();
  const embed = async () => [1, 0, 0];

  it.each([
    ['recall.dimensions', { dimensions: 3 }],
    ['recall.embedTimeoutMs', { embedTimeoutMs: 5_000 }],
    ['recall.dimensions', { dimensions: 3, embedTimeoutMs: 5_000 }],
    ['recall.embedTimeoutMs', { embed: undefined, embedTimeoutMs: 5_000, prompt: 5 }],
  ])('%s, in recall %j, is refused when the memory is made (before: accepted and silently unused, recall ran on full text alone)', (key, recall) => {
    expect(() => agentMemory({ store, recall })).toThrow(InvalidConfigError);
    expect(() => agentMemory({ store, recall })).toThrow(`agentMemory: ${key}: applies to semantic recall only, and recall.embed is not given`);
  });

  it('is still taken beside an embed, and recall without them still works', () => {
    expect(agentMemory({ store, recall: { embed, dimensions: 3, embedTimeoutMs: 5_000 } }).name).toBe('memory');
    expect(agentMemory({ store, recall: { embed } }).name).toBe('memory');
    expect(agentMemory({ store, recall: { prompt: 0, tool: false } }).name).toBe('memory');
    expect(agentMemory({ store, recall: {} }).name).toBe('memory');
  });
});

describe('the privacy calls: a store that is no object', () => {
  it.each([['null', null], ['undefined', undefined]])('%s is an InvalidConfigError (before: a raw TypeError reading besideSessions)', async (_, store) => {
    for (const call of [() => exportScope(store as never, 'user:ada'), () => listScopes(store as never), () => deleteScope(store as never, 'user:ada')]) {
      const error = await call().then(() => undefined, (e: unknown) => e);
      expect(error).toBeInstanceOf(InvalidConfigError);
      expect((error as Error).message).toMatch(/memory is kept beside the sessions of a MemorySessionStore/);
    }
  });
});

/**
 * agentMemory refuses, when it is made, a store its memory cannot sit beside: an in-memory SQLite
 * store (another connection to it is another database) or a store of the user's own. Before, both
 * were accepted and every run of an agent using the memory Failed at its first model call. And
 * the embedding settings (recall.dimensions, recall.embedTimeoutMs) given without recall.embed. A
 * wrong `working` or `recall` says what was expected, and a misspelt key in them the closest one.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
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

describe('agentMemory: working and recall say what they expected', () => {
  const store = new MemorySessionStore();
  const refusal = (options: object): string => {
    try {
      agentMemory({ store, ...options } as never);
    } catch (error) {
      expect(error).toBeInstanceOf(InvalidConfigError);
      return (error as Error).message;
    }
    throw new Error('expected agentMemory to refuse');
  };

  it.each([
    [{ recall: true }, 'recall: expected false or an object ({ tool, prompt, embed, dimensions, embedTimeoutMs }), got true'],
    [{ working: true }, 'working: expected false or an object ({ schema, maxChars, instructions }), got true'],
    [{ recall: null }, 'recall: expected false or an object ({ tool, prompt, embed, dimensions, embedTimeoutMs }), got null'],
    [{ working: 'notes' }, 'working: expected false or an object ({ schema, maxChars, instructions }), got string'],
    [{ recall: [] }, 'recall: expected false or an object ({ tool, prompt, embed, dimensions, embedTimeoutMs }), got an array'],
    [{ recall: { embed: 5 } }, 'recall.embed: expected a function (text, { signal }) => Promise<number[]>, got number'],
    [{ recall: { tool: 'yes' } }, 'recall.tool: Invalid input: expected boolean, received string'],
    [{ recall: { prompt: '3' } }, 'recall.prompt: Invalid input: expected number, received string'],
    [{ working: { schema: 5 } }, 'working.schema: expected a zod schema, got number'],
    [{ working: { instructions: 5 } }, 'working.instructions: Invalid input: expected string, received number'],
  ])('%j is refused saying what was expected (before: "Invalid input" alone)', (options, message) => {
    expect(refusal(options)).toBe(`invalid agent configuration: agentMemory: ${message}`);
  });

  it.each([
    [{ recall: { promt: 3 } }, 'recall: unknown option "promt" — did you mean "prompt"?'],
    [{ recall: { embedTimeout: 5_000 } }, 'recall: unknown option "embedTimeout" — did you mean "embedTimeoutMs"?'],
    [{ working: { maxChar: 500 } }, 'working: unknown option "maxChar" — did you mean "maxChars"?'],
    [{ working: { colour: 'red' } }, 'working: unknown option "colour" (known: schema, maxChars, instructions)'],
  ])('a misspelt key in %j names the closest known one (before: "Unrecognized key" alone)', (options, message) => {
    expect(refusal(options)).toBe(`invalid agent configuration: agentMemory: ${message}`);
  });

  it('what was taken before is still taken', () => {
    for (const options of [{}, { recall: false as const }, { working: false as const }, { recall: undefined, working: undefined }, { working: {} }, { working: { schema: z.object({ name: z.string() }), maxChars: 500, instructions: 'Keep it short.' } }, { recall: { tool: false, prompt: 0 } }]) {
      expect(agentMemory({ store, ...options }).name).toBe('memory');
    }
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

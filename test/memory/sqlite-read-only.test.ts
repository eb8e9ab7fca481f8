/**
 * Memory of a SQLite store file this process may only read (a backup, mode 0444, a read-only
 * mount): listed, exported and searched, and a change (working memory, indexing, deleting a
 * scope) refused with the store's StoreError saying the file is read-only, the file left as it
 * was. Before, opening the memory's tables ran the write-ahead-log switch and made the tables
 * (writes): 'attempt to write a readonly database' before any read. A read-only file where memory
 * was never kept has no scopes.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { deleteScope, exportScope, listScopes } from '../../src/memory.js';
import { memoryBackend } from '../../src/memory/memory-store.js';
import { StoreError } from '../../src/stores/errors.js';
import { SqliteSessionStore } from '../../src/stores/sqlite.js';
import { main } from '../../src/cli/main.js';
import { readOnlyFiles, sqliteBackup } from '../stores/fixtures/read-only-file.js';

const root = mkdtempSync(join(tmpdir(), 'loopchart-memory-read-only-'));
const files = readOnlyFiles();
afterAll(() => {
  files.undo();
  rmSync(root, { recursive: true, force: true });
});

const entry = { sessionId: 's1', position: 0, role: 'user' as const, text: 'the invoice is overdue', at: 1_000, vector: [1, 0] };

/** A store file with memory kept (or none), as a backup tool leaves it (see `sqliteBackup`). */
const backupWith = (name: string, kept: boolean) =>
  sqliteBackup(join(root, `live-${name}`), join(root, name), async (writer) => {
    if (!kept) return;
    const backend = memoryBackend(writer);
    await backend.writeWorking('user:1', 'likes tea', 2_000);
    await backend.index('user:1', [entry]);
    await backend.close();
  });

describe('memory in a read-only SQLite store file', () => {
  it('is listed, exported and searched; a change is refused with a StoreError naming the read-only file, nothing changed', async (context) => {
    const file = await backupWith('kept.db', true);
    const why = files.makeReadOnly(file);
    if (why) return context.skip(why);
    const before = readFileSync(file);
    const store = new SqliteSessionStore({ path: file });
    const backend = memoryBackend(store);
    try {
      expect((await listScopes(store)).map((s) => [s.scope, s.entries, s.workingChars])).toEqual([['user:1', 1, 9]]);
      expect(await exportScope(store, 'user:1')).toMatchObject({ working: { content: 'likes tea' }, entries: [{ text: 'the invoice is overdue' }] });
      expect((await backend.search('user:1', ['invoice'], { limit: 5 })).map((hit) => hit.text)).toEqual(['the invoice is overdue']);
      expect((await backend.similar('user:1', [1, 0], { limit: 5 })).map((hit) => hit.text)).toEqual(['the invoice is overdue']);
      for (const write of [() => deleteScope(store, 'user:1'), () => backend.writeWorking('user:1', 'x', 3_000), () => backend.index('user:1', [{ ...entry, position: 1 }])]) {
        await expect(write()).rejects.toBeInstanceOf(StoreError);
        await expect(write()).rejects.toThrow(`SQLite store ${file} (memory): the file is read-only: it can be listed and loaded, not written; nothing was written`);
      }
    } finally {
      await backend.close();
      await store.close();
    }
    expect(readFileSync(file).equals(before)).toBe(true);
  });

  it('where memory was never kept has no scopes, an empty export and no hits, and is not changed', async (context) => {
    const file = await backupWith('none.db', false);
    const why = files.makeReadOnly(file);
    if (why) return context.skip(why);
    const before = readFileSync(file);
    const store = new SqliteSessionStore({ path: file });
    const backend = memoryBackend(store);
    try {
      expect(await listScopes(store)).toEqual([]);
      expect(await exportScope(store, 'user:1')).toEqual({ scope: 'user:1', working: null, entries: [] });
      expect(await backend.search('user:1', ['invoice'], { limit: 5 })).toEqual([]);
      expect(await backend.readWorking('user:1')).toBeNull();
    } finally {
      await backend.close();
      await store.close();
    }
    expect(readFileSync(file).equals(before)).toBe(true);
  });

  it('loopchart memory list --store BACKUP lists it', async (context) => {
    const file = await backupWith('cli.db', true);
    const why = files.makeReadOnly(file);
    if (why) return context.skip(why);
    const out: string[] = [];
    const err: string[] = [];
    const code = await main(['memory', 'list', '--store', file], { out: (line) => out.push(line), err: (line) => err.push(line) });
    expect({ code, err: err.join('\n') }).toEqual({ code: 0, err: '' });
    expect(out.join('\n')).toContain('user:1');
  });
});

/**
 * A SQLite store file this process may only read (a backup, a shared file of mode 0444, a
 * read-only mount) is listed and loaded; a write is refused with a StoreError saying the file is
 * read-only, and the file is left as it was. Before, opening it ran the write-ahead-log switch and
 * the migrations (writes) first: 'attempt to write a readonly database' before any read. A file of
 * an older layout is refused with a StoreError saying a writer must upgrade it, never migrated.
 *
 * The read-only condition is real (fixtures/read-only-file.ts): chmod 0444 as a normal user; as
 * root, whom a mode does not stop, an immutable file (chattr +i), checked to refuse a write first.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { StoreError, StoreUnavailableError } from '../../src/stores/errors.js';
import { SqliteSessionStore } from '../../src/stores/sqlite.js';
import { openSqlite } from '../../src/stores/sqlite-driver.js';
import { main } from '../../src/cli/main.js';
import { readOnlyFiles, sqliteBackup } from './fixtures/read-only-file.js';

const root = mkdtempSync(join(tmpdir(), 'loopchart-read-only-'));
const files = readOnlyFiles();
const makeReadOnly = files.makeReadOnly;
afterAll(() => {
  files.undo();
  rmSync(root, { recursive: true, force: true });
});

/** A copy of a store holding one session, as a backup tool leaves it (see `sqliteBackup`). */
const backup = (into: string) =>
  sqliteBackup(join(root, `live-${basename(into)}`), into, (writer) => writer.apply('kept', { expectedVersion: 0, state: { n: 1 }, append: [{ role: 'user', content: 'hi' }] }));

/** A file laid out as loopchart's first schema version left it (no trace table yet). */
async function writeOldLayout(file: string): Promise<void> {
  await new SqliteSessionStore({ path: file }).close();
  const db = openSqlite(file, { busyTimeoutMs: 1000 });
  db.exec("DROP TABLE trace; UPDATE meta SET value = '1' WHERE key = 'schema_version'");
  db.close();
}

describe('a read-only SQLite store file', () => {
  it.for([
    ['a backup (not in WAL mode) in a read-only folder', true],
    ['a WAL file of mode 0444', false],
  ] as const)('%s is listed and loaded; a write is refused with a StoreError naming the read-only file, nothing changed', async ([, inFolder], context) => {
    const folder = join(root, inFolder ? 'read-only-mount' : 'shared');
    mkdirSync(folder);
    const file = join(folder, 'store.db');
    if (inFolder) {
      await backup(file);
    } else {
      const writer = new SqliteSessionStore({ path: file });
      await writer.apply('kept', { expectedVersion: 0, state: { n: 1 }, append: [{ role: 'user', content: 'hi' }] });
      await writer.close();
    }
    const why = makeReadOnly(file, inFolder ? folder : undefined);
    if (why) return context.skip(why);
    const before = readFileSync(file);

    const store = new SqliteSessionStore({ path: file });
    expect((await store.list()).map((row) => row.sessionId)).toEqual(['kept']);
    expect(await store.load('kept')).toMatchObject({ version: 1, state: { n: 1 }, messages: [{ role: 'user', content: 'hi' }] });
    for (const write of [
      () => store.apply('kept', { expectedVersion: 1, state: { n: 2 } }),
      () => store.journalToolResult('kept', 'turn', { role: 'tool', toolCallId: 'c', toolName: 't', content: 'x' }),
      () => store.appendTrace('kept', [{ type: 'x' }]),
    ]) {
      const refused = write();
      await expect(refused).rejects.toBeInstanceOf(StoreError);
      await expect(write()).rejects.toThrow(`SQLite store ${file}: the file is read-only: it can be listed and loaded, not written; nothing was written`);
    }
    await store.close();
    expect(readFileSync(file).equals(before)).toBe(true);
  });

  it('a WAL file in a read-only folder says what SQLite lacks to read it (its -shm file) and what to do', async (context) => {
    // SQLite's own rule: a WAL database is read only with its -shm file beside it, or a folder that takes one.
    const folder = join(root, 'mount-wal');
    mkdirSync(folder);
    const file = join(folder, 'store.db');
    const writer = new SqliteSessionStore({ path: file });
    await writer.apply('kept', { expectedVersion: 0, state: { n: 1 } });
    await writer.close();
    const why = makeReadOnly(file, folder);
    if (why) return context.skip(why);
    expect(() => new SqliteSessionStore({ path: file })).toThrow(StoreUnavailableError);
    expect(() => new SqliteSessionStore({ path: file })).toThrow(/SQLite needs its -shm file beside it to read it, which this folder does not take; copy the file to a folder you may write, or back it up with VACUUM INTO/);
  });

  it('of an older schema is refused with a StoreError saying a writer must upgrade it, and not migrated', async (context) => {
    const file = join(root, 'old.db');
    await writeOldLayout(file);
    const why = makeReadOnly(file);
    if (why) return context.skip(why);
    const before = readFileSync(file);
    expect(() => new SqliteSessionStore({ path: file })).toThrow(StoreError);
    expect(() => new SqliteSessionStore({ path: file })).toThrow(/the file is read-only and holds store schema version 1, older than this loopchart's 2: it needs upgrading/);
    expect(readFileSync(file).equals(before)).toBe(true);
  });

  it('loopchart sessions list --store BACKUP lists it', async (context) => {
    const file = join(root, 'shared.db');
    await backup(file);
    const why = makeReadOnly(file);
    if (why) return context.skip(why);
    const out: string[] = [];
    const err: string[] = [];
    const code = await main(['sessions', 'list', '--store', file], { out: (line) => out.push(line), err: (line) => err.push(line) });
    expect({ code, err: err.join('\n') }).toEqual({ code: 0, err: '' });
    expect(out.join('\n')).toContain('kept');
  });
});

/**
 * Schedules of a SQLite store file this process may only read (a backup, mode 0444, a read-only
 * mount): listed, and a change refused with the store's StoreError saying the file is read-only,
 * the file left as it was. Before, opening the schedules' table ran the write-ahead-log switch and
 * made the table (writes): 'attempt to write a readonly database' before any read. A read-only
 * file where no schedule was ever made lists none.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { deleteSchedule, listSchedules, pauseSchedule, schedule } from '../../src/schedules.js';
import { StoreError } from '../../src/stores/errors.js';
import { SqliteSessionStore } from '../../src/stores/sqlite.js';
import { main } from '../../src/cli/main.js';
import { readOnlyFiles, sqliteBackup } from '../stores/fixtures/read-only-file.js';

const root = mkdtempSync(join(tmpdir(), 'loopchart-schedules-read-only-'));
const files = readOnlyFiles();
afterAll(() => {
  files.undo();
  rmSync(root, { recursive: true, force: true });
});

const nightly = { id: 'nightly', session: 'reports', agent: 'reporter', input: 'report', cron: '0 2 * * *', timezone: 'UTC' };

/** A store file with `made` schedules, as a backup tool leaves it (see `sqliteBackup`). */
const backupWith = (name: string, made: boolean) =>
  sqliteBackup(join(root, `live-${name}`), join(root, name), async (writer) => made && schedule(writer, nightly));

describe('schedules in a read-only SQLite store file', () => {
  it('are listed; adding, pausing and deleting one is refused with a StoreError naming the read-only file, nothing changed', async (context) => {
    const file = await backupWith('made.db', true);
    const why = files.makeReadOnly(file);
    if (why) return context.skip(why);
    const before = readFileSync(file);
    const store = new SqliteSessionStore({ path: file });
    try {
      expect((await listSchedules(store)).map((s) => s.id)).toEqual(['nightly']);
      for (const write of [() => schedule(store, { ...nightly, id: 'other' }), () => pauseSchedule(store, 'nightly'), () => deleteSchedule(store, 'nightly')]) {
        await expect(write()).rejects.toBeInstanceOf(StoreError);
        await expect(write()).rejects.toThrow(`SQLite store ${file} (schedules): the file is read-only: it can be listed and loaded, not written; nothing was written`);
      }
    } finally {
      await store.close();
    }
    expect(readFileSync(file).equals(before)).toBe(true);
  });

  it('where no schedule was ever made lists none, and is not changed', async (context) => {
    const file = await backupWith('none.db', false);
    const why = files.makeReadOnly(file);
    if (why) return context.skip(why);
    const before = readFileSync(file);
    const store = new SqliteSessionStore({ path: file });
    try {
      expect(await listSchedules(store)).toEqual([]);
    } finally {
      await store.close();
    }
    expect(readFileSync(file).equals(before)).toBe(true);
  });

  it('loopchart schedules list --store BACKUP lists them', async (context) => {
    const file = await backupWith('cli.db', true);
    const why = files.makeReadOnly(file);
    if (why) return context.skip(why);
    const out: string[] = [];
    const err: string[] = [];
    const code = await main(['schedules', 'list', '--store', file], { out: (line) => out.push(line), err: (line) => err.push(line) });
    expect({ code, err: err.join('\n') }).toEqual({ code: 0, err: '' });
    expect(out.join('\n')).toContain('nightly');
  });
});

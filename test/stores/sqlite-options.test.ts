/**
 * new SqliteSessionStore(options) checks its options before anything is opened: an
 * InvalidConfigError naming the option, never a raw TypeError from the driver, a value quietly
 * read as the default, or a file other than the one named.
 */
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { InvalidConfigError } from '../../src/errors.js';
import { SqliteSessionStore, type SqliteStoreOptions } from '../../src/stores/sqlite.js';

const dir = mkdtempSync(join(tmpdir(), 'loopchart-sqlite-options-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let files = 0;
const nextPath = () => join(dir, `s${files++}.db`);

describe('SqliteSessionStore: options refused before anything is opened', () => {
  it.each([
    ['options null (before: a raw TypeError)', null, /SqliteSessionStore: options must be a file path or an object/],
    ["options '' (a path, and an empty one)", '', /SqliteSessionStore: path must be a non-empty file path/],
    ['options 5', 5, /SqliteSessionStore: options must be a file path or an object \{ path\?/],
    ['options [] (before: the default file was opened)', [], /SqliteSessionStore: options must be a file path or an object/],
    ['path 5 (before: a raw TypeError from path.resolve)', { path: 5 }, /SqliteSessionStore: path must be a non-empty file path/],
    ["path '' (before: the working directory was opened as a database)", { path: '' }, /SqliteSessionStore: path must be a non-empty file path/],
    ['path with a NUL (before: the file cut at the NUL was opened)', { path: join(dir, 'a\0b.db') }, /SqliteSessionStore: path must not hold a NUL character/],
    ["synchronous 'normal' (before: FULL, silently)", { synchronous: 'normal' }, /SqliteSessionStore: synchronous must be 'FULL' or 'NORMAL'/],
    ["synchronous 'OFF' (before: FULL, silently)", { synchronous: 'OFF' }, /SqliteSessionStore: synchronous must be 'FULL' or 'NORMAL'/],
    ['busyTimeoutMs -1 (before: a raw TypeError from the driver)', { busyTimeoutMs: -1 }, /SqliteSessionStore: busyTimeoutMs must be an integer from 0 to 2147483647/],
    ['busyTimeoutMs NaN', { busyTimeoutMs: Number.NaN }, /busyTimeoutMs must be an integer from 0 to 2147483647/],
    ['busyTimeoutMs Infinity', { busyTimeoutMs: Infinity }, /busyTimeoutMs must be an integer from 0 to 2147483647/],
    ['busyTimeoutMs 3e9 (before: a raw RangeError from the driver)', { busyTimeoutMs: 3e9 }, /busyTimeoutMs must be an integer from 0 to 2147483647/],
    ['busyTimeoutMs 1.5', { busyTimeoutMs: 1.5 }, /busyTimeoutMs must be an integer from 0 to 2147483647/],
    ["busyTimeoutMs '100'", { busyTimeoutMs: '100' }, /busyTimeoutMs must be an integer from 0 to 2147483647/],
    ['busyTimeoutMs null (before: the default)', { busyTimeoutMs: null }, /busyTimeoutMs must be an integer from 0 to 2147483647/],
    ["driver 'sqlite3' (before: better-sqlite3 was used and store.driver said 'sqlite3')", { driver: 'sqlite3' }, /SqliteSessionStore: driver must be 'node:sqlite' or 'better-sqlite3'/],
    ["driver '' (before: the default)", { driver: '' }, /driver must be 'node:sqlite' or 'better-sqlite3'/],
  ])('%s', (_, options, problem) => {
    const given = typeof options === 'object' && options !== null && !Array.isArray(options) ? { path: nextPath(), ...options } : options;
    const before = readdirSync(dir).length;
    expect(() => new SqliteSessionStore(given as SqliteStoreOptions)).toThrow(InvalidConfigError);
    expect(() => new SqliteSessionStore(given as SqliteStoreOptions)).toThrow(problem);
    expect(readdirSync(dir)).toHaveLength(before);
  });

  it('valid values still open the store', async () => {
    for (const options of [{ synchronous: 'NORMAL' as const, busyTimeoutMs: 0 }, { busyTimeoutMs: 2 ** 31 - 1, synchronous: 'FULL' as const }, { busyTimeoutMs: undefined, driver: undefined }]) {
      const path = nextPath();
      const store = new SqliteSessionStore({ path, ...options });
      expect(await store.load('none')).toBeUndefined();
      await store.close();
      expect(existsSync(path)).toBe(true);
    }
    const memory = new SqliteSessionStore({ path: ':memory:' });
    await memory.close();
  });

  // Before, a string was taken for an options object with no path: the default
  // .loopchart/loopchart.db under the working directory was opened instead of the file named.
  it('a string is the path, as the drivers take it', async () => {
    const path = nextPath();
    const store = new SqliteSessionStore(path);
    expect(store.path).toBe(path);
    await store.close();
    expect(existsSync(path)).toBe(true);
  });
});

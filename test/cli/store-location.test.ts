/**
 * `--store` as the user types it (in process): what a message or the viewer prints of it never
 * holds a password, and a URL whose scheme is no store's is refused (it was a SQLite file path).
 * `--schema` that no PostgreSQL schema name can be is bad usage too.
 */
import { chmodSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { main } from '../../src/cli/main.js';
import { parseLocation } from '../../src/cli/store.js';

async function cli(...argv: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await main(argv, { out: (line) => out.push(line), err: (line) => err.push(line) });
  return { code, out: out.join('\n'), err: err.join('\n') };
}

describe('the label of a PostgreSQL URL', () => {
  it.each([
    ['postgres://user:hunter2@127.0.0.1:1/db', 'postgres://user:***@127.0.0.1:1/db'],
    ['postgresql://127.0.0.1:1/db?password=hunter2', 'postgresql://127.0.0.1:1/db?password=***'],
    ['postgres://u@h/db?sslmode=require&sslpassword=hunter2&application_name=x', 'postgres://u@h/db?sslmode=require&sslpassword=***&application_name=x'],
    ['postgres://u:hun@ter2@h/db', 'postgres://u:***@h/db'],
  ])('%s is shown as %s', (location, label) => {
    expect(parseLocation(location).label).toBe(label);
  });

  it('an unreachable server is reported without the password of the query string', async () => {
    const { code, err } = await cli('sessions', 'list', '--store', 'postgresql://127.0.0.1:1/db?password=hunter2');
    expect(code).toBe(1);
    expect(err).toMatch(/^loopchart: cannot reach the database at postgresql:\/\/127\.0\.0\.1:1\/db\?password=\*\*\*: /);
    expect(err).not.toContain('hunter2');
  });
});

describe('a URL that names no store', () => {
  it.each(['postgress://u:hunter2@host/db', 'mysql://host/db', 'pg://host/db', 'sqlite://data.db'])('%s is bad usage, its password hidden', async (location) => {
    const { code, out, err } = await cli('sessions', 'list', '--store', location);
    expect(code).toBe(2);
    expect(out).toBe('');
    expect(err.split('\n')[0]).toMatch(/^loopchart: the store .* \(--store or \$LOOPCHART_STORE\) is no store location: postgres:\/\/ or postgresql:\/\/ for PostgreSQL, a file path or sqlite:PATH for SQLite, or memory:$/);
    expect(err).not.toContain('hunter2');
  });
});

describe('a --schema no schema can be named', () => {
  it.each(['x"; drop table y; --', 'Upper', 'a'.repeat(64), 'a\u001b[2J', '9lives'])('%j is bad usage, exit 2, before any store is opened', async (schema) => {
    // Port 1: nothing listens, so an attempt to connect would say "cannot reach".
    const { code, out, err } = await cli('sessions', 'list', '--store', 'postgres://127.0.0.1:1/db', '--schema', schema);
    expect(out).toBe('');
    expect(err.split('\n')[0]).toMatch(/^loopchart: --schema ".*" is no schema name: lower-case letters, digits and _, not starting with a digit, at most 63$/);
    expect(err).not.toContain('\u001b');
    expect(code).toBe(2);
  });
});

describe('a --store that is a folder', () => {
  const folder = mkdtempSync(join(tmpdir(), 'loopchart-store-folder-'));
  afterAll(() => rmSync(folder, { recursive: true, force: true }));

  it.each([
    [['sessions', 'list']],
    [['schedules', 'add', '--session', 's', '--agent', 'a', '--input', 'Hi.', '--every', '60000']],
    [['memory', 'list']],
  ])('%j says it is a folder and which file to name, exit 1', async (argv) => {
    const { code, out, err } = await cli(...argv, '--store', folder);
    expect(out).toBe('');
    expect(err).toBe(`loopchart: the store ${folder} is a folder, not a SQLite file: name the file (--store ${join(folder, 'loopchart.db')})`);
    expect(code).toBe(1);
  });
});

describe('a --store path that cannot name a SQLite file', () => {
  const folder = mkdtempSync(join(tmpdir(), 'loopchart-store-path-'));
  afterAll(() => rmSync(folder, { recursive: true, force: true }));

  it.each([
    [['sessions', 'list']],
    [['schedules', 'add', '--session', 's', '--agent', 'a', '--input', 'Hi.', '--every', '60000']],
  ])('%j with a path ending in / says it names a folder, exit 1 (it said "no sessions: … does not exist", exit 0)', async (argv) => {
    const store = join(folder, 's.db') + '/';
    const { code, out, err } = await cli(...argv, '--store', store);
    expect(out).toBe('');
    expect(err).toBe(`loopchart: the store ${store} ends in '/', which names a folder, not a SQLite file: name the file (--store ${join(folder, 's.db')})`);
    expect(code).toBe(1);
  });

  it.each([
    ['a name longer than the file system allows', () => join(folder, `${'n'.repeat(300)}.db`)],
    ['a path longer than the file system allows', () => join(folder, ...Array.from({ length: 40 }, () => 'd'.repeat(200)), 's.db')],
  ])('%s is ENAMETOOLONG, exit 1 (it said "no sessions: … does not exist", exit 0)', async (_what, path) => {
    const store = path();
    const { code, out, err } = await cli('sessions', 'list', '--store', store);
    expect(out).toBe('');
    expect(err).toMatch(/^loopchart: the store .{1,120}… \(\d+ characters\) is a path too long for the file system \(ENAMETOOLONG\): a shorter path, or a name of at most 255 bytes in each folder$/);
    expect(code).toBe(1);
  });

  it('a loop of symbolic links, or a path through a file, says so, exit 1 (it said "no sessions: … does not exist", exit 0)', async () => {
    symlinkSync(join(folder, 'loop-b.db'), join(folder, 'loop-a.db'));
    symlinkSync(join(folder, 'loop-a.db'), join(folder, 'loop-b.db'));
    writeFileSync(join(folder, 'notes.txt'), 'not a folder');
    for (const [store, why] of [
      [join(folder, 'loop-a.db'), 'goes round a loop of symbolic links (ELOOP): point it at the file itself'],
      [join(folder, 'notes.txt', 's.db'), 'goes through a file as if it were a folder (ENOTDIR): check the path'],
    ] as const) {
      const { code, out, err } = await cli('sessions', 'list', '--store', store);
      expect({ code, out, err }).toEqual({ code: 1, out: '', err: `loopchart: the store ${store} ${why}` });
    }
  });

  // Root searches any folder whatever its mode: the condition is real only for another user.
  it.skipIf(process.getuid?.() === 0)('a path through a folder this user may not search says so, exit 1', async () => {
    const shut = join(folder, 'shut');
    mkdirSync(shut, { mode: 0o000 });
    try {
      const store = join(shut, 's.db');
      const { code, out, err } = await cli('sessions', 'list', '--store', store);
      expect({ code, out, err }).toEqual({ code: 1, out: '', err: `loopchart: the store ${store} is in a folder this user may not search (EACCES): check the folders' permissions` });
    } finally {
      chmodSync(shut, 0o755);
    }
  });
});

/**
 * A file the CLI is told to write (`view export -o FILE`, `eval -o`, `--results`), in process: one
 * that cannot be written (a folder, a folder that does not exist) is one line naming the path and
 * why, never "unexpected error"; one that is a SQLite database (the store itself, through a link
 * too) is refused before anything is written: it was overwritten, every session lost.
 */
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAgentMachine } from '../../machines/agent.machine.js';
import { main } from '../../src/cli/main.js';
import { scriptedModel } from '../../src/models/scripted.js';
import { DurableSession } from '../../src/sessions/durable-session.js';
import { SqliteSessionStore } from '../../src/stores/sqlite.js';

const dir = mkdtempSync(join(tmpdir(), 'loopchart-cli-write-'));
const db = join(dir, 'sessions.db');
beforeAll(async () => {
  const store = new SqliteSessionStore({ path: db });
  const session = await DurableSession.open({ machine: createAgentMachine({ model: scriptedModel([{ text: 'Done.' }]) }), store, sessionId: 'one' });
  session.send({ type: 'input', message: 'Hello.' });
  await session.whenIdle();
  await session.close();
  await store.close();
  mkdirSync(join(dir, 'a-folder'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function cli(...argv: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await main(argv, { out: (line) => out.push(line), err: (line) => err.push(line) });
  return { code, out: out.join('\n'), err: err.join('\n') };
}

describe('view export -o FILE that cannot be written', () => {
  it.each([
    ['a folder', 'a-folder', 'illegal operation on a directory (EISDIR)'],
    ['in a folder that does not exist', 'missing/run.html', 'no such file or directory (ENOENT)'],
  ])('%s: one line naming it and why, exit 1', async (_, target, why) => {
    const path = join(dir, target);
    const { code, out, err } = await cli('view', 'export', 'one', '-o', path, '--store', db);
    expect(out).toBe('');
    expect(err).toBe(`loopchart: cannot open ${path}: ${why}`);
    expect(code).toBe(1);
  });
});

describe('an output file that is a SQLite database', () => {
  const SQLITE_HEADER = 'SQLite format 3\0';
  const header = (path: string) => readFileSync(path).subarray(0, 16).toString('latin1');

  it.each([
    ['the store itself', (store: string) => store, ['view', 'export', 'one', '-o']],
    ['a link to the store', (store: string) => (symlinkSync(store, `${store}.link.html`), `${store}.link.html`), ['view', 'export', 'one', '-o']],
    ['eval --out', (store: string) => store, ['eval', join(dir, 'dataset'), '--agent', join(dir, 'agent.mjs'), '-o']],
    ['eval --results --fresh', (store: string) => store, ['eval', join(dir, 'dataset'), '--agent', join(dir, 'agent.mjs'), '--fresh', '--results']],
  ])('%s is refused, exit 2, the database untouched', async (_, target, argv) => {
    const store = join(dir, `copy-${Math.random().toString(36).slice(2)}.db`);
    copyFileSync(db, store);
    const before = readFileSync(store);
    const path = target(store);
    const { code, out, err } = await cli(...argv, path, '--store', store);
    expect(out).toBe('');
    expect(err).toBe(`loopchart: ${argv.at(-1)} ${path} is a SQLite database (a store?): it is not overwritten; name another file`);
    expect(code).toBe(2);
    expect(header(store)).toBe(SQLITE_HEADER);
    expect(readFileSync(store).equals(before)).toBe(true);
  });

  it("a store's write-ahead log (steps not yet in the database) is refused too", async () => {
    const wal = join(dir, 'copy.db-wal');
    writeFileSync(wal, Buffer.from([0x37, 0x7f, 0x06, 0x82, 0, 0x2d, 0xe2, 0x18, 0, 0, 0x10, 0, 0, 0, 0, 0, 1, 2, 3]));
    const { code, err } = await cli('view', 'export', 'one', '-o', wal, '--store', db);
    expect(err).toBe(`loopchart: -o ${wal} is a SQLite write-ahead log (a store?): it is not overwritten; name another file`);
    expect(code).toBe(2);
    expect(readFileSync(wal)).toHaveLength(19);
  });

  it('a file that is no database is overwritten as before', async () => {
    const page = join(dir, 'old.html');
    writeFileSync(page, 'old');
    const { code } = await cli('view', 'export', 'one', '-o', page, '--store', db);
    expect(code).toBe(0);
    expect(readFileSync(page, 'utf8')).toMatch(/^<!doctype html>/i);
  });
});

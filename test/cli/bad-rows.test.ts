/**
 * The CLI over a store with bad rows (a hand edit, a corrupt file, another tool): one bad row
 * never hides the others, a failure is exit 1 with nothing written, and stored text (a schedule's
 * id among it) never reaches the terminal raw. Real SQLite file, edited with better-sqlite3.
 */
import Database from 'better-sqlite3';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../../src/cli/main.js';
import { createAgentMachine, DurableSession } from '../../src/index.js';
import { listSchedules, schedule } from '../../src/schedules.js';
import { SqliteSessionStore } from '../../src/sqlite.js';
import { scriptedModel } from '../../src/testing.js';

/** An OSC title change, a screen clear and a colour: what a stored id must not do to a terminal. */
const ESC = '\x1b]0;PWNED\x07\x1b[2J\x1b[31mRED';

const dir = mkdtempSync(join(tmpdir(), 'loopchart-cli-bad-rows-'));
const db = join(dir, 'store.db');

async function cli(...argv: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await main([...argv, '--store', db], { out: (line) => out.push(line), err: (line) => err.push(line) });
  return { code, out: out.join('\n'), err: err.join('\n') };
}

beforeAll(async () => {
  const store = new SqliteSessionStore({ path: db });
  for (const id of ['good', 'late', 'corrupt']) {
    const session = await DurableSession.open({ machine: createAgentMachine({ model: scriptedModel([{ text: `answer of ${id}` }]) }), store, sessionId: id });
    session.send({ type: 'input', message: 'hi' });
    await session.whenIdle();
    await session.close();
  }
  await schedule(store, { id: 'nightly', session: 'good', agent: 'a', input: 'Report.', every: 60_000 });
  await schedule(store, { id: 'bad', session: 'good', agent: 'a', input: 'x', every: 60_000 });
  await store.close();
  const file = new Database(db);
  file.prepare("UPDATE sessions SET updated_at = 'yesterday' WHERE session_id = 'late'").run();
  file.prepare("UPDATE sessions SET state = '{not json' WHERE session_id = 'corrupt'").run();
  file.prepare("UPDATE schedules SET id = ?, row = ? WHERE id = 'bad'").run(`bad${ESC}`, JSON.stringify({ id: `bad${ESC}`, junk: true }));
  file.close();
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('the CLI over bad rows', () => {
  it('sessions list: a row whose time is not a time is listed with the others (before: RangeError, exit 1, nothing listed)', async () => {
    const { code, out } = await cli('sessions', 'list');
    expect(code).toBe(0);
    for (const id of ['good', 'late', 'corrupt']) expect(out).toContain(id);
  });

  it('schedules list: an unreadable row is a warning with its id escaped, the readable ones are listed', async () => {
    const { code, out, err } = await cli('schedules', 'list');
    expect(code).toBe(0);
    expect(out).toContain('nightly');
    expect(err).toMatch(/warning: .*bad\\x1b/);
    // Before: the raw title change and screen clear went to stderr through process.emitWarning.
    expect(`${out}${err}`).not.toContain('\x1b');
  });

  it("listSchedules' default report (what the viewer's /schedules uses) is one warning line with the id's control characters escaped", async () => {
    const store = new SqliteSessionStore({ path: db });
    try {
      const warned = new Promise<Error>((resolve) => process.once('warning', resolve));
      expect((await listSchedules(store)).map((s) => s.id)).toEqual(['nightly']);
      const { message } = await warned;
      expect(message).toContain("'bad\\u001b]0;PWNED\\u0007");
      expect(message).not.toMatch(/[\u0000-\u001f]/);
    } finally {
      await store.close();
    }
  });

  it('sessions rewind with a count past 2^53 is bad usage (exit 2), as any other count that is no whole number', async () => {
    for (const count of ['99999999999999999999', 'abc', '1e3']) expect([count, (await cli('sessions', 'rewind', 'good', count)).code]).toEqual([count, 2]);
  });

  it('view export of a corrupt session, or of an id that is no session id, fails with exit 1 and writes nothing', async () => {
    for (const id of ['corrupt', 'a\u0001b']) {
      const file = join(dir, `export-${id.length}.html`);
      const { code, err } = await cli('view', 'export', id, '-o', file);
      expect([id, code]).toEqual([id, 1]);
      expect(err).toMatch(/cannot be exported|invalid session id/);
      expect(existsSync(file)).toBe(false);
    }
    const file = join(dir, 'good.html');
    expect((await cli('view', 'export', 'good', '-o', file)).code).toBe(0);
    expect(existsSync(file)).toBe(true);
  });
});

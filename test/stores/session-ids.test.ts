/**
 * Bug 11: one session-id rule for every store, checked before any query. The conformance suite
 * (test/stores/conformance.ts, "session ids") runs it against memory, SQLite and PostgreSQL;
 * here: the rule itself, and the report's repro (two ids with different lone surrogates that
 * PostgreSQL stored as the same U+FFFD, so the second loaded the first's conversation).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { InvalidSessionIdError, MAX_SESSION_ID_LENGTH } from '../../src/stores/errors.js';
import { MemorySessionStore } from '../../src/stores/memory.js';
import { PostgresSessionStore } from '../../src/stores/postgres.js';
import type { SessionStore } from '../../src/stores/session-store.js';
import { SqliteSessionStore } from '../../src/stores/sqlite.js';
import { sessionIdProblem } from '../../src/stores/step.js';

describe('sessionIdProblem', () => {
  it('accepts well-formed ids up to the limit, astral characters included', () => {
    for (const id of ['a', 'support/42', 'x'.repeat(MAX_SESSION_ID_LENGTH), '😀', 'é', '\u{10FFFF}', '__proto__']) {
      expect(sessionIdProblem(id), id).toBeNull();
    }
  });

  it('refuses, naming why and where', () => {
    expect(sessionIdProblem('')).toBe('a session id must not be empty');
    expect(sessionIdProblem(42)).toBe('a session id must be a string');
    expect(sessionIdProblem('x'.repeat(MAX_SESSION_ID_LENGTH + 1))).toBe(`it is ${MAX_SESSION_ID_LENGTH + 1} code units long; the limit is ${MAX_SESSION_ID_LENGTH}`);
    expect(sessionIdProblem('ab\uD800')).toBe('it holds a lone surrogate at index 2 (not well-formed Unicode)');
    expect(sessionIdProblem('\uDC00')).toBe('it holds a lone surrogate at index 0 (not well-formed Unicode)');
    expect(sessionIdProblem('😀'.slice(0, 1) + 'x')).toMatch(/lone surrogate at index 0/);
    expect(sessionIdProblem('a\u0000')).toBe('it holds a control character at index 1');
    for (const c of ['\t', '\n', '\r', '\u001b', '\u007f', '\u0085', '\u009f']) expect(sessionIdProblem(`a${c}`)).toMatch(/control character/);
  });

  it('refuses bidirectional controls, which make an id read as another in a list (the CLI, the viewer)', () => {
    // 'user-\u202Eeci1a' shows as 'user-alice'.
    expect(sessionIdProblem('user-\u202Eeci1a')).toBe('it holds a bidirectional control (U+202E) at index 5');
    for (const c of ['\u200E', '\u200F', '\u061C', '\u202A', '\u202B', '\u202C', '\u202D', '\u2066', '\u2067', '\u2068', '\u2069']) {
      expect(sessionIdProblem(`a${c}b`), c.codePointAt(0)!.toString(16)).toMatch(/bidirectional control/);
    }
    // Other format characters are text: an emoji sequence joins with U+200D, Arabic or Hebrew ids need no control.
    for (const id of ['👩\u200D💻', 'שלום', 'مرحبا']) expect(sessionIdProblem(id), id).toBeNull();
  });
});

const root = mkdtempSync(join(tmpdir(), 'loopchart-ids-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const url = process.env.DATABASE_URL;
const stores: Array<[string, () => SessionStore, boolean]> = [
  ['memory', () => new MemorySessionStore(), true],
  ['sqlite', () => new SqliteSessionStore({ path: join(root, 'ids.db') }), true],
  ['postgres', () => new PostgresSessionStore({ connectionString: url!, schema: `lc_ids_${process.pid}` }), Boolean(url)],
];

describe.each(stores)('%s: ids that a database would merge are refused before they reach it', (_name, open, available) => {
  it.skipIf(!available)("'a\\uD800' and 'a\\uDBFF' never load each other's conversation", async () => {
    const store = open();
    try {
      for (const id of ['a\uD800', 'a\uDBFF']) {
        await expect(store.apply(id, { expectedVersion: 0, state: id })).rejects.toBeInstanceOf(InvalidSessionIdError);
        await expect(store.load(id)).rejects.toMatchObject({ code: 'InvalidSessionId' });
      }
      expect(await store.list()).toEqual([]);
      // The id a database would have merged them into stays its own session.
      await store.apply('a\uFFFD', { expectedVersion: 0, state: 'replacement char' });
      await expect(store.load('a\uDBFF')).rejects.toBeInstanceOf(InvalidSessionIdError);
      expect((await store.load('a\uFFFD'))?.state).toBe('replacement char');
    } finally {
      if (store instanceof PostgresSessionStore) {
        const pool = (store as unknown as { pool: { query(sql: string): Promise<unknown> } }).pool;
        await pool.query(`DROP SCHEMA IF EXISTS "lc_ids_${process.pid}" CASCADE`);
      }
      await store.close();
    }
  });
});

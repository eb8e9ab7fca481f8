import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { SqliteSessionStore } from '../../src/stores/sqlite.js';
import { describeSessionStoreConformance } from './conformance.js';

const root = mkdtempSync(join(tmpdir(), 'loopchart-sqlite-'));
let files = 0;

/** A raw connection for planting corrupt rows, opened and closed per write like a foreign tool would. */
function rawExec(path: string, sql: string, ...params: unknown[]): void {
  const db = new Database(path);
  try {
    const info = db.prepare(sql).run(...params);
    if (info.changes !== 1) throw new Error(`expected one row changed by ${sql}, got ${info.changes}`);
  } finally {
    db.close();
  }
}

describeSessionStoreConformance('sqlite', {
  async create() {
    const path = join(root, `store-${files++}.db`);
    return {
      store: new SqliteSessionStore({ path }),
      sibling: async () => new SqliteSessionStore({ path }),
      raw: {
        async setMessage(sessionId, position, text) {
          rawExec(path, 'UPDATE messages SET message = ? WHERE session_id = ? AND position = ?', text, sessionId, position);
        },
        async deleteMessage(sessionId, position) {
          rawExec(path, 'DELETE FROM messages WHERE session_id = ? AND position = ?', sessionId, position);
        },
        async insertMessage(sessionId, position, text) {
          rawExec(path, 'INSERT INTO messages (session_id, position, message) VALUES (?, ?, ?)', sessionId, position, text);
        },
        async setState(sessionId, text) {
          rawExec(path, 'UPDATE sessions SET state = ? WHERE session_id = ?', text, sessionId);
        },
        async setJournal(sessionId, turnKey, toolCallId, text) {
          rawExec(
            path,
            'UPDATE tool_journal SET result = ? WHERE session_id = ? AND turn_key = ? AND tool_call_id = ?',
            text,
            sessionId,
            turnKey,
            toolCallId,
          );
        },
      },
      async setSchemaVersion(version) {
        rawExec(path, "UPDATE meta SET value = ? WHERE key = 'schema_version'", version);
      },
      child: { kind: 'sqlite', path },
    };
  },
  async cleanup() {
    rmSync(root, { recursive: true, force: true });
  },
});

describe('sqlite: file setup', () => {
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it('defaults to .loopchart/loopchart.db under the working directory, creating the folder', async () => {
    const cwd = process.cwd();
    const dir = mkdtempSync(join(tmpdir(), 'loopchart-cwd-'));
    process.chdir(dir);
    try {
      const store = new SqliteSessionStore();
      expect(store.path).toBe(join(dir, '.loopchart', 'loopchart.db'));
      await store.apply('s', { expectedVersion: 0, state: 1 });
      await store.close();
      expect(existsSync(join(dir, '.loopchart', 'loopchart.db'))).toBe(true);
    } finally {
      process.chdir(cwd);
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('opens in WAL mode with the chosen synchronous level and a busy timeout', async () => {
    const path = join(root, 'pragmas.db');
    const full = new SqliteSessionStore({ path, busyTimeoutMs: 1234 });
    await full.close();
    const check = (synchronous: 'FULL' | 'NORMAL') => {
      const store = new SqliteSessionStore({ path, synchronous, busyTimeoutMs: 1234 });
      // Reach the connection the store configured: pragmas are per connection.
      const db = (store as unknown as { db: Database.Database }).db;
      expect(db.pragma('journal_mode', { simple: true })).toBe('wal');
      expect(db.pragma('synchronous', { simple: true })).toBe(synchronous === 'FULL' ? 2 : 1);
      expect(db.pragma('busy_timeout', { simple: true })).toBe(1234);
      return store.close();
    };
    await check('FULL');
    await check('NORMAL');
  });

  it('records the schema version in meta', async () => {
    const path = join(root, 'meta.db');
    await new SqliteSessionStore({ path }).close();
    const db = new Database(path, { readonly: true });
    expect(db.prepare("SELECT value FROM meta WHERE key = 'schema_version'").get()).toEqual({ value: '1' });
    db.close();
  });
});

import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { SqliteSessionStore } from '../../src/stores/sqlite.js';
import { SQLITE_SCHEMA_VERSION } from '../../src/stores/sqlite-schema.js';
import { defaultSqliteDriver, openSqlite, SqliteDriverUnavailableError, type SqliteDriverName } from '../../src/stores/sqlite-driver.js';
import { describeSessionStoreConformance } from './conformance.js';
import { availableSqliteDrivers } from './fixtures/sqlite-drivers.js';

const root = mkdtempSync(join(tmpdir(), 'loopchart-sqlite-'));
let files = 0;

const drivers = availableSqliteDrivers();

/** A raw connection for planting corrupt rows, opened and closed per write like a foreign tool would. */
function rawExec(driver: SqliteDriverName, path: string, sql: string, ...params: unknown[]): void {
  const db = openSqlite(path, { driver, busyTimeoutMs: 5000 });
  try {
    const info = db.prepare(sql).run(...params);
    if (info.changes !== 1) throw new Error(`expected one row changed by ${sql}, got ${info.changes}`);
  } finally {
    db.close();
  }
}

for (const driver of drivers) {
describeSessionStoreConformance(`sqlite (${driver})`, {
  async create() {
    const path = join(root, `store-${driver.replace(/\W/g, '')}-${files++}.db`);
    return {
      store: new SqliteSessionStore({ path, driver }),
      sibling: async () => new SqliteSessionStore({ path, driver }),
      raw: {
        async setMessage(sessionId, position, text) {
          rawExec(driver, path, 'UPDATE messages SET message = ? WHERE session_id = ? AND position = ?', text, sessionId, position);
        },
        async deleteMessage(sessionId, position) {
          rawExec(driver, path, 'DELETE FROM messages WHERE session_id = ? AND position = ?', sessionId, position);
        },
        async insertMessage(sessionId, position, text) {
          rawExec(driver, path, 'INSERT INTO messages (session_id, position, message) VALUES (?, ?, ?)', sessionId, position, text);
        },
        async setState(sessionId, text) {
          rawExec(driver, path, 'UPDATE sessions SET state = ? WHERE session_id = ?', text, sessionId);
        },
        async setJournal(sessionId, turnKey, toolCallId, text) {
          rawExec(
            driver,
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
        rawExec(driver, path, "UPDATE meta SET value = ? WHERE key = 'schema_version'", version);
      },
      child: { kind: 'sqlite', path, driver },
    };
  },
  async cleanup() {
    rmSync(root, { recursive: true, force: true });
  },
});
}

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

  it.each(drivers)('%s: opens in WAL mode with the chosen synchronous level and a busy timeout', async (driver) => {
    const path = join(root, `pragmas-${driver.replace(/\W/g, '')}.db`);
    const full = new SqliteSessionStore({ path, busyTimeoutMs: 1234, driver });
    await full.close();
    const check = (synchronous: 'FULL' | 'NORMAL') => {
      const store = new SqliteSessionStore({ path, synchronous, busyTimeoutMs: 1234, driver });
      expect(store.driver).toBe(driver);
      // Reach the connection the store configured: pragmas are per connection.
      const db = (store as unknown as { db: ReturnType<typeof openSqlite> }).db;
      const pragma = (name: string) => Object.values(db.prepare(`PRAGMA ${name}`).get() as object)[0];
      expect(pragma('journal_mode')).toBe('wal');
      expect(pragma('synchronous')).toBe(synchronous === 'FULL' ? 2 : 1);
      expect(pragma('busy_timeout')).toBe(1234);
      return store.close();
    };
    await check('FULL');
    await check('NORMAL');
  });

  it.each(drivers)('%s: records the schema version in meta', async (driver) => {
    const path = join(root, `meta-${driver.replace(/\W/g, '')}.db`);
    await new SqliteSessionStore({ path, driver }).close();
    const db = openSqlite(path, { driver, busyTimeoutMs: 1000 });
    expect({ ...(db.prepare("SELECT value FROM meta WHERE key = 'schema_version'").get() as object) }).toEqual({ value: String(SQLITE_SCHEMA_VERSION) });
    db.close();
  });

  it('one file, both drivers: what one writes the other reads', async () => {
    if (drivers.length < 2) return expect(drivers).toEqual([defaultSqliteDriver()]);
    const path = join(root, 'both.db');
    const writer = new SqliteSessionStore({ path, driver: 'better-sqlite3' });
    await writer.apply('s', { expectedVersion: 0, state: { n: 1 }, append: [{ role: 'user', content: 'hi' }] });
    await writer.close();
    const reader = new SqliteSessionStore({ path, driver: 'node:sqlite' });
    expect(await reader.load('s')).toMatchObject({ version: 1, state: { n: 1 }, messages: [{ role: 'user', content: 'hi' }] });
    await reader.close();
  });
});

describe('sqlite: the driver', () => {
  const [major, minor] = process.versions.node.split('.').map(Number) as [number, number];
  const hasNodeSqlite = major > 22 || (major === 22 && minor >= 13);

  it('defaults to node:sqlite where Node has it unflagged (22.13+), else better-sqlite3', () => {
    expect(defaultSqliteDriver()).toBe(hasNodeSqlite ? 'node:sqlite' : 'better-sqlite3');
    const store = new SqliteSessionStore({ path: ':memory:' });
    expect(store.driver).toBe(defaultSqliteDriver());
    return store.close();
  });

  it.skipIf(hasNodeSqlite)('asking for node:sqlite on an older Node is a typed error that names the way out', () => {
    const error = (() => {
      try {
        new SqliteSessionStore({ path: ':memory:', driver: 'node:sqlite' });
      } catch (e) {
        return e;
      }
    })();
    expect(error).toBeInstanceOf(SqliteDriverUnavailableError);
    // The version the README gives (Node 22.13+, where node:sqlite needs no flag).
    expect((error as Error).message).toMatch(/Node 22\.13 or later.*better-sqlite3/);
  });
});

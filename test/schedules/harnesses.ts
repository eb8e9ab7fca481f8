/**
 * The stores the schedule suite runs on, each made the same way for the plain and the `.timed`
 * files of test/schedules/{memory,sqlite,postgres}.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { MemorySessionStore } from '../../src/index.js';
import type { ScheduleRow } from '../../src/schedules/row.js';
import { scheduleBackend } from '../../src/schedules/schedules.js';
import { SqliteSessionStore } from '../../src/sqlite.js';
import { PostgresSessionStore } from '../../src/stores/postgres.js';
import { openSqlite } from '../../src/stores/sqlite-driver.js';
import type { ScheduleHarness } from './conformance.js';

/** Memory stores. A sibling is a second store over the same backing: the schedules live with the backing. */
export function memoryHarness(): ScheduleHarness {
  return {
    async create() {
      const store = new MemorySessionStore();
      return {
        store,
        sibling: async () => new MemorySessionStore(store.backing),
        raw: {
          // `insert` stores the JSON of what it is given, unchecked (rows are checked when read).
          async setRow(id, row) {
            const backend = scheduleBackend(store);
            await backend.delete(id);
            await backend.insert(row as ScheduleRow);
          },
        },
      };
    },
  };
}

/** A raw connection, opened and closed per write as a foreign tool's would be. */
function rawExec(path: string, sql: string, ...params: unknown[]): void {
  const db = openSqlite(path, { busyTimeoutMs: 5_000 });
  try {
    const info = db.prepare(sql).run(...params);
    if (Number(info.changes) !== 1) throw new Error(`expected one row changed by ${sql}, got ${info.changes}`);
  } finally {
    db.close();
  }
}

/** A new SQLite file per test, in a folder removed after the suite. */
export function sqliteHarness(): ScheduleHarness {
  const root = mkdtempSync(join(tmpdir(), 'loopchart-schedules-'));
  let files = 0;
  return {
    async create() {
      const path = join(root, `schedules-${files++}.db`);
      return {
        store: new SqliteSessionStore({ path }),
        sibling: async () => new SqliteSessionStore({ path }),
        raw: { setRow: async (id, row) => rawExec(path, 'UPDATE schedules SET row = ? WHERE id = ?', JSON.stringify(row), id) },
        tables: {
          setText: async (id, text) => rawExec(path, 'UPDATE schedules SET row = ? WHERE id = ?', text, id),
          setSchemaVersion: async (version) => rawExec(path, "UPDATE meta SET value = ? WHERE key = 'schedules_schema_version'", version),
        },
      };
    },
    async cleanup() {
      rmSync(root, { recursive: true, force: true });
    },
  };
}

/**
 * A real server at `url` (`eval "$(bash .ci/postgres.sh)"` starts a throwaway one; CI sets
 * DATABASE_URL), as test/stores/postgres.test.ts uses it. Every test gets a schema of its own,
 * dropped at the end.
 */
export function postgresHarness(url: string): ScheduleHarness {
  const admin = new pg.Pool({ connectionString: url, max: 2 });
  const schemas: string[] = [];
  const prefix = `lc_sched_${process.pid}_${Date.now().toString(36)}`;

  async function exec(schema: string, sql: string, ...params: unknown[]): Promise<void> {
    const result = await admin.query(sql.replaceAll('$s', `"${schema}"`), params);
    if (result.rowCount !== 1) throw new Error(`expected one row changed by ${sql}, got ${result.rowCount}`);
  }

  return {
    async create() {
      const schema = `${prefix}_${schemas.length}`;
      schemas.push(schema);
      const open = () => new PostgresSessionStore({ connectionString: url, schema, max: 4 });
      return {
        store: open(),
        sibling: async () => open(),
        raw: { setRow: (id, row) => exec(schema, 'UPDATE $s.schedules SET row = $1 WHERE id = $2', JSON.stringify(row), id) },
        tables: {
          setText: (id, text) => exec(schema, 'UPDATE $s.schedules SET row = $1 WHERE id = $2', text, id),
          setSchemaVersion: (version) => exec(schema, "UPDATE $s.meta SET value = $1 WHERE key = 'schedules_schema_version'", version),
        },
      };
    },
    async cleanup() {
      for (const schema of schemas) await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await admin.end();
    },
  };
}

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SqliteSessionStore } from '../../src/sqlite.js';
import { openSqlite } from '../../src/stores/sqlite-driver.js';
import { describeScheduleConformance } from './conformance.js';

const root = mkdtempSync(join(tmpdir(), 'loopchart-schedules-'));
let files = 0;

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

describeScheduleConformance('sqlite', {
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
});

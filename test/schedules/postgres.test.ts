import pg from 'pg';
import { describe } from 'vitest';
import { PostgresSessionStore } from '../../src/stores/postgres.js';
import { describeScheduleConformance } from './conformance.js';

/**
 * Runs against a real server when DATABASE_URL is set (`eval "$(bash .ci/postgres.sh)"` starts a
 * throwaway one; CI sets it), as test/stores/postgres.test.ts does. Every test gets a schema of its
 * own, dropped at the end.
 */
const url = process.env.DATABASE_URL;

describe.skipIf(!url)('postgres', () => {
  const admin = new pg.Pool({ connectionString: url, max: 2 });
  const schemas: string[] = [];
  const prefix = `lc_sched_${process.pid}_${Date.now().toString(36)}`;

  async function exec(schema: string, sql: string, ...params: unknown[]): Promise<void> {
    const result = await admin.query(sql.replaceAll('$s', `"${schema}"`), params);
    if (result.rowCount !== 1) throw new Error(`expected one row changed by ${sql}, got ${result.rowCount}`);
  }

  describeScheduleConformance('postgres', {
    async create() {
      const schema = `${prefix}_${schemas.length}`;
      schemas.push(schema);
      const open = () => new PostgresSessionStore({ connectionString: url!, schema, max: 4 });
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
  });
});

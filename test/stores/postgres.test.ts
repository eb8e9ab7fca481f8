import pg from 'pg';
import { describe } from 'vitest';
import { PostgresSessionStore } from '../../src/stores/postgres.js';
import { describeSessionStoreConformance } from './conformance.js';

/**
 * Runs against a real server when DATABASE_URL is set (`eval "$(bash .ci/postgres.sh)"`
 * starts a throwaway one). Every test gets a schema of its own, dropped at the end, so
 * reruns start clean and parallel runs cannot meet.
 */
const url = process.env.DATABASE_URL;

describe.skipIf(!url)('postgres', () => {
  const admin = new pg.Pool({ connectionString: url, max: 2 });
  const schemas: string[] = [];
  const prefix = `lc_test_${process.pid}_${Date.now().toString(36)}`;

  async function exec(schema: string, sql: string, ...params: unknown[]): Promise<void> {
    const result = await admin.query(sql.replaceAll('$s', `"${schema}"`), params);
    if (result.rowCount !== 1) throw new Error(`expected one row changed by ${sql}, got ${result.rowCount}`);
  }

  describeSessionStoreConformance('postgres', {
    async create() {
      const schema = `${prefix}_${schemas.length}`;
      schemas.push(schema);
      const open = () => new PostgresSessionStore({ connectionString: url!, schema, max: 4 });
      const store = open();
      return {
        store,
        sibling: async () => open(),
        raw: {
          setMessage: (sessionId, position, text) =>
            exec(schema, 'UPDATE $s.messages SET message = $1 WHERE session_id = $2 AND position = $3', text, sessionId, position),
          deleteMessage: (sessionId, position) =>
            exec(schema, 'DELETE FROM $s.messages WHERE session_id = $1 AND position = $2', sessionId, position),
          insertMessage: (sessionId, position, text) =>
            exec(schema, 'INSERT INTO $s.messages (session_id, position, message) VALUES ($1, $2, $3)', sessionId, position, text),
          setState: (sessionId, text) => exec(schema, 'UPDATE $s.sessions SET state = $1 WHERE session_id = $2', text, sessionId),
          setJournal: (sessionId, turnKey, toolCallId, text) =>
            exec(
              schema,
              'UPDATE $s.tool_journal SET result = $1 WHERE session_id = $2 AND turn_key = $3 AND tool_call_id = $4',
              text,
              sessionId,
              turnKey,
              toolCallId,
            ),
        },
        async setSchemaVersion(version) {
          await store.list(); // the schema is created on first use
          await exec(schema, "UPDATE $s.meta SET value = $1 WHERE key = 'schema_version'", version);
        },
        child: { kind: 'postgres', url: url!, schema },
      };
    },
    async cleanup() {
      for (const schema of schemas) await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await admin.end();
    },
  });
});

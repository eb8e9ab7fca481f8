import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { createAgentMachine } from '../../machines/agent.machine.js';
import { agentMemory } from '../../src/memory.js';
import { memoryBackend } from '../../src/memory/memory-store.js';
import type { ModelRequest } from '../../src/model.js';
import { DurableSession } from '../../src/sessions/durable-session.js';
import { scriptedModel } from '../../src/testing.js';
import { StoreSchemaVersionError } from '../../src/stores/errors.js';
import { PostgresSessionStore } from '../../src/stores/postgres.js';
import { describeMemoryConformance } from './conformance.js';
import { unreadableRowsCostOnlyThemselves } from './unreadable.js';

/**
 * Runs against a real server when DATABASE_URL is set (`eval "$(bash .ci/postgres.sh)"` starts a
 * throwaway one; CI sets it), as test/stores/postgres.test.ts does. Every test gets a schema of its
 * own, dropped at the end.
 */
const url = process.env.DATABASE_URL;

describe.skipIf(!url)('postgres', () => {
  const admin = new pg.Pool({ connectionString: url, max: 2 });
  const schemas: string[] = [];
  const prefix = `lc_mem_${process.pid}_${Date.now().toString(36)}`;
  const nextSchema = () => {
    const schema = `${prefix}_${schemas.length}`;
    schemas.push(schema);
    return schema;
  };
  const open = (schema: string) => new PostgresSessionStore({ connectionString: url!, schema, max: 4 });

  describeMemoryConformance('postgres', {
    async create() {
      const schema = nextSchema();
      return { store: open(schema), sibling: async () => open(schema) };
    },
  });

  afterAll(async () => {
    for (const schema of schemas) await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await admin.end();
  });

  it("keeps its tables in the store's schema, and deleting a scope takes its words out of the full-text index", async () => {
    const schema = nextSchema();
    const store = open(schema);
    const backend = memoryBackend(store);
    try {
      await backend.index('user:ada', [
        { sessionId: 's1', position: 0, role: 'user', text: 'The zanzibar lighthouse', at: 1, vector: [1, 0] },
        { sessionId: 's1', position: 1, role: 'assistant', text: 'A lighthouse indeed', at: 2 },
      ]);
      await backend.index('user:bob', [{ sessionId: 's1', position: 0, role: 'user', text: 'Another lighthouse', at: 3 }]);
      // Read beside the backend, as the table holds them: every lexeme of the indexed words, by document count.
      const lexemes = async () => {
        const found = await admin.query<{ word: string; ndoc: number }>(`SELECT word, ndoc FROM ts_stat('SELECT words FROM "${schema}".memory_entries') WHERE word IN ('zanzibar', 'lighthouse', 'indeed')`);
        return Object.fromEntries(found.rows.map((r) => [r.word, r.ndoc]));
      };
      const matches = async (word: string) =>
        Number((await admin.query<{ n: string }>(`SELECT count(*) AS n FROM "${schema}".memory_entries WHERE words @@ to_tsquery('simple', $1)`, [word])).rows[0]!.n);
      expect(await lexemes()).toEqual({ zanzibar: 1, lighthouse: 3, indeed: 1 });
      expect(await backend.deleteScope('user:ada')).toBe(2);
      expect(await lexemes()).toEqual({ lighthouse: 1 });
      expect(await matches('zanzibar')).toBe(0);
      expect(await matches('lighthouse')).toBe(1);
      // Beside the sessions' own tables; the GIN index is on the words; vectors are float8[].
      const tables = await admin.query<{ table_name: string }>('SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY table_name', [schema]);
      expect(tables.rows.map((r) => r.table_name)).toEqual(expect.arrayContaining(['sessions', 'messages', 'meta', 'memory_working', 'memory_entries']));
      const index = await admin.query<{ indexdef: string }>("SELECT indexdef FROM pg_indexes WHERE schemaname = $1 AND indexname = 'memory_entries_words'", [schema]);
      expect(index.rows[0]?.indexdef).toMatch(/USING gin \(words\)/);
      const vector = await admin.query<{ data_type: string }>("SELECT data_type FROM information_schema.columns WHERE table_schema = $1 AND table_name = 'memory_entries' AND column_name = 'vector'", [schema]);
      expect(vector.rows[0]?.data_type).toBe('ARRAY');
    } finally {
      await backend.close();
      await store.close();
    }
  });

  it('a scope with a lone surrogate is refused: it would share the memory of the scope its UTF-8 text is (U+FFFD in its place)', async () => {
    const schema = nextSchema();
    const store = open(schema);
    const memory = agentMemory({ store });
    try {
      // Alice's scope holds U+FFFD; the other one, a lone surrogate there, is another user's key.
      const alice = createAgentMachine({ model: scriptedModel([{ toolCalls: [{ name: 'memory_update', args: { memory: 'Card ends 4242.' } }] }, { text: 'Saved.' }]), operations: [memory] });
      const first = await DurableSession.open({ machine: alice, store, sessionId: 'alice-1', scope: 'user:alice\ufffd' });
      first.send({ type: 'input', message: 'My door code is zebra7.' });
      expect((await first.whenIdle())?.outcome.type).toBe('Completed');
      await first.close();
      const sent: ModelRequest[] = [];
      const other = createAgentMachine({ model: scriptedModel([(request) => (sent.push(request), { text: 'Hello.' })]), operations: [memory] });
      const opened = await DurableSession.open({ machine: other, store, sessionId: 'other-1', scope: 'user:alice\ud800' }).then(
        async (session) => {
          session.send({ type: 'input', message: 'What is my door code, zebra7?' });
          await session.whenIdle();
          await session.close();
          return 'opened';
        },
        (error: unknown) => (error as Error).message,
      );
      expect(JSON.stringify(sent)).not.toContain('4242');
      expect(JSON.stringify(sent)).not.toContain('door code is');
      expect(opened).toMatch(/input\.scope: .*lone surrogate/);
      await expect(memoryBackend(store).exportScope('user:alice\ufffd')).resolves.toMatchObject({ working: { content: 'Card ends 4242.' } });
    } finally {
      await memory.close();
      await store.close();
    }
  });

  it('a stored row this version does not read (a text that is not JSON, a document that is no text) costs its own recall, not the run', async () => {
    const schema = nextSchema();
    const store = open(schema);
    try {
      await unreadableRowsCostOnlyThemselves(store, async () => {
        await admin.query(`UPDATE "${schema}".memory_entries SET text_json = 'not json' WHERE session_id = 'ada-1' AND position = 0`);
        await admin.query(`UPDATE "${schema}".memory_working SET content_json = '{"a":1}' WHERE scope = 'user:ada'`);
      });
    } finally {
      await store.close();
    }
  });

  it('refuses tables of another layout version', async () => {
    const schema = nextSchema();
    const store = open(schema);
    try {
      await memoryBackend(store).writeWorking('s', 'kept', 1);
      await admin.query(`UPDATE "${schema}".meta SET value = '99' WHERE key = 'memory_schema_version'`);
      await expect(memoryBackend(store).readWorking('s')).rejects.toSatisfy((e: unknown) => StoreSchemaVersionError.isInstance(e));
    } finally {
      await store.close();
    }
  });
});

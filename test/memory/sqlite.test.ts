import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createAgentMachine } from '../../machines/agent.machine.js';
import { InvalidConfigError } from '../../src/errors.js';
import { agentMemory, exportScope } from '../../src/memory.js';
import type { Model, ModelRequest } from '../../src/model.js';
import { DurableSession } from '../../src/sessions/durable-session.js';
import { memoryBackend } from '../../src/memory/memory-store.js';
import { SqliteSessionStore } from '../../src/sqlite.js';
import { StoreSchemaVersionError } from '../../src/stores/errors.js';
import { openSqlite } from '../../src/stores/sqlite-driver.js';
import { availableSqliteDrivers } from '../stores/fixtures/sqlite-drivers.js';
import { describeMemoryConformance } from './conformance.js';
import { unreadableRowsCostOnlyThemselves } from './unreadable.js';

const root = mkdtempSync(join(tmpdir(), 'loopchart-memory-'));
let files = 0;
const nextPath = () => join(root, `memory-${files++}.db`);

// Each driver this Node can run (CI's Node 20 leg: better-sqlite3; its Node 24 leg: both), the
// memory's connection opened with the store's.
for (const driver of availableSqliteDrivers()) {
  describeMemoryConformance(`sqlite (${driver})`, {
    async create() {
      const path = nextPath();
      return { store: new SqliteSessionStore({ path, driver }), sibling: async () => new SqliteSessionStore({ path, driver }) };
    },
  });
}

/** A raw connection to the file, as a foreign tool's would be. */
function raw<T>(path: string, work: (db: ReturnType<typeof openSqlite>) => T): T {
  const db = openSqlite(path, { busyTimeoutMs: 5_000 });
  try {
    return work(db);
  } finally {
    db.close();
  }
}

describe('memory on SQLite', () => {
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it("keeps its tables in the store's file, and deleting a scope takes its words out of the FTS5 index", async () => {
    const path = nextPath();
    const store = new SqliteSessionStore({ path });
    const backend = memoryBackend(store);
    try {
      await backend.index('user:ada', [
        { sessionId: 's1', position: 0, role: 'user', text: 'The zanzibar lighthouse', at: 1 },
        { sessionId: 's1', position: 1, role: 'assistant', text: 'A lighthouse indeed', at: 2 },
      ]);
      await backend.index('user:bob', [{ sessionId: 's1', position: 0, role: 'user', text: 'Another lighthouse', at: 3 }]);
      // Read beside the backend, as the index holds it: the words of both scopes, by document count.
      const vocabulary = () =>
        raw(path, (db) => {
          db.exec("CREATE VIRTUAL TABLE IF NOT EXISTS temp.memory_vocab USING fts5vocab(main, 'memory_fts', 'row')");
          return Object.fromEntries((db.prepare("SELECT term, doc FROM temp.memory_vocab WHERE term IN ('zanzibar', 'lighthouse', 'indeed')").all() as { term: string; doc: number }[]).map((r) => [r.term, r.doc]));
        });
      const matches = (word: string) => raw(path, (db) => (db.prepare('SELECT count(*) AS n FROM memory_fts WHERE memory_fts MATCH ?').get(`"${word}"`) as { n: number }).n);
      expect(vocabulary()).toEqual({ zanzibar: 1, lighthouse: 3, indeed: 1 });
      expect(await backend.deleteScope('user:ada')).toBe(2);
      expect(vocabulary()).toEqual({ lighthouse: 1 });
      expect(matches('zanzibar')).toBe(0);
      expect(matches('lighthouse')).toBe(1);
      expect(raw(path, (db) => db.prepare('SELECT count(*) AS n FROM memory_entries').get())).toEqual({ n: 1 });
      // The sessions' own tables are there too: one file.
      const tables = raw(path, (db) => (db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").all() as { name: string }[]).map((r) => r.name));
      expect(tables).toEqual(expect.arrayContaining(['sessions', 'messages', 'meta', 'memory_working', 'memory_entries', 'memory_fts']));
    } finally {
      await backend.close();
      await store.close();
    }
  });

  it('a second session reads what the first saved and recalls what it said, from the file', async () => {
    const path = nextPath();
    const requests: ModelRequest[] = [];
    const model = (first: boolean): Model => ({
      name: 'walk',
      async generate(request) {
        requests.push(request);
        const saves = first && !request.messages.some((m) => m.role === 'tool');
        return saves
          ? { message: { role: 'assistant', content: '', toolCalls: [{ id: 'c1', name: 'memory_update', args: { memory: 'Name: Ada.' } }] }, finishReason: 'tool-calls' }
          : { message: { role: 'assistant', content: 'Noted.' }, finishReason: 'stop' };
      },
    });
    for (const [sessionId, message] of [['ada-1', 'I am Ada and I build the Lovelace engine.'], ['ada-2', 'Which engine do I build?']] as const) {
      // A store per session, as a process per conversation would open.
      const store = new SqliteSessionStore({ path });
      const machine = createAgentMachine({ model: model(sessionId === 'ada-1'), operations: [agentMemory({ store })] });
      const session = await DurableSession.open({ machine, store, sessionId, scope: 'user:ada' });
      session.send({ type: 'input', message });
      expect((await session.whenIdle())?.outcome.type).toBe('Completed');
      await session.close();
      await store.close();
    }
    const system = requests.at(-1)!.messages.filter((m) => m.role === 'system').map((m) => m.content).join('\n');
    expect(system).toContain('Name: Ada.');
    expect(system).toContain('I am Ada and I build the Lovelace engine.');
  });

  it("close() releases the memory's own connection to the file (the last one out removes the WAL), and the memory opens again on its next use", async () => {
    const path = nextPath();
    const store = new SqliteSessionStore({ path });
    const memory = agentMemory({ store });
    const reply: Model = { name: 'x', generate: async () => ({ message: { role: 'assistant', content: 'Hi.' }, finishReason: 'stop' }) };
    const run = async (sessionId: string) => {
      const session = await DurableSession.open({ machine: createAgentMachine({ model: reply, operations: [memory] }), store, sessionId, scope: 'user:ada' });
      session.send({ type: 'input', message: 'Hello there.' });
      await session.whenIdle();
      await session.close();
    };
    await run('s1');
    await memory.close();
    await run('s2');
    expect((await exportScope(store, 'user:ada')).entries.map((e) => e.sessionId)).toEqual(['s1', 's1', 's2', 's2']);
    await memory.close();
    await store.close();
    expect(existsSync(`${path}-wal`)).toBe(false);
  });

  it('refuses an in-memory store: another connection to it would be another database', () => {
    const store = new SqliteSessionStore({ path: ':memory:' });
    try {
      expect(() => memoryBackend(store)).toThrow(InvalidConfigError);
      expect(() => memoryBackend(store)).toThrow(/in-memory SQLite store \(:memory:\) cannot keep memory/);
    } finally {
      void store.close();
    }
  });

  it('a stored row this version does not read (a role it does not know, a document that is no text) costs its own recall, not the run', async () => {
    const path = nextPath();
    const store = new SqliteSessionStore({ path });
    try {
      await unreadableRowsCostOnlyThemselves(store, async () =>
        raw(path, (db) => {
          db.prepare("UPDATE memory_entries SET role = 'system' WHERE session_id = 'ada-1' AND position = 0").run();
          db.prepare("UPDATE memory_working SET content = x'00' WHERE scope = 'user:ada'").run();
        }),
      );
    } finally {
      await store.close();
    }
  });

  it('refuses tables of another layout version, and makes them once', async () => {
    const path = nextPath();
    const store = new SqliteSessionStore({ path });
    await memoryBackend(store).close();
    // A second backend on the file finds the tables made and its version right.
    const again = memoryBackend(store);
    await again.writeWorking('s', 'kept', 1);
    await again.close();
    raw(path, (db) => db.prepare("UPDATE meta SET value = '99' WHERE key = 'memory_schema_version'").run());
    expect(() => memoryBackend(store)).toThrow(StoreSchemaVersionError);
    await store.close();
  });
});

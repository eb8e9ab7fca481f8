/**
 * Memory's storage (issue 45's measure): recall latency and index size for 10,000 sessions of one
 * scope (4 entries each) on SQLite and PostgreSQL, against the memory store's in-process search
 * on the same entries in the same run; and the bytes a DurableSession step writes to a SQLite
 * file with memory on, against off. PostgreSQL runs when DATABASE_URL is set.
 *
 *   DATABASE_URL=postgres://… npx tsx bench/memory.bench.ts
 */
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import { z } from 'zod';
import { createAgentMachine } from '../machines/agent.machine.js';
import { agentMemory } from '../src/memory.js';
import type { MemoryBackend, MemoryEntry } from '../src/memory/memory-backend.js';
import { memoryBackend } from '../src/memory/memory-store.js';
import { searchTerms } from '../src/memory/search-terms.js';
import type { Model } from '../src/model.js';
import { DurableSession } from '../src/sessions/durable-session.js';
import { MemorySessionStore } from '../src/stores/memory.js';
import { PostgresSessionStore } from '../src/stores/postgres.js';
import { openSqlite } from '../src/stores/sqlite-driver.js';
import { SqliteSessionStore } from '../src/stores/sqlite.js';
import { defineTool } from '../src/tools/define-tool.js';
import { median, printTable } from './support.js';

const SESSIONS = 10_000;
const ENTRIES_PER_SESSION = 4;
const QUERIES = 50;
const VOCABULARY = 5_000;
const SCOPE = 'user:bench';

/** A seeded generator (mulberry32): the same texts in every run. */
function random(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Words drawn as in prose: the k-th most common with weight 1/k (Zipf). */
function wordSource(seed: number): () => string {
  const next = random(seed);
  const syllables = ['ka', 'lo', 'mi', 'ne', 'ru', 'sa', 'ti', 'vo', 'ze', 'pa', 'gu', 'de'];
  const words = Array.from({ length: VOCABULARY }, (_, i) => {
    let word = '';
    for (let n = i + 12; n > 0; n = Math.floor(n / 12)) word += syllables[n % 12];
    return word;
  });
  const cumulative: number[] = [];
  let sum = 0;
  for (let k = 1; k <= VOCABULARY; k++) cumulative.push((sum += 1 / k));
  return () => {
    const x = next() * sum;
    let lo = 0;
    let hi = VOCABULARY - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (cumulative[mid]! < x) lo = mid + 1;
      else hi = mid;
    }
    return words[lo]!;
  };
}

/** Session i's four entries: user and assistant turns of 12 to 40 words. */
function sessionEntries(word: () => string, next: () => number, i: number): MemoryEntry[] {
  return Array.from({ length: ENTRIES_PER_SESSION }, (_, position) => ({
    sessionId: `session-${i}`,
    position,
    role: position % 2 === 0 ? 'user' : 'assistant',
    text: Array.from({ length: 12 + Math.floor(next() * 29) }, word).join(' ') + '.',
    at: 1_700_000_000_000 + i * 1_000 + position,
  }));
}

/** The median time (ms) of one search per query, after two unmeasured ones. */
async function recallMs(backend: MemoryBackend, queries: readonly string[]): Promise<number> {
  for (const query of queries.slice(0, 2)) await backend.search(SCOPE, searchTerms(query), { limit: 3 });
  const times: number[] = [];
  for (const query of queries) {
    const started = performance.now();
    await backend.search(SCOPE, searchTerms(query), { limit: 3, excludeSession: 'now' });
    times.push(performance.now() - started);
  }
  return median(times);
}

interface Subject {
  name: string;
  backend: MemoryBackend;
  /** After the entries are in, before the searches: what a server would have done by then (ANALYZE). */
  settle?(): Promise<void>;
  /** Bytes the memory takes where it is kept (null: not on disk). */
  size(): Promise<{ total: number; detail: string } | null>;
  close(): Promise<void>;
}

/** Copies the WAL into the file and empties it (every other connection on the file is idle). */
function checkpoint(path: string): void {
  const db = openSqlite(path, { busyTimeoutMs: 5_000 });
  try {
    db.exec('PRAGMA wal_checkpoint(TRUNCATE)');
  } finally {
    db.close();
  }
  if (fileBytes(`${path}-wal`) !== 0) throw new Error(`the WAL of ${path} was not emptied`);
}

const fileBytes = (path: string): number => {
  try {
    return statSync(path).size;
  } catch {
    return 0;
  }
};

async function subjects(dir: string, url: string | undefined): Promise<Subject[]> {
  const memoryStore = new MemorySessionStore();
  const path = join(dir, 'recall.db');
  const sqliteStore = new SqliteSessionStore({ path });
  // The file as the store and the memory make it, before any entry: what the entries add is measured.
  const sqliteBackend = memoryBackend(sqliteStore);
  checkpoint(path);
  const emptyBytes = fileBytes(path);
  const list: Subject[] = [
    { name: 'memory store (in process, baseline)', backend: memoryBackend(memoryStore), size: async () => null, close: async () => memoryStore.close() },
    {
      name: 'SQLite (FTS5)',
      backend: sqliteBackend,
      async size() {
        checkpoint(path);
        const db = openSqlite(path, { busyTimeoutMs: 5_000 });
        try {
          const page = (db.prepare('PRAGMA page_size').get() as { page_size: number }).page_size;
          // The FTS5 index's own pages: its segments (data) and their b-tree (idx).
          const fts = db.prepare("SELECT (SELECT count(*) FROM memory_fts_data) AS data, (SELECT sum(length(block)) FROM memory_fts_data) AS bytes").get() as { data: number; bytes: number };
          return { total: fileBytes(path) - emptyBytes, detail: `file ${(fileBytes(path) / 1e6).toFixed(1)} MB, ${page}-byte pages; FTS5 segments ${(fts.bytes / 1e6).toFixed(1)} MB in ${fts.data} blocks` };
        } finally {
          db.close();
        }
      },
      async close() {
        await sqliteBackend.close();
        await sqliteStore.close();
      },
    },
  ];
  if (url) {
    const schema = `lc_membench_${process.pid}`;
    const store = new PostgresSessionStore({ connectionString: url, schema, max: 4 });
    const admin = new pg.Pool({ connectionString: url, max: 1 });
    list.push({
      name: 'PostgreSQL (tsvector, GIN)',
      backend: memoryBackend(store),
      async settle() {
        // Autovacuum analyzes a table that grew this much; done here so the planner has its statistics.
        await admin.query(`VACUUM ANALYZE "${schema}".memory_entries`);
      },
      async size() {
        const found = await admin.query<{ total: string; gin: string; heap: string }>(
          `SELECT pg_total_relation_size($1::regclass) + pg_total_relation_size($2::regclass) AS total,
                  pg_relation_size($3::regclass) AS gin, pg_relation_size($1::regclass) AS heap`,
          [`"${schema}".memory_entries`, `"${schema}".memory_working`, `"${schema}".memory_entries_words`],
        );
        const row = found.rows[0]!;
        return { total: Number(row.total), detail: `heap ${(Number(row.heap) / 1e6).toFixed(1)} MB, GIN ${(Number(row.gin) / 1e6).toFixed(1)} MB (pg_total_relation_size)` };
      },
      async close() {
        await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
        await admin.end();
        await store.close();
      },
    });
  }
  return list;
}

/** Recall latency and index size for 10,000 sessions of one scope. */
async function recall(dir: string, url: string | undefined): Promise<void> {
  const list = await subjects(dir, url);
  try {
    const word = wordSource(1);
    const next = random(2);
    const sessions = Array.from({ length: SESSIONS }, (_, i) => sessionEntries(word, next, i));
    const textBytes = sessions.flat().reduce((sum, entry) => sum + Buffer.byteLength(entry.text), 0);
    // Typical questions: three words as prose draws them. The worst: the three most common words, in nearly every entry.
    const queryWord = wordSource(3);
    const typical = Array.from({ length: QUERIES }, () => `What did I say about ${queryWord()}, ${queryWord()} and ${queryWord()}?`);
    const common = sessions.flat().flatMap((entry) => entry.text.slice(0, -1).split(' '));
    const counts = new Map<string, number>();
    for (const w of common) counts.set(w, (counts.get(w) ?? 0) + 1);
    const top = [...counts].sort((a, b) => b[1] - a[1]).slice(0, 3).map(([w]) => w);
    const worst = Array.from({ length: 11 }, () => top.join(' '));
    const rows: (string | number)[][] = [];
    let baseline: { typical: number; worst: number } | undefined;
    for (const subject of list) {
      const started = performance.now();
      // One index() per session, as the operation indexes a conversation.
      for (const entries of sessions) await subject.backend.index(SCOPE, entries);
      const indexUs = ((performance.now() - started) * 1000) / SESSIONS;
      await subject.settle?.();
      const ms = { typical: await recallMs(subject.backend, typical), worst: await recallMs(subject.backend, worst) };
      baseline ??= ms;
      const size = await subject.size();
      rows.push([
        subject.name,
        ms.typical,
        `${(ms.typical / baseline.typical).toFixed(2)}x`,
        ms.worst,
        `${(ms.worst / baseline.worst).toFixed(2)}x`,
        Math.round(indexUs),
        size ? `${(size.total / 1e6).toFixed(1)} MB (${Math.round(size.total / (SESSIONS * ENTRIES_PER_SESSION))} B/entry)` : 'n/a',
        size?.detail ?? '',
      ]);
    }
    printTable(
      `loopchart/memory: recall over ${SESSIONS.toLocaleString('en')} sessions of one scope (${(SESSIONS * ENTRIES_PER_SESSION).toLocaleString('en')} entries, ${(textBytes / 1e6).toFixed(1)} MB of text); ms: median of ${QUERIES} searches (limit 3), ratio to the memory store`,
      ['backend', 'ms, 3 prose words', 'ratio', 'ms, 3 commonest words', 'ratio', 'µs per session indexed', 'size', 'where'],
      rows,
    );
  } finally {
    for (const subject of list) await subject.close();
  }
}

const RUNS_PER_SESSION = 2;
const MEASURED_SESSIONS = 20;
const EARLIER_SESSIONS = 200;

/** Each run: a lookup, then an answer. */
const benchModel: Model = {
  name: 'bench',
  async generate(request) {
    const lastUser = request.messages.findLastIndex((m) => m.role === 'user');
    if (!request.messages.slice(lastUser).some((m) => m.role === 'tool')) {
      return { message: { role: 'assistant', content: '', toolCalls: [{ id: `c${lastUser}`, name: 'lookup', args: { topic: 'engine' } }] }, finishReason: 'tool-calls' };
    }
    return { message: { role: 'assistant', content: 'The Lovelace engine uses a difference gear train; the mill holds forty digits per column. '.repeat(2) }, finishReason: 'stop' };
  },
};
const lookup = defineTool({ name: 'lookup', description: 'Looks a part up.', input: z.object({ topic: z.string() }), execute: ({ topic }) => `${topic}: ${'specification text '.repeat(20)}` });

/** Bytes a step writes to the SQLite file (WAL growth from an empty WAL) and gives the store, memory on or off. */
async function bytesPerStep(dir: string, memory: boolean): Promise<{ steps: number; wal: number; given: number; memoryRows: number }> {
  const path = join(dir, `steps-${memory ? 'on' : 'off'}.db`);
  const store = new SqliteSessionStore({ path });
  // The scope's earlier sessions are in the file either way: with memory on, recall finds them.
  const history = memoryBackend(store);
  const word = wordSource(4);
  const next = random(5);
  for (let i = 0; i < EARLIER_SESSIONS; i++) await history.index(SCOPE, sessionEntries(word, next, i));
  await history.close();
  checkpoint(path);
  let steps = 0;
  let given = 0;
  let wal = 0;
  const apply = store.apply.bind(store);
  store.apply = async (sessionId, write) => {
    steps++;
    given += Buffer.byteLength(JSON.stringify(write));
    return apply(sessionId, write);
  };
  const machine = createAgentMachine({ model: benchModel, instructions: 'You answer questions about engines.', tools: [lookup], operations: memory ? [agentMemory({ store })] : [] });
  for (let s = 0; s < MEASURED_SESSIONS; s++) {
    const session = await DurableSession.open({ machine, store, sessionId: `measured-${s}`, scope: SCOPE });
    for (let run = 0; run < RUNS_PER_SESSION; run++) {
      session.send({ type: 'input', message: `What did we say about ${word()} and ${word()} for the engine?` });
      await session.whenIdle();
    }
    await session.close();
    // Per session, the WAL's size, then emptied: it grows by what is written, until an auto-checkpoint (1,000 pages) starts it over.
    const grown = fileBytes(`${path}-wal`);
    if (grown >= 1_000 * (4_096 + 24)) throw new Error(`the WAL reached ${grown} bytes, past an auto-checkpoint: measure fewer runs per session`);
    wal += grown;
    checkpoint(path);
  }
  const db = openSqlite(path, { busyTimeoutMs: 5_000 });
  const memoryRows = (db.prepare("SELECT count(*) AS n FROM memory_entries WHERE session_id LIKE 'measured-%'").get() as { n: number }).n;
  db.close();
  await store.close();
  return { steps, wal, given, memoryRows };
}

async function writes(dir: string): Promise<void> {
  const off = await bytesPerStep(dir, false);
  const on = await bytesPerStep(dir, true);
  const runs = MEASURED_SESSIONS * RUNS_PER_SESSION;
  const row = (name: string, r: typeof off) => [
    name,
    r.steps,
    r.memoryRows,
    Math.round(r.wal / r.steps),
    `${(r.wal / r.steps / (off.wal / off.steps)).toFixed(2)}x`,
    Math.round(r.given / r.steps),
    `${(r.given / r.steps / (off.given / off.steps)).toFixed(2)}x`,
    Math.round(r.wal / runs),
    `${(r.wal / off.wal).toFixed(2)}x`,
  ];
  printTable(
    `loopchart/memory: bytes per DurableSession step on SQLite, ${MEASURED_SESSIONS} sessions x ${RUNS_PER_SESSION} runs (lookup + answer), ${EARLIER_SESSIONS} earlier sessions in the scope; WAL: the file's write-ahead log grown from empty, per session (pages as written, the memory's own transactions included); given: JSON of the steps handed to the store`,
    ['memory', 'steps', 'entries indexed', 'WAL bytes / step', 'ratio', 'given bytes / step', 'ratio', 'WAL bytes / run', 'ratio'],
    [row('off', off), row('on (working + recall, prompt 3)', on)],
  );
}

export async function run(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'loopchart-memory-bench-'));
  const url = process.env.DATABASE_URL;
  try {
    await recall(dir, url);
    await writes(dir);
    if (!url) console.log('\n(PostgreSQL skipped: set DATABASE_URL, e.g. eval "$(bash .ci/postgres.sh)")');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  await run();
}

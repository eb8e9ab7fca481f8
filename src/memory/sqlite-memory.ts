import { openSqliteBeside, type BesideConnection } from '../stores/beside-sessions.js';
import type { SqliteConnection, SqliteDriverName, SqliteStatement } from '../stores/sqlite-driver.js';
import { exported, MemoryEntrySchema, MemoryHitSchema, readEach, readWorkingDoc, type MemoryBackend, type MemoryEntry, type MemoryHit, type OnUnreadable, type ScopeExport, type ScopeSummary, type SearchOptions, type WorkingDoc } from './memory-backend.js';
import { isPlainTerm, wordsOf } from './search-terms.js';
import { mostSimilar } from './similarity.js';

/**
 * Memory of a `SqliteSessionStore`, in tables of the same file, on a connection of its own (the
 * store's is its own business), with the store's driver. Full-text search is FTS5 (built into
 * both drivers' SQLite: node:sqlite and better-sqlite3), ranked by bm25(); similarity is ranked
 * in process over the scope's vectors (`mostSimilar`).
 *
 * The FTS5 table is contentless and holds the entry's words as `wordsOf` gives them (NFKC,
 * lower-cased letter-and-digit runs), the words `searchTerms` makes of a query: the three
 * backends agree on what a word is, whatever SQLite's tokenizer would fold. Its rowid is the
 * entry's `id`, an INTEGER PRIMARY KEY so VACUUM keeps it; `contentless_delete` lets a deleted
 * entry leave the index by rowid (SQLite 3.43 or later, which both drivers have).
 *
 * bm25() weighs a word by how rare it is in the whole index, every scope's entries counted: a
 * scope's ranking can shift with another scope's words, never its hits (every query is filtered
 * by scope).
 */

/** The version of these tables' layout, in the store's `meta` table under its own key. */
const SCHEMA_VERSION = 1;
const META_KEY = 'memory_schema_version';

interface EntryRow {
  session_id: string;
  position: number;
  role: 'user' | 'assistant';
  text: string;
  at: number;
  vector: Uint8Array | null;
}

interface WorkingRow {
  content: string;
  version: number;
  updated_at: number;
}

const workingOf = (row: WorkingRow): WorkingDoc => ({ content: row.content, version: row.version, updatedAt: row.updated_at });

/** A vector as stored: its float64s, little-endian, so it comes back bit for bit. */
function vectorBlob(vector: readonly number[]): Uint8Array {
  const bytes = new Uint8Array(vector.length * 8);
  const view = new DataView(bytes.buffer);
  vector.forEach((x, i) => view.setFloat64(i * 8, x, true));
  return bytes;
}

function vectorOf(blob: Uint8Array): number[] {
  const view = new DataView(blob.buffer, blob.byteOffset, blob.byteLength);
  return Array.from({ length: blob.byteLength / 8 }, (_, i) => view.getFloat64(i * 8, true));
}

function entryOf(row: EntryRow): MemoryEntry {
  const entry: MemoryEntry = { sessionId: row.session_id, position: row.position, role: row.role, text: row.text, at: row.at };
  if (row.vector !== null) entry.vector = vectorOf(row.vector);
  return entry;
}

/** A term as an FTS5 string: quoted, so no word is read as an operator (NEAR, OR, AND, NOT). */
const ftsString = (term: string): string => `"${term.replaceAll('"', '""')}"`;

/** The memory's tables in the store's file (`main`), or their empty stand-ins for a read-only file (`temp`). */
const memoryTables = (schema: 'main' | 'temp') => `
  CREATE TABLE ${schema}.memory_working (
    scope      TEXT PRIMARY KEY,
    content    TEXT NOT NULL,
    -- content.length as JavaScript counts it, for listScopes without reading the document.
    chars      INTEGER NOT NULL,
    version    INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
  );
  CREATE TABLE ${schema}.memory_entries (
    id         INTEGER PRIMARY KEY,
    scope      TEXT NOT NULL,
    session_id TEXT NOT NULL,
    position   INTEGER NOT NULL,
    role       TEXT NOT NULL,
    text       TEXT NOT NULL,
    at         INTEGER NOT NULL,
    vector     BLOB,
    UNIQUE (scope, session_id, position)
  );
  CREATE VIRTUAL TABLE ${schema}.memory_fts USING fts5(words, content = '', contentless_delete = 1, tokenize = 'unicode61 remove_diacritics 0');
`;

export class SqliteMemory implements MemoryBackend {
  readonly #db: SqliteConnection;
  /** Refuses a write to a file this process may only read, before it reaches SQLite. */
  readonly #refuseIfReadOnly: BesideConnection['refuseIfReadOnly'];
  readonly #sql: Record<'readWorking' | 'writeWorking' | 'insertEntry' | 'insertWords' | 'search' | 'vectors' | 'scopes' | 'entries' | 'deleteWords' | 'deleteEntries' | 'deleteWorking', SqliteStatement>;

  constructor(path: string, driver: SqliteDriverName) {
    const opened = openSqliteBeside(path, { feature: 'memory', metaKey: META_KEY, version: SCHEMA_VERSION, create: memoryTables, driver });
    this.#db = opened.db;
    this.#refuseIfReadOnly = opened.refuseIfReadOnly;
    try {
      this.#sql = this.#prepare();
    } catch (error) {
      this.#db.close();
      throw error;
    }
  }

  #prepare() {
    const db = this.#db;
    const columns = 'session_id, position, role, text, at';
    return {
      readWorking: db.prepare('SELECT content, version, updated_at FROM memory_working WHERE scope = ?'),
      writeWorking: db.prepare(
        `INSERT INTO memory_working (scope, content, chars, version, updated_at) VALUES (?, ?, ?, 1, ?)
         ON CONFLICT (scope) DO UPDATE SET content = excluded.content, chars = excluded.chars, version = memory_working.version + 1, updated_at = excluded.updated_at
         RETURNING content, version, updated_at`,
      ),
      // Nothing returned for an entry already indexed: its words are in the index already.
      insertEntry: db.prepare(
        'INSERT INTO memory_entries (scope, session_id, position, role, text, at, vector) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING id',
      ),
      insertWords: db.prepare('INSERT INTO memory_fts (rowid, words) VALUES (?, ?)'),
      // CROSS JOIN keeps FTS5 the outer loop: one full-text query, its hits then looked up by id
      // (as a plain JOIN the planner may walk the scope's entries and run the MATCH once for each).
      search: db.prepare(
        `SELECT e.session_id, e.position, e.role, e.text, e.at, bm25(memory_fts) AS rank
           FROM memory_fts CROSS JOIN memory_entries e ON e.id = memory_fts.rowid
          WHERE memory_fts MATCH ? AND e.scope = ? AND e.session_id IS NOT ?
          ORDER BY rank, e.at DESC LIMIT ?`,
      ),
      // Vectors of another length (another embedding) are left in the table, not read.
      vectors: db.prepare(`SELECT ${columns}, vector FROM memory_entries WHERE scope = ? AND length(vector) = ? AND session_id IS NOT ?`),
      scopes: db.prepare(
        `SELECT scope, SUM(chars) AS chars, SUM(entries) AS entries, SUM(sessions) AS sessions, MAX(updated_at) AS updated_at FROM (
           SELECT scope, chars, 0 AS entries, 0 AS sessions, updated_at FROM memory_working
           UNION ALL
           SELECT scope, 0, COUNT(*), COUNT(DISTINCT session_id), MAX(at) FROM memory_entries GROUP BY scope
         ) GROUP BY scope`,
      ),
      entries: db.prepare(`SELECT ${columns}, vector FROM memory_entries WHERE scope = ? ORDER BY id`),
      deleteWords: db.prepare('DELETE FROM memory_fts WHERE rowid IN (SELECT id FROM memory_entries WHERE scope = ?)'),
      deleteEntries: db.prepare('DELETE FROM memory_entries WHERE scope = ?'),
      deleteWorking: db.prepare('DELETE FROM memory_working WHERE scope = ?'),
    };
  }

  async readWorking(scope: string, onUnreadable?: OnUnreadable): Promise<WorkingDoc | null> {
    const row = this.#sql.readWorking.get(scope) as WorkingRow | undefined;
    return row ? readWorkingDoc(() => workingOf(row), onUnreadable) : null;
  }

  async writeWorking(scope: string, content: string, at: number): Promise<WorkingDoc> {
    this.#refuseIfReadOnly();
    return workingOf(this.#sql.writeWorking.get(scope, content, content.length, at) as WorkingRow);
  }

  async index(scope: string, entries: readonly MemoryEntry[]): Promise<void> {
    if (entries.length === 0) return;
    this.#refuseIfReadOnly();
    // One transaction: an entry and its words are in the index together, or neither is.
    this.#db.transaction('immediate', () => {
      for (const entry of entries) {
        const vector = entry.vector ? vectorBlob(entry.vector) : null;
        const added = this.#sql.insertEntry.get(scope, entry.sessionId, entry.position, entry.role, entry.text, entry.at, vector) as { id: number } | undefined;
        if (added) this.#sql.insertWords.run(added.id, wordsOf(entry.text).join(' '));
      }
    });
  }

  async search(scope: string, terms: readonly string[], options: SearchOptions): Promise<MemoryHit[]> {
    const plain = terms.filter(isPlainTerm);
    if (plain.length === 0) return [];
    const rows = this.#sql.search.all(plain.map(ftsString).join(' OR '), scope, options.excludeSession ?? null, options.limit) as (Omit<EntryRow, 'vector'> & { rank: number })[];
    // bm25() is lower for a better match; a hit's score is higher for one.
    return readEach(rows, (row) => ({ sessionId: row.session_id, position: row.position, role: row.role, text: row.text, at: row.at, score: -row.rank }), MemoryHitSchema, options.onUnreadable);
  }

  async similar(scope: string, vector: readonly number[], options: SearchOptions): Promise<MemoryHit[]> {
    const rows = this.#sql.vectors.all(scope, vector.length * 8, options.excludeSession ?? null) as EntryRow[];
    return mostSimilar(readEach(rows, entryOf, MemoryEntrySchema, options.onUnreadable), vector, options.limit);
  }

  async listScopes(): Promise<ScopeSummary[]> {
    const rows = this.#sql.scopes.all() as { scope: string; chars: number; entries: number; sessions: number; updated_at: number }[];
    return rows.map((row) => ({ scope: row.scope, workingChars: row.chars, entries: row.entries, sessions: row.sessions, updatedAt: new Date(row.updated_at) }));
  }

  async exportScope(scope: string): Promise<ScopeExport> {
    // One snapshot: the document and the entries as they were at one moment.
    const { working, rows } = this.#db.transaction('deferred', () => ({
      working: this.#sql.readWorking.get(scope) as WorkingRow | undefined,
      rows: this.#sql.entries.all(scope) as EntryRow[],
    }));
    // Each row checked as recall checks it: a role or a column this version does not read is left out and named.
    const problems: string[] = [];
    const onUnreadable = (problem: string) => void problems.push(problem);
    return exported(scope, working ? readWorkingDoc(() => workingOf(working), onUnreadable) : null, readEach(rows, entryOf, MemoryEntrySchema, onUnreadable), problems);
  }

  async deleteScope(scope: string): Promise<number> {
    this.#refuseIfReadOnly();
    return this.#db.transaction('immediate', () => {
      // The words first, found through the entries they index.
      this.#sql.deleteWords.run(scope);
      const removed = Number(this.#sql.deleteEntries.run(scope).changes);
      this.#sql.deleteWorking.run(scope);
      return removed;
    });
  }

  async close(): Promise<void> {
    this.#db.close();
  }
}

import { postgresBeside, type BesideTransaction, type PostgresTables } from '../stores/beside-sessions.js';
import { exported, MemoryEntrySchema, MemoryHitSchema, readEach, readWorkingDoc, type MemoryBackend, type MemoryEntry, type MemoryHit, type OnUnreadable, type ScopeExport, type ScopeSummary, type SearchOptions, type WorkingDoc } from './memory-backend.js';
import { isPlainTerm, wordsOf } from './search-terms.js';
import { mostSimilar } from './similarity.js';

/**
 * Memory of a `PostgresSessionStore`, in tables of its schema, on its pool (every call one
 * transaction through the store's `besideSessions`, so its timeouts and typed errors hold here).
 *
 * Text is stored as JSON text: a PostgreSQL `text` cannot hold NUL, and a message may. Full-text
 * search reads a `tsvector` of the entry's words as `wordsOf` gives them (NFKC, lower-cased
 * letter-and-digit runs), made with the 'simple' configuration and GIN-indexed: the words
 * `searchTerms` makes of a query, whatever the server's locale (in the C locale PostgreSQL
 * lower-cases ASCII only). A search is `to_tsquery('simple', 'a | b')`, its text a parameter,
 * ranked by `ts_rank` per term weighted by how rare the term is among the scope's entries (its
 * idf, counted through the GIN index first: `ts_rank` alone does not prefer rarer terms).
 *
 * Vectors are `float8[]`, ranked in process (`mostSimilar`) over the scope's vectors of the
 * query's length: pgvector is not used (CI's server has no `vector` extension to test it on).
 */

/** The version of these tables' layout, in the store's `meta` table under its own key. */
const SCHEMA_VERSION = 1;
const META_KEY = 'memory_schema_version';

interface WorkingRow {
  content_json: string;
  version: number;
  updated_at: string;
}

interface EntryRow {
  session_id: string;
  position: number;
  role: 'user' | 'assistant';
  text_json: string;
  /** bigint: pg gives it as text; a time in ms fits a double exactly. */
  at: string;
  vector?: number[] | null | undefined;
}

const workingOf = (row: WorkingRow): WorkingDoc => ({ content: JSON.parse(row.content_json) as string, version: row.version, updatedAt: Number(row.updated_at) });

function entryOf(row: EntryRow): MemoryEntry {
  const entry: MemoryEntry = { sessionId: row.session_id, position: row.position, role: row.role, text: JSON.parse(row.text_json) as string, at: Number(row.at) };
  if (row.vector) entry.vector = row.vector;
  return entry;
}

/** A vector as a float8[] literal: JavaScript's shortest round-trip digits, read back exactly. */
const arrayLiteral = (vector: readonly number[]): string => `{${vector.join(',')}}`;

/** The memory tables in the store's schema (`s`: the schema, quoted). */
const MEMORY_TABLES = (s: string): string => `
  CREATE TABLE ${s}.memory_working (
    scope        text PRIMARY KEY,
    content_json text NOT NULL,
    -- content.length as JavaScript counts it, for listScopes without reading the document.
    chars        integer NOT NULL,
    version      integer NOT NULL,
    updated_at   bigint NOT NULL
  );
  CREATE TABLE ${s}.memory_entries (
    scope      text NOT NULL,
    session_id text NOT NULL,
    position   integer NOT NULL,
    -- The order entries were indexed in, for exportScope.
    id         bigint GENERATED ALWAYS AS IDENTITY,
    role       text NOT NULL,
    text_json  text NOT NULL,
    at         bigint NOT NULL,
    vector     float8[],
    words      tsvector NOT NULL,
    PRIMARY KEY (scope, session_id, position)
  );
  CREATE INDEX memory_entries_words ON ${s}.memory_entries USING gin (words);
`;

export class PostgresMemory implements MemoryBackend {
  /** One transaction, the tables made (or their version checked) first, once per backend. */
  readonly #tx: BesideTransaction;

  constructor(store: PostgresTables) {
    this.#tx = postgresBeside(store, { feature: 'memory', metaKey: META_KEY, version: SCHEMA_VERSION, create: MEMORY_TABLES });
  }

  async readWorking(scope: string, onUnreadable?: OnUnreadable): Promise<WorkingDoc | null> {
    const found = await this.#tx(async (client, s) => (await client.query<WorkingRow>(`SELECT content_json, version, updated_at FROM ${s}.memory_working WHERE scope = $1`, [scope])).rows[0]);
    return found ? readWorkingDoc(() => workingOf(found), onUnreadable) : null;
  }

  async writeWorking(scope: string, content: string, at: number): Promise<WorkingDoc> {
    return this.#tx(async (client, s) => {
      const stored = await client.query<WorkingRow>(
        `INSERT INTO ${s}.memory_working AS w (scope, content_json, chars, version, updated_at) VALUES ($1, $2, $3, 1, $4)
         ON CONFLICT (scope) DO UPDATE SET content_json = EXCLUDED.content_json, chars = EXCLUDED.chars, version = w.version + 1, updated_at = EXCLUDED.updated_at
         RETURNING content_json, version, updated_at`,
        [scope, JSON.stringify(content), content.length, at],
      );
      return workingOf(stored.rows[0]!);
    });
  }

  async index(scope: string, entries: readonly MemoryEntry[]): Promise<void> {
    if (entries.length === 0) return;
    await this.#tx(async (client, s) => {
      // One statement for the batch; an entry already indexed (or twice in it) keeps its first row.
      await client.query(
        `INSERT INTO ${s}.memory_entries (scope, session_id, position, role, text_json, at, vector, words)
         SELECT $1, e.session_id, e.position, e.role, e.text_json, e.at, e.vector::float8[], to_tsvector('simple', e.words)
           FROM unnest($2::text[], $3::integer[], $4::text[], $5::text[], $6::bigint[], $7::text[], $8::text[])
                AS e(session_id, position, role, text_json, at, vector, words)
         ON CONFLICT DO NOTHING`,
        [
          scope,
          entries.map((e) => e.sessionId),
          entries.map((e) => e.position),
          entries.map((e) => e.role),
          entries.map((e) => JSON.stringify(e.text)),
          entries.map((e) => e.at),
          entries.map((e) => (e.vector ? arrayLiteral(e.vector) : null)),
          entries.map((e) => wordsOf(e.text).join(' ')),
        ],
      );
    });
  }

  async search(scope: string, terms: readonly string[], options: SearchOptions): Promise<MemoryHit[]> {
    const plain = terms.filter(isPlainTerm);
    if (plain.length === 0) return [];
    const excluded = options.excludeSession ?? null;
    return this.#tx(async (client, s) => {
      // The scope's size and each word's count among its entries (GIN), for its idf as the memory backend counts it.
      const counts = await client.query<{ n: string; df: string[] }>(
        `SELECT (SELECT count(*) FROM ${s}.memory_entries WHERE scope = $1 AND ($3::text IS NULL OR session_id <> $3)) AS n,
                ARRAY(SELECT (SELECT count(*) FROM ${s}.memory_entries WHERE scope = $1 AND words @@ to_tsquery('simple', t.term) AND ($3::text IS NULL OR session_id <> $3))
                        FROM unnest($2::text[]) WITH ORDINALITY AS t(term, i) ORDER BY t.i) AS df`,
        [scope, plain, excluded],
      );
      const n = Number(counts.rows[0]!.n);
      const weighted = plain.flatMap((term, i) => {
        const df = Number(counts.rows[0]!.df[i]);
        return df > 0 ? [{ term, idf: Math.log(1 + n / (1 + df)) }] : [];
      });
      if (weighted.length === 0) return [];
      // A hit's score: its ts_rank for each word, weighted by the word's idf. The SQL names
      // parameters only ($5 on: a weight and its word per word); every value is passed as one.
      const score = weighted.map((_, i) => `$${5 + 2 * i}::float8 * ts_rank(words, to_tsquery('simple', $${6 + 2 * i}))`).join(' + ');
      const found = await client.query<EntryRow & { score: number }>(
        `SELECT session_id, position, role, text_json, at, (${score})::float8 AS score FROM ${s}.memory_entries
          WHERE scope = $1 AND words @@ to_tsquery('simple', $2) AND ($3::text IS NULL OR session_id <> $3)
          ORDER BY score DESC, at DESC LIMIT $4`,
        [scope, weighted.map((w) => w.term).join(' | '), excluded, options.limit, ...weighted.flatMap((w) => [w.idf, w.term])],
      );
      return readEach(found.rows, (row) => ({ ...entryOf(row), score: row.score }), MemoryHitSchema, options.onUnreadable);
    });
  }

  async similar(scope: string, vector: readonly number[], options: SearchOptions): Promise<MemoryHit[]> {
    const rows = await this.#tx(async (client, s) => {
      // Vectors of another length (another embedding) are left on the server.
      const found = await client.query<EntryRow>(
        `SELECT session_id, position, role, text_json, at, vector FROM ${s}.memory_entries
          WHERE scope = $1 AND cardinality(vector) = $2 AND ($3::text IS NULL OR session_id <> $3)`,
        [scope, vector.length, options.excludeSession ?? null],
      );
      return found.rows;
    });
    return mostSimilar(readEach(rows, entryOf, MemoryEntrySchema, options.onUnreadable), vector, options.limit);
  }

  async listScopes(): Promise<ScopeSummary[]> {
    return this.#tx(async (client, s) => {
      const found = await client.query<{ scope: string; chars: string; entries: string; sessions: string; updated_at: string }>(
        `SELECT scope, sum(chars) AS chars, sum(entries) AS entries, sum(sessions) AS sessions, max(updated_at) AS updated_at FROM (
           SELECT scope, chars, 0::bigint AS entries, 0::bigint AS sessions, updated_at FROM ${s}.memory_working
           UNION ALL
           SELECT scope, 0, count(*), count(DISTINCT session_id), max(at) FROM ${s}.memory_entries GROUP BY scope
         ) AS parts GROUP BY scope`,
      );
      return found.rows.map((row) => ({
        scope: row.scope,
        workingChars: Number(row.chars),
        entries: Number(row.entries),
        sessions: Number(row.sessions),
        updatedAt: new Date(Number(row.updated_at)),
      }));
    });
  }

  async exportScope(scope: string): Promise<ScopeExport> {
    const { working, rows } = await this.#tx(async (client, s) => {
      // One snapshot: the document and the entries as they were at one moment.
      await client.query('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY');
      const document = await client.query<WorkingRow>(`SELECT content_json, version, updated_at FROM ${s}.memory_working WHERE scope = $1`, [scope]);
      const entries = await client.query<EntryRow>(`SELECT session_id, position, role, text_json, at, vector FROM ${s}.memory_entries WHERE scope = $1 ORDER BY id`, [scope]);
      return { working: document.rows[0], rows: entries.rows };
    });
    // Each row checked as recall checks it: a text that is not JSON, or a role this version does not read, is left out and named.
    const problems: string[] = [];
    const onUnreadable = (problem: string) => void problems.push(problem);
    return exported(scope, working ? readWorkingDoc(() => workingOf(working), onUnreadable) : null, readEach(rows, entryOf, MemoryEntrySchema, onUnreadable), problems);
  }

  async deleteScope(scope: string): Promise<number> {
    return this.#tx(async (client, s) => {
      // The words go with their rows (and out of the GIN index with them).
      const removed = await client.query(`DELETE FROM ${s}.memory_entries WHERE scope = $1`, [scope]);
      await client.query(`DELETE FROM ${s}.memory_working WHERE scope = $1`, [scope]);
      return removed.rowCount ?? 0;
    });
  }

  /** The pool is the store's: its `close()` ends it. */
  async close(): Promise<void> {}
}

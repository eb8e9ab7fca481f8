import { z } from 'zod';

/**
 * The storage contract of memory, kept beside the sessions of a store (memory, SQLite,
 * PostgreSQL): per scope, one working-memory document and an index of what the scope's sessions
 * said. Every read and write names its scope, and no call reads or writes another: the backends
 * key every row by it, and the conformance suite (test/memory/conformance.ts) holds them to it.
 */

/** One indexed message of a scope's session: its text (user and assistant turns only). */
export const MemoryEntrySchema = z.strictObject({
  sessionId: z.string().min(1),
  /** The message's position in the session's log when it was indexed: with the session, its key. */
  position: z.number().int().nonnegative(),
  role: z.enum(['user', 'assistant']),
  text: z.string(),
  /** When it was indexed (ms since the epoch). */
  at: z.number().int().nonnegative(),
  /** Its embedding, when the memory was given an `embed` function. */
  vector: z.array(z.number()).optional(),
});
export type MemoryEntry = z.infer<typeof MemoryEntrySchema>;

/** A recalled entry, best first: `score` orders hits of one search (higher is better), nothing more. */
export const MemoryHitSchema = z.strictObject({
  sessionId: z.string(),
  position: z.number().int().nonnegative(),
  role: z.enum(['user', 'assistant']),
  text: z.string(),
  at: z.number().int().nonnegative(),
  score: z.number(),
});
export type MemoryHit = z.infer<typeof MemoryHitSchema>;

/** A scope's working memory as stored: the document's text (JSON text for a schema'd one). */
export const WorkingDocSchema = z.strictObject({
  content: z.string(),
  /** Updates so far (1 after the first). */
  version: z.number().int().positive(),
  updatedAt: z.number().int().nonnegative(),
});
export type WorkingDoc = z.infer<typeof WorkingDocSchema>;

/** One line of `listScopes`. */
export interface ScopeSummary {
  scope: string;
  /** Characters of its working memory (0 when it has none). */
  workingChars: number;
  /** Indexed messages and the sessions they came from. */
  entries: number;
  sessions: number;
  updatedAt: Date;
}

/** Everything a scope's memory holds, as `exportScope` gives it (and `loopchart memory export` prints). */
export interface ScopeExport {
  scope: string;
  working: WorkingDoc | null;
  entries: MemoryEntry[];
}

/** What a search is given besides the scope: the words to look for (see `searchTerms`), how many hits, and a session to leave out. */
export interface SearchOptions {
  limit: number;
  /** The session asking: its own messages are in its conversation already. */
  excludeSession?: string | undefined;
}

export interface MemoryBackend {
  readWorking(scope: string): Promise<WorkingDoc | null>;
  /** Replaces the scope's document (last write wins) and returns what is stored now. */
  writeWorking(scope: string, content: string, at: number): Promise<WorkingDoc>;
  /** Adds entries to the scope's index; an entry already indexed (same session and position) is kept as it was. */
  index(scope: string, entries: readonly MemoryEntry[]): Promise<void>;
  /** Full-text search of the scope's entries for any of `terms` (plain words, already made safe). */
  search(scope: string, terms: readonly string[], options: SearchOptions): Promise<MemoryHit[]>;
  /** The scope's entries with a vector of this length, most similar (cosine) first. */
  similar(scope: string, vector: readonly number[], options: SearchOptions): Promise<MemoryHit[]>;
  listScopes(): Promise<ScopeSummary[]>;
  exportScope(scope: string): Promise<ScopeExport>;
  /** Removes the scope's document and every entry (search indexes included); returns how many entries went. */
  deleteScope(scope: string): Promise<number>;
  close(): Promise<void>;
}

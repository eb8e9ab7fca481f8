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
  /**
   * Stored rows this version does not read (another version wrote them, or they were edited by
   * hand), left out of `working` and `entries` and named here, each with what is wrong, as
   * recall names them. Absent when every row was read.
   */
  problems?: string[] | undefined;
}

/** Told of a stored row a read left out because this version does not read it: what it is and what is wrong. */
export type OnUnreadable = (problem: string) => void;

/** What a search is given besides the scope: the words to look for (see `searchTerms`), how many hits, and a session to leave out. */
export interface SearchOptions {
  limit: number;
  /** The session asking: its own messages are in its conversation already. */
  excludeSession?: string | undefined;
  /** Told of each stored entry left out as unreadable (see `readEach`). */
  onUnreadable?: OnUnreadable | undefined;
}

/** What a SQL backend's row says of where it is, to name a row it cannot read. */
interface RowPlace {
  session_id?: unknown;
  position?: unknown;
}

/**
 * Stored rows read one by one, each checked against `schema`: a row another version wrote, or one
 * edited by hand (a role this version does not know, a text that is not JSON), is left out and
 * told to `onUnreadable`, naming it. One such row costs its own recall, not every later run of
 * the scope (the memory operation's state would refuse it, and the run would fail).
 */
export function readEach<Row extends RowPlace, T>(rows: readonly Row[], read: (row: Row) => unknown, schema: z.ZodType<T>, onUnreadable: OnUnreadable | undefined): T[] {
  const readable: T[] = [];
  for (const row of rows) {
    let problem: string;
    try {
      const parsed = schema.safeParse(read(row));
      if (parsed.success) {
        readable.push(parsed.data);
        continue;
      }
      problem = z.prettifyError(parsed.error).replaceAll('\n', ' ');
    } catch (error) {
      problem = error instanceof Error ? error.message : String(error);
    }
    const place = `session ${JSON.stringify(String(row.session_id).slice(0, 200))}, position ${String(row.position)}`;
    onUnreadable?.(`a stored memory entry (${place}) is not one this version reads, left out: ${problem.slice(0, 300)}`);
  }
  return readable;
}

/** What `exportScope` gives: the rows read, and `problems` only when some were left out. */
export const exported = (scope: string, working: WorkingDoc | null, entries: MemoryEntry[], problems: readonly string[]): ScopeExport => ({
  scope,
  working,
  entries,
  ...(problems.length > 0 && { problems: [...problems] }),
});

/** A working document as stored, checked: one this version does not read is told to `onUnreadable` and read as none. */
export function readWorkingDoc(value: () => unknown, onUnreadable: OnUnreadable | undefined): WorkingDoc | null {
  let problem: string;
  try {
    const parsed = WorkingDocSchema.safeParse(value());
    if (parsed.success) return parsed.data;
    problem = z.prettifyError(parsed.error).replaceAll('\n', ' ');
  } catch (error) {
    problem = error instanceof Error ? error.message : String(error);
  }
  onUnreadable?.(`the stored working memory is not one this version reads, shown as empty: ${problem.slice(0, 300)}`);
  return null;
}

export interface MemoryBackend {
  /** The scope's document, or null; one this version does not read is told to `onUnreadable` and given as null. */
  readWorking(scope: string, onUnreadable?: OnUnreadable): Promise<WorkingDoc | null>;
  /** Replaces the scope's document (last write wins) and returns what is stored now. */
  writeWorking(scope: string, content: string, at: number): Promise<WorkingDoc>;
  /** Adds entries to the scope's index; an entry already indexed (same session and position) is kept as it was. */
  index(scope: string, entries: readonly MemoryEntry[]): Promise<void>;
  /** Full-text search of the scope's entries for any of `terms` (plain words, already made safe); an entry this version does not read is left out (`options.onUnreadable`). */
  search(scope: string, terms: readonly string[], options: SearchOptions): Promise<MemoryHit[]>;
  /** The scope's entries with a vector of this length, most similar (cosine) first. */
  similar(scope: string, vector: readonly number[], options: SearchOptions): Promise<MemoryHit[]>;
  listScopes(): Promise<ScopeSummary[]>;
  /** Every row of the scope, each checked as it is read: one this version does not read is left out and named in `problems`. */
  exportScope(scope: string): Promise<ScopeExport>;
  /** Removes the scope's document and every entry (search indexes included); returns how many entries went. */
  deleteScope(scope: string): Promise<number>;
  close(): Promise<void>;
}

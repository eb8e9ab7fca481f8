import type { MemoryBacking } from '../stores/memory.js';
import type { MemoryBackend, MemoryEntry, MemoryHit, ScopeExport, ScopeSummary, SearchOptions, WorkingDoc } from './memory-backend.js';
import { wordsOf } from './search-terms.js';
import { mostSimilar } from './similarity.js';

/** One scope's memory in a `MemoryBacking`: its document, and its entries by `session \0 position`. */
interface ScopeData {
  working: WorkingDoc | null;
  entries: Map<string, MemoryEntry & { words: ReadonlySet<string> }>;
}

/** The latest time of what a scope holds (its document's last write, its entries' `at`), as the SQL backends compute it. */
function latestOf(data: ScopeData): number {
  let latest = data.working?.updatedAt ?? 0;
  for (const entry of data.entries.values()) latest = Math.max(latest, entry.at);
  return latest;
}

/** Scopes by backing: memory lives beside the sessions, so two stores on one backing share it. */
const scopesOf = new WeakMap<MemoryBacking, Map<string, ScopeData>>();

/**
 * Memory of a `MemorySessionStore`, in its backing: gone with the process, like its sessions.
 * Ranks a full-text search in process (each matched word counts by how rare it is in the scope).
 */
export class BackingMemory implements MemoryBackend {
  readonly #scopes: Map<string, ScopeData>;

  constructor(backing: MemoryBacking) {
    let scopes = scopesOf.get(backing);
    if (!scopes) scopesOf.set(backing, (scopes = new Map()));
    this.#scopes = scopes;
  }

  #scope(scope: string): ScopeData {
    let data = this.#scopes.get(scope);
    if (!data) this.#scopes.set(scope, (data = { working: null, entries: new Map() }));
    return data;
  }

  async readWorking(scope: string): Promise<WorkingDoc | null> {
    return this.#scopes.get(scope)?.working ?? null;
  }

  async writeWorking(scope: string, content: string, at: number): Promise<WorkingDoc> {
    const data = this.#scope(scope);
    data.working = { content, version: (data.working?.version ?? 0) + 1, updatedAt: at };
    return data.working;
  }

  async index(scope: string, entries: readonly MemoryEntry[]): Promise<void> {
    if (entries.length === 0) return;
    const data = this.#scope(scope);
    for (const entry of entries) {
      const key = `${entry.sessionId}\u0000${entry.position}`;
      if (data.entries.has(key)) continue;
      data.entries.set(key, { ...structuredClone(entry), words: new Set(wordsOf(entry.text)) });
    }
  }

  async search(scope: string, terms: readonly string[], options: SearchOptions): Promise<MemoryHit[]> {
    const data = this.#scopes.get(scope);
    if (!data || terms.length === 0) return [];
    const candidates = [...data.entries.values()].filter((entry) => entry.sessionId !== options.excludeSession);
    // A word in few entries says more than one in many (idf).
    const weight = new Map(terms.map((term) => [term, Math.log(1 + candidates.length / (1 + candidates.filter((entry) => entry.words.has(term)).length))]));
    const hits: MemoryHit[] = [];
    for (const entry of candidates) {
      let score = 0;
      for (const term of terms) if (entry.words.has(term)) score += weight.get(term)!;
      if (score > 0) hits.push({ sessionId: entry.sessionId, position: entry.position, role: entry.role, text: entry.text, at: entry.at, score });
    }
    return hits.sort((a, b) => b.score - a.score || b.at - a.at).slice(0, options.limit);
  }

  async similar(scope: string, vector: readonly number[], options: SearchOptions): Promise<MemoryHit[]> {
    const entries = [...(this.#scopes.get(scope)?.entries.values() ?? [])].filter((entry) => entry.sessionId !== options.excludeSession);
    return mostSimilar(entries, vector, options.limit);
  }

  async listScopes(): Promise<ScopeSummary[]> {
    return [...this.#scopes].map(([scope, data]) => ({
      scope,
      workingChars: data.working?.content.length ?? 0,
      entries: data.entries.size,
      sessions: new Set([...data.entries.values()].map((entry) => entry.sessionId)).size,
      updatedAt: new Date(latestOf(data)),
    }));
  }

  async exportScope(scope: string): Promise<ScopeExport> {
    const data = this.#scopes.get(scope);
    const entries = [...(data?.entries.values() ?? [])].map(({ words: _words, ...entry }) => structuredClone(entry));
    return { scope, working: data?.working ?? null, entries };
  }

  async deleteScope(scope: string): Promise<number> {
    const removed = this.#scopes.get(scope)?.entries.size ?? 0;
    this.#scopes.delete(scope);
    return removed;
  }

  async close(): Promise<void> {}
}

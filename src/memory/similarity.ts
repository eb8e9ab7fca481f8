import type { MemoryEntry, MemoryHit } from './memory-backend.js';

/** Cosine similarity of two vectors of one length; 0 when either is all zeros. */
export function cosine(a: readonly number[], b: readonly number[]): number {
  let dot = 0;
  let normA = 0;
  let normB = 0;
  for (let i = 0; i < a.length; i++) {
    const x = a[i]!;
    const y = b[i]!;
    dot += x * y;
    normA += x * x;
    normB += y * y;
  }
  return normA === 0 || normB === 0 ? 0 : dot / Math.sqrt(normA * normB);
}

/**
 * The `limit` entries most similar to `vector`, best first: the in-process similarity search of
 * the memory and SQLite backends (a scan of the scope's vectors; entries with a vector of another
 * length, written under another embedding, are skipped).
 */
export function mostSimilar(entries: Iterable<MemoryEntry>, vector: readonly number[], limit: number): MemoryHit[] {
  const hits: MemoryHit[] = [];
  for (const entry of entries) {
    if (entry.vector?.length !== vector.length) continue;
    const { sessionId, position, role, text, at } = entry;
    hits.push({ sessionId, position, role, text, at, score: cosine(entry.vector, vector) });
  }
  return hits.sort((a, b) => b.score - a.score).slice(0, limit);
}

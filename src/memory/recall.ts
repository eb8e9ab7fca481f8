import { MemoryEmbedError } from './errors.js';
import type { MemoryBackend, MemoryHit, SearchOptions } from './memory-backend.js';
import { searchTerms } from './search-terms.js';

/**
 * Your embedding model, for semantic recall: a text in, a vector out. Given a signal that aborts
 * when the memory stops waiting (`recall.embedTimeoutMs`) or the run is cancelled.
 *
 * @example
 * ```ts
 * import type { Embed } from 'loopchart/memory';
 *
 * const embed: Embed = async (text, { signal }) => {
 *   const response = await fetch('http://127.0.0.1:8080/embed', { method: 'POST', body: text, signal });
 *   return (await response.json()) as number[];
 * };
 * ```
 */
export type Embed = (text: string, options: { signal: AbortSignal }) => Promise<number[]>;

/** An `embed` as the memory runs it: bounded in time, and held to one vector length. */
export interface EmbedConfig {
  fn: Embed;
  timeoutMs: number;
  /** The vectors' length: given, or learnt from the first answer. */
  dimensions?: number | undefined;
}

/**
 * One `embed` call, its answer checked: a throw, a timeout or a vector that is not `dimensions`
 * finite numbers is a `MemoryEmbedError`. The first good answer fixes `dimensions` when none was given.
 */
export async function embedChecked(embed: EmbedConfig, text: string, outer: AbortSignal): Promise<number[]> {
  const controller = new AbortController();
  const onAbort = () => controller.abort(outer.reason);
  outer.addEventListener('abort', onAbort, { once: true });
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    const timedOut = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        reject(new MemoryEmbedError(`no answer within ${embed.timeoutMs} ms`));
        controller.abort(new DOMException('embed timed out', 'TimeoutError'));
      }, embed.timeoutMs);
    });
    let answer: unknown;
    try {
      answer = await Promise.race([Promise.resolve().then(() => embed.fn(text, { signal: controller.signal })), timedOut]);
    } catch (error) {
      if (MemoryEmbedError.isInstance(error)) throw error;
      throw new MemoryEmbedError(`it threw: ${error instanceof Error ? error.message.slice(0, 200) : String(error).slice(0, 200)}`, { cause: error });
    }
    if (!Array.isArray(answer) || answer.length === 0 || !answer.every((x) => typeof x === 'number' && Number.isFinite(x))) {
      throw new MemoryEmbedError('it did not return an array of finite numbers');
    }
    if (embed.dimensions !== undefined && answer.length !== embed.dimensions) throw new MemoryEmbedError(`it returned ${answer.length} numbers, expected ${embed.dimensions}`);
    embed.dimensions ??= answer.length;
    return answer as number[];
  } finally {
    clearTimeout(timer);
    outer.removeEventListener('abort', onAbort);
  }
}

/** `embedChecked`, with its failure kept in `problems` instead of thrown: what recall can do without. */
export async function embedOrProblem(embed: EmbedConfig, text: string, signal: AbortSignal, problems: string[]): Promise<number[] | undefined> {
  try {
    return await embedChecked(embed, text, signal);
  } catch (error) {
    if (!MemoryEmbedError.isInstance(error)) throw error;
    if (!problems.includes(error.message)) problems.push(error.message);
    return undefined;
  }
}

/** Rank fusion's constant: how much a top rank counts over a lower one (the usual 60). */
const FUSION_K = 60;

/**
 * The scope's entries that match `query`, best first: its words searched in full text and, with
 * an `embed`, its vector searched by similarity, the two lists fused by rank. The semantic half is
 * left out (and said in `problems`) when `embed` fails.
 */
export async function findRecall(backend: MemoryBackend, scope: string, query: string, options: SearchOptions, embed: EmbedConfig | undefined, signal: AbortSignal): Promise<{ hits: MemoryHit[]; problems: string[] }> {
  const problems: string[] = [];
  // A stored entry this version does not read is left out, said in `problems` (once).
  const onUnreadable = (problem: string) => void (problems.includes(problem) || problems.push(problem));
  const searching: SearchOptions = { ...options, onUnreadable };
  const terms = searchTerms(query);
  const textHits = terms.length > 0 ? await backend.search(scope, terms, searching) : [];
  if (!embed || !query.trim()) return { hits: textHits, problems };
  const vector = await embedOrProblem(embed, query, signal, problems);
  if (!vector) return { hits: textHits, problems };
  const similar = await backend.similar(scope, vector, searching);
  const fused = new Map<string, MemoryHit>();
  for (const list of [textHits, similar]) {
    list.forEach((hit, rank) => {
      const key = `${hit.sessionId}\u0000${hit.position}`;
      const score = 1 / (FUSION_K + rank + 1);
      const seen = fused.get(key);
      fused.set(key, seen ? { ...seen, score: seen.score + score } : { ...hit, score });
    });
  }
  return { hits: [...fused.values()].sort((a, b) => b.score - a.score).slice(0, options.limit), problems };
}

import type { SessionStore, TraceRecord } from '../stores/session-store.js';

/**
 * One run's entries of a session's trace without the runs before it, for a chat's run in flight
 * read from the store (a reattach, an answer or a cancel in a process that does not hold it),
 * whose decisions its stream shows: before, every such request read the whole trace, which holds
 * every model call of the chat with its prompt.
 *
 * The stores keep a trace in `seq` order and read it from a cursor (`readTrace(id, afterSeq,
 * limit)`, an index seek in SQLite and PostgreSQL), and every entry carries the run it was written
 * in, which only grows along a trace. So the run's first entry is found with one-entry reads, a
 * galloping then a binary search over the cursor (about 2 log2 of the largest `seq`, 40 or so in a
 * store of a million entries), and the run is read from there. What the search assumes is checked:
 * the first entry read must be the run's own start (`{ type: 'run', run }`); an entry without a
 * run (a fork's first, an unreadable row) or any other surprise reads the whole trace, as before.
 */

/** A trace this short (in entries) is read whole in one read, with no search. */
export const FIRST_PAGE = 256;

/** The entries of run `run` of `sessionId` (and of later runs), in order; the whole trace when the search cannot be trusted. */
export async function runRecords(store: Required<Pick<SessionStore, 'readTrace'>>, sessionId: string, run: number): Promise<TraceRecord[]> {
  const read = (after: number, limit?: number) => store.readTrace(sessionId, after, limit);
  const page = await read(0, FIRST_PAGE + 1);
  // Short (or a store that ignores the limit, which gave it all): all there is, in hand.
  if (page.length !== FIRST_PAGE + 1) return page;
  const start = await startOf(read, run);
  if (start === null) return read(0);
  const records = await read(start);
  const first = records[0]?.entry as { type?: unknown; run?: unknown } | undefined;
  return first?.type === 'run' && first.run === run ? records : read(0);
}

/**
 * The cursor right before the first entry of run `run` or later (0 when the trace begins there),
 * or null when an entry read has no run or the store gives more than one entry a read.
 */
async function startOf(read: (after: number, limit: number) => Promise<TraceRecord[]>, run: number): Promise<number | null> {
  /** The run of the first entry after `after` (Infinity past the end); null when it has none. */
  const runAfter = async (after: number): Promise<number | null> => {
    const records = await read(after, 1);
    if (records.length > 1) return null;
    if (records.length === 0) return Infinity;
    const taken = (records[0]!.entry as { run?: unknown } | null)?.run;
    return typeof taken === 'number' ? taken : null;
  };
  const at = (found: number | null) => (found === null ? null : found >= run);
  const atStart = at(await runAfter(0));
  if (atStart !== false) return atStart === null ? null : 0;
  // `lo`: a cursor whose next entry is of an earlier run; `hi`: one whose next is of `run` or later (or none).
  let lo = 0;
  let hi = 0;
  for (let width = 1; ; width *= 2) {
    if (lo + width > Number.MAX_SAFE_INTEGER) return null;
    const later = at(await runAfter(lo + width));
    if (later === null) return null;
    if (later) {
      hi = lo + width;
      break;
    }
    lo += width;
  }
  while (hi - lo > 1) {
    const mid = lo + Math.floor((hi - lo) / 2);
    const later = at(await runAfter(mid));
    if (later === null) return null;
    if (later) hi = mid;
    else lo = mid;
  }
  return hi;
}

import type { ReadTraceEntry } from '../sessions/trace.js';

/**
 * A page's catch-up (the rest of a long trace, after the page's first entries) as several
 * events of bounded size instead of one: the page parses and applies each as it comes, so no
 * single `JSON.parse` blocks it, and no event needs an exception to the stream's buffer bound.
 */

/** Entries in one catch-up event at most. */
export const CATCH_UP_ENTRIES = 2_000;
/** Encoded entry bytes in one catch-up event at most (a single larger entry goes alone). */
export const CATCH_UP_BYTES = 512 * 1024;

/** One event of a catch-up: its JSON payload, and the last trace entry it brings. */
export interface CatchUpPart {
  json: string;
  lastSeq: number;
}

/**
 * The catch-up's events, in order. The first carries `rest` (the page's head, log and state as
 * the feed has them now) with the first entries; the others only entries. So every event's id
 * (the seq of its last entry and the log length the page then has) is a cursor a reconnecting
 * page can resume from, with no entry repeated or missing.
 */
export function catchUpParts(entries: readonly ReadTraceEntry[], rest: Record<string, unknown>, bounds = { entries: CATCH_UP_ENTRIES, bytes: CATCH_UP_BYTES }): CatchUpPart[] {
  const restJson = JSON.stringify(rest);
  const tail = restJson === '{}' ? '}' : `,${restJson.slice(1)}`;
  const parts: CatchUpPart[] = [];
  let pieces: string[] = [];
  let bytes = 0;
  const flush = (lastSeq: number) => {
    parts.push({ json: `{"entries":[${pieces.join(',')}]${parts.length === 0 ? tail : '}'}`, lastSeq });
    pieces = [];
    bytes = 0;
  };
  entries.forEach((record, i) => {
    const piece = JSON.stringify(record);
    if (pieces.length > 0 && (pieces.length >= bounds.entries || bytes + Buffer.byteLength(piece) > bounds.bytes)) flush(entries[i - 1]!.seq);
    pieces.push(piece);
    bytes += Buffer.byteLength(piece) + 1;
  });
  if (pieces.length > 0 || parts.length === 0) flush(entries.at(-1)?.seq ?? 0);
  return parts;
}

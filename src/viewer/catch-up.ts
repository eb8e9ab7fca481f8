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

/**
 * Each entry's JSON and its byte length, made once per entry: the entries come from the viewer's
 * trace cache, so the next page of the same session sends the same objects, and a 20,000-entry
 * catch-up is not encoded again on every load (it held the server's event loop for a third of a
 * second each time).
 */
const encoded = new WeakMap<ReadTraceEntry, { json: string; bytes: number }>();
function encode(record: ReadTraceEntry): { json: string; bytes: number } {
  let piece = encoded.get(record);
  if (!piece) {
    const json = JSON.stringify(record);
    encoded.set(record, (piece = { json, bytes: Buffer.byteLength(json) }));
  }
  return piece;
}

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
    const piece = encode(record);
    if (pieces.length > 0 && (pieces.length >= bounds.entries || bytes + piece.bytes > bounds.bytes)) flush(entries[i - 1]!.seq);
    pieces.push(piece.json);
    bytes += piece.bytes + 1;
  });
  if (pieces.length > 0 || parts.length === 0) flush(entries.at(-1)?.seq ?? 0);
  return parts;
}

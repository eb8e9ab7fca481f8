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

/** Each message's JSON, made once per message object (the feed's head keeps the same objects between pages). */
const encodedMessages = new WeakMap<object, string>();
function encodeMessage(message: unknown): string {
  if (typeof message !== 'object' || message === null) return JSON.stringify(message);
  let json = encodedMessages.get(message);
  if (json === undefined) encodedMessages.set(message, (json = JSON.stringify(message)));
  return json;
}

/** What a catch-up brings: trace entries, the log from a position on, and the rest of the page's state. */
export interface CatchUp {
  entries: readonly ReadTraceEntry[];
  /** The log from position `from` on (the page replaces what it holds past `from`). */
  log: { from: number; messages: readonly unknown[] };
  /** Fields every update carries once, in its first event (the session's head and state). */
  rest: Record<string, unknown>;
  /** The page's trace cursor before the catch-up, and the feed's after it. */
  seq: { from: number; to: number };
}

/** One event of a catch-up: its JSON payload, and the cursor a page holds once it applied it. */
export interface CatchUpPart {
  json: string;
  cursor: { seq: number; log: number };
}

/**
 * The catch-up's events, in order, each under `bounds` (a single larger entry or message goes
 * alone): first the trace entries, then the log in slices; `rest` comes with the first event.
 * Each event's cursor is where a reconnecting page resumes with nothing repeated or missing:
 * after an entries event it has the trace to that entry and the log before `log.from` (unchanged
 * over the whole catch-up, so right at any of its entries); after a log slice, the whole trace and
 * the log to the slice's end. So a page dropped anywhere in a long catch-up (it fell asleep again)
 * reconnects past what it got, and no single event can outgrow the stream's buffer bound.
 */
export function catchUpParts(catchUp: CatchUp, bounds = { entries: CATCH_UP_ENTRIES, bytes: CATCH_UP_BYTES }): CatchUpPart[] {
  const { entries, log, seq } = catchUp;
  const restJson = JSON.stringify(catchUp.rest);
  let rest = restJson === '{}' ? '' : `,${restJson.slice(1, -1)}`;
  const parts: CatchUpPart[] = [];
  let held: { entries: string[]; messages: string[] } = { entries: [], messages: [] };
  let bytes = 0;
  /** The page's cursor once it applied what was added so far: the last entry sent, the log held. */
  const cursor = { seq: seq.from, log: log.from };
  /** Where the current event's log slice starts. */
  let logFrom = log.from;
  /** Ends the event being filled; the last one always carries the log's end (possibly no message), so the page knows its length. */
  const flush = (last: boolean) => {
    const logged = held.messages.length > 0 || last;
    const slice = logged ? `,"log":{"from":${logFrom},"messages":[${held.messages.join(',')}]}` : '';
    parts.push({ json: `{"entries":[${held.entries.join(',')}]${slice}${rest}}`, cursor: { ...cursor } });
    logFrom = cursor.log;
    rest = '';
    held = { entries: [], messages: [] };
    bytes = 0;
  };
  const add = (json: string, size: number, into: 'entries' | 'messages') => {
    const count = held.entries.length + held.messages.length;
    if (count > 0 && (count >= bounds.entries || bytes + size > bounds.bytes)) flush(false);
    held[into].push(json);
    bytes += size + 1;
  };
  for (const record of entries) {
    const piece = encode(record);
    add(piece.json, piece.bytes, 'entries');
    cursor.seq = record.seq;
  }
  // Every entry is in: from here each event's log slice is the log as of the feed's last entry.
  cursor.seq = seq.to;
  for (const message of log.messages) {
    const json = encodeMessage(message);
    add(json, Buffer.byteLength(json), 'messages');
    cursor.log++;
  }
  flush(true);
  return parts;
}

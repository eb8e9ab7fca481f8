/**
 * A small Server-Sent Events parser (the WHATWG event-stream format): bytes in, events out.
 *
 * Network chunks split lines anywhere (even inside a multi-byte UTF-8 character), so the parser
 * keeps the unfinished line and a streaming TextDecoder between pushes. It accepts LF, CRLF and
 * bare CR line endings (a CRLF split across two pushes counts once), skips comment lines
 * (`: keep-alive`), joins multi-line `data:` fields with "\n" and dispatches on a blank line.
 * It is callback-based so a long stream allocates nothing but the event strings themselves.
 * `[DONE]` is not special here: it is an ordinary event whose data the consumer interprets.
 *
 * Linear and bounded: each pushed piece is scanned once, an unfinished line is kept as a list of
 * pieces joined once when its end arrives, and a line longer than `maxLineLength` or an event whose
 * data exceeds `maxEventLength` fails with MalformedStreamError instead of growing without end.
 */
import { MalformedStreamError } from './errors.js';

export interface SseEvent {
  /** The `event:` field, or "message" when the server sent none. */
  type: string;
  data: string;
  /** The last `id:` seen on the stream, if any. */
  id: string | undefined;
}

/**
 * Longest line accepted, in characters (UTF-16 code units) after decoding: 8 Mi. A chat chunk is
 * a few hundred characters; the largest legitimate line is one chunk carrying a whole tool call's
 * arguments (a file's content, say), which stays far below this.
 *
 * @example
 * ```ts
 * const onEvent = (event: SseEvent) => console.log(event.data);
 * new SseParser(onEvent).pushText(`data: ${'x'.repeat(MAX_SSE_LINE_LENGTH)}`); // throws MalformedStreamError
 * ```
 */
export const MAX_SSE_LINE_LENGTH = 8 * 1024 * 1024;
/**
 * Longest event data accepted (all its `data:` lines joined), in characters: 16 Mi.
 *
 * @example
 * ```ts
 * const onEvent = (event: SseEvent) => console.log(event.data);
 * new SseParser(onEvent, { maxEventLength: MAX_SSE_EVENT_LENGTH / 4 }); // a stricter parser
 * ```
 */
export const MAX_SSE_EVENT_LENGTH = 16 * 1024 * 1024;

export interface SseLimits {
  /** Default MAX_SSE_LINE_LENGTH. */
  maxLineLength?: number | undefined;
  /** Default MAX_SSE_EVENT_LENGTH. */
  maxEventLength?: number | undefined;
}

const LF = 10;
const COLON = 58;
const SPACE = 32;

export class SseParser {
  private readonly decoder = new TextDecoder('utf-8');
  private readonly onEvent: (event: SseEvent) => void;
  private readonly maxLineLength: number;
  private readonly maxEventLength: number;
  /** The unfinished line after the last complete one, in the pieces it arrived in. */
  private pending: string[] = [];
  private pendingLength = 0;
  private data: string | undefined;
  private eventType = '';
  private lastId: string | undefined;
  /** The previous push ended in CR: a LF starting the next push belongs to the same line ending. */
  private skipLeadingLF = false;
  private started = false;

  constructor(onEvent: (event: SseEvent) => void, limits: SseLimits = {}) {
    this.onEvent = onEvent;
    this.maxLineLength = limits.maxLineLength ?? MAX_SSE_LINE_LENGTH;
    this.maxEventLength = limits.maxEventLength ?? MAX_SSE_EVENT_LENGTH;
  }

  /** Feeds raw bytes from the network. */
  push(bytes: Uint8Array): void {
    this.pushText(this.decoder.decode(bytes, { stream: true }));
  }

  /** Feeds already-decoded text. Throws MalformedStreamError past a limit. */
  pushText(text: string): void {
    if (text.length === 0) return;
    if (!this.started) {
      this.started = true;
      if (text.charCodeAt(0) === 0xfeff) text = text.slice(1); // a BOM may open the stream, once
    }
    if (this.skipLeadingLF) {
      this.skipLeadingLF = false;
      if (text.charCodeAt(0) === LF) text = text.slice(1);
    }
    const len = text.length;
    let pos = 0;
    // Each search runs again only once the cursor has passed its last hit, so a piece is scanned
    // once for LF and once for CR however its lines fall (a missing one is never searched again).
    let lf = text.indexOf('\n');
    let cr = text.indexOf('\r');
    while (pos < len) {
      if (lf !== -1 && lf < pos) lf = text.indexOf('\n', pos);
      if (cr !== -1 && cr < pos) cr = text.indexOf('\r', pos);
      let end: number;
      let next: number;
      if (cr !== -1 && (lf === -1 || cr < lf)) {
        end = cr;
        if (cr + 1 < len) {
          next = text.charCodeAt(cr + 1) === LF ? cr + 2 : cr + 1;
        } else {
          next = len;
          this.skipLeadingLF = true;
        }
      } else if (lf !== -1) {
        end = lf;
        next = lf + 1;
      } else {
        break;
      }
      if (this.pendingLength === 0) {
        this.checkLine(end - pos);
        this.line(text, pos, end);
      } else {
        this.checkLine(this.pendingLength + end - pos);
        this.pending.push(text.slice(pos, end));
        const line = this.pending.join('');
        this.pending = [];
        this.pendingLength = 0;
        this.line(line, 0, line.length);
      }
      pos = next;
    }
    if (pos < len) {
      this.checkLine(this.pendingLength + len - pos);
      this.pending.push(pos === 0 ? text : text.slice(pos));
      this.pendingLength += len - pos;
    }
  }

  /**
   * The stream ended. Per the spec an unterminated line and an event without its closing blank
   * line are discarded: a connection cut mid-event must not deliver half a JSON chunk.
   * Returns true when something was discarded, so a caller can tell a clean end from a cut one.
   */
  end(): boolean {
    const rest = this.decoder.decode();
    if (rest.length > 0) this.pushText(rest);
    const discarded = this.pendingLength > 0 || this.data !== undefined;
    this.pending = [];
    this.pendingLength = 0;
    this.data = undefined;
    this.eventType = '';
    return discarded;
  }

  private checkLine(length: number): void {
    if (length > this.maxLineLength) {
      throw new MalformedStreamError(`a server-sent-events line is longer than ${this.maxLineLength} characters`);
    }
  }

  private appendData(value: string): void {
    const length = this.data === undefined ? value.length : this.data.length + 1 + value.length;
    if (length > this.maxEventLength) {
      throw new MalformedStreamError(`a server-sent event carries more than ${this.maxEventLength} characters of data`);
    }
    this.data = this.data === undefined ? value : `${this.data}\n${value}`;
  }

  private line(buf: string, start: number, end: number): void {
    if (start === end) {
      this.dispatch();
      return;
    }
    // Fast path: nearly every line of a chat stream is "data: …".
    if (buf.startsWith('data:', start)) {
      const from = buf.charCodeAt(start + 5) === SPACE && start + 5 < end ? start + 6 : start + 5;
      this.appendData(buf.slice(from, end));
      return;
    }
    if (buf.charCodeAt(start) === COLON) return; // comment / keep-alive
    // Searched within the line only: a search running on into the rest of the piece would make
    // a piece of many colon-less lines quadratic.
    const text = buf.slice(start, end);
    const colon = text.indexOf(':');
    let field: string;
    let value: string;
    if (colon === -1) {
      field = text;
      value = '';
    } else {
      field = text.slice(0, colon);
      value = text.slice(text.charCodeAt(colon + 1) === SPACE ? colon + 2 : colon + 1);
    }
    switch (field) {
      case 'data':
        this.appendData(value);
        break;
      case 'event':
        this.eventType = value;
        break;
      case 'id':
        if (!value.includes('\0')) this.lastId = value;
        break;
      default:
        // `retry` and unknown fields carry nothing a one-shot request needs.
        break;
    }
  }

  private dispatch(): void {
    const data = this.data;
    const type = this.eventType;
    this.data = undefined;
    this.eventType = '';
    if (data === undefined) return; // a blank line with no data (e.g. after a comment) is not an event
    this.onEvent({ type: type === '' ? 'message' : type, data, id: this.lastId });
  }
}

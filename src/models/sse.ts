/**
 * A small Server-Sent Events parser (the WHATWG event-stream format): bytes in, events out.
 *
 * Network chunks split lines anywhere (even inside a multi-byte UTF-8 character), so the parser
 * keeps the unfinished line and a streaming TextDecoder between pushes. It accepts LF, CRLF and
 * bare CR line endings (a CRLF split across two pushes counts once), skips comment lines
 * (`: keep-alive`), joins multi-line `data:` fields with "\n" and dispatches on a blank line.
 * It is callback-based so a long stream allocates nothing but the event strings themselves.
 * `[DONE]` is not special here: it is an ordinary event whose data the consumer interprets.
 */

export interface SseEvent {
  /** The `event:` field, or "message" when the server sent none. */
  type: string;
  data: string;
  /** The last `id:` seen on the stream, if any. */
  id: string | undefined;
}

const LF = 10;
const CR = 13;
const COLON = 58;
const SPACE = 32;

export class SseParser {
  private readonly decoder = new TextDecoder('utf-8');
  private readonly onEvent: (event: SseEvent) => void;
  /** The tail of the stream after the last complete line. */
  private pending = '';
  private data: string | undefined;
  private eventType = '';
  private lastId: string | undefined;
  /** The previous push ended in CR: a LF starting the next push belongs to the same line ending. */
  private skipLeadingLF = false;
  private started = false;

  constructor(onEvent: (event: SseEvent) => void) {
    this.onEvent = onEvent;
  }

  /** Feeds raw bytes from the network. */
  push(bytes: Uint8Array): void {
    this.pushText(this.decoder.decode(bytes, { stream: true }));
  }

  /** Feeds already-decoded text. */
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
    const buf = this.pending.length === 0 ? text : this.pending + text;
    const len = buf.length;
    let pos = 0;
    // Bare CR is rare: look for it once and only again after passing it, so the common LF-only
    // stream pays for one extra scan per push, not per line.
    let cr = buf.indexOf('\r');
    while (pos < len) {
      const lf = buf.indexOf('\n', pos);
      if (cr !== -1 && cr < pos) cr = buf.indexOf('\r', pos);
      let end: number;
      let next: number;
      if (cr !== -1 && (lf === -1 || cr < lf)) {
        end = cr;
        if (cr + 1 < len) {
          next = buf.charCodeAt(cr + 1) === LF ? cr + 2 : cr + 1;
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
      this.line(buf, pos, end);
      pos = next;
    }
    this.pending = pos === 0 ? buf : pos >= len ? '' : buf.slice(pos);
  }

  /**
   * The stream ended. Per the spec an unterminated line and an event without its closing blank
   * line are discarded: a connection cut mid-event must not deliver half a JSON chunk.
   * Returns true when something was discarded, so a caller can tell a clean end from a cut one.
   */
  end(): boolean {
    const rest = this.decoder.decode();
    if (rest.length > 0) this.pushText(rest);
    const discarded = this.pending.length > 0 || this.data !== undefined;
    this.pending = '';
    this.data = undefined;
    this.eventType = '';
    return discarded;
  }

  private line(buf: string, start: number, end: number): void {
    if (start === end) {
      this.dispatch();
      return;
    }
    // Fast path: nearly every line of a chat stream is "data: …".
    if (buf.startsWith('data:', start)) {
      const from = buf.charCodeAt(start + 5) === SPACE && start + 5 < end ? start + 6 : start + 5;
      const value = buf.slice(from, end);
      this.data = this.data === undefined ? value : `${this.data}\n${value}`;
      return;
    }
    if (buf.charCodeAt(start) === COLON) return; // comment / keep-alive
    const colon = buf.indexOf(':', start);
    let field: string;
    let value: string;
    if (colon === -1 || colon >= end) {
      field = buf.slice(start, end);
      value = '';
    } else {
      field = buf.slice(start, colon);
      const from = buf.charCodeAt(colon + 1) === SPACE && colon + 1 < end ? colon + 2 : colon + 1;
      value = buf.slice(from, end);
    }
    switch (field) {
      case 'data':
        this.data = this.data === undefined ? value : `${this.data}\n${value}`;
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

/** What is kept of a line over the limit: its size and its two ends (where a JSON-RPC id sits). */
export interface OversizedLine {
  bytes: number;
  head: string;
  tail: string;
}

/** Where a JSON-RPC id sits in a serialized message: at its end (`{"result":…,"id":7}`) or start. */
const ID_AT_END = /"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")\s*\}\s*$/;
const ID_AT_START = /^\s*\{\s*"jsonrpc"\s*:\s*"2\.0"\s*,\s*"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")/;

/** The JSON-RPC id an oversized message names where serializers put it, if it can be read from its ends. */
export function oversizedMessageId(line: OversizedLine): string | number | undefined {
  const found = ID_AT_END.exec(line.tail)?.[1] ?? ID_AT_START.exec(line.head)?.[1];
  return found === undefined ? undefined : (JSON.parse(found) as string | number);
}

/** A message whose first keys (`jsonrpc`, `id`) lead to `method`: a request or a notification. */
const METHOD_FIRST = /^\s*\{\s*(?:"(?:jsonrpc|id)"\s*:\s*(?:-?\d+|"(?:[^"\\]|\\.)*")\s*,\s*)*"method"\s*:/;

/**
 * Whether an oversized message is a request or a notification from the server (a log line, a
 * progress report, a request to the client), as its start shows: it answers no request of ours,
 * even when it carries an id.
 */
export function oversizedIsRequest(line: OversizedLine): boolean {
  return METHOD_FIRST.test(line.head);
}

/** Bytes kept of each end of an oversized line. */
const END_BYTES = 256;

/**
 * Splits a byte stream into newline-delimited lines, none held past `maxBytes`: a longer line is
 * skipped as it streams in (only its size and ends are kept) and reported once it ends, so a
 * server that sends too much costs this process `maxBytes` at most, and the stream goes on.
 */
export class LineReader {
  readonly #maxBytes: number;
  #chunks: Buffer[] = [];
  #size = 0;
  /** The line being skipped: over the limit, not ended yet. */
  #skipping: { bytes: number; head: Buffer; tail: Buffer } | null = null;

  constructor(maxBytes: number) {
    this.#maxBytes = maxBytes;
  }

  push(chunk: Buffer, onLine: (line: string) => void, onOversized: (line: OversizedLine) => void): void {
    let rest = chunk;
    while (rest.length > 0) {
      const newline = rest.indexOf(10);
      const part = newline === -1 ? rest : rest.subarray(0, newline);
      rest = newline === -1 ? Buffer.alloc(0) : rest.subarray(newline + 1);
      if (!this.#skipping && this.#size + part.length > this.#maxBytes) this.#startSkipping();
      if (this.#skipping) {
        const skip = this.#skipping;
        skip.bytes += part.length;
        if (skip.head.length < END_BYTES) skip.head = Buffer.concat([skip.head, part.subarray(0, END_BYTES - skip.head.length)]);
        skip.tail = lastBytes(Buffer.concat([skip.tail, part.subarray(-END_BYTES)]));
        if (newline === -1) return;
        this.#skipping = null;
        onOversized({ bytes: skip.bytes, head: skip.head.toString('utf8'), tail: skip.tail.toString('utf8').replace(/\r$/, '') });
        continue;
      }
      this.#chunks.push(part);
      this.#size += part.length;
      if (newline === -1) return;
      const line = Buffer.concat(this.#chunks).toString('utf8').replace(/\r$/, '');
      this.#chunks = [];
      this.#size = 0;
      onLine(line);
    }
  }

  clear(): void {
    this.#chunks = [];
    this.#size = 0;
    this.#skipping = null;
  }

  #startSkipping(): void {
    const held = Buffer.concat(this.#chunks);
    this.#skipping = { bytes: held.length, head: held.subarray(0, END_BYTES), tail: lastBytes(held) };
    this.#chunks = [];
    this.#size = 0;
  }
}

const lastBytes = (buffer: Buffer): Buffer => (buffer.length > END_BYTES ? buffer.subarray(buffer.length - END_BYTES) : buffer);

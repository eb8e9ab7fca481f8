import { describe, expect, it } from 'vitest';
import { SseParser, type SseEvent } from '../../src/models/sse.js';

function parseAll(pieces: Array<string | Uint8Array>): { events: SseEvent[]; discarded: boolean } {
  const events: SseEvent[] = [];
  const parser = new SseParser((e) => events.push(e));
  const encoder = new TextEncoder();
  for (const piece of pieces) parser.push(typeof piece === 'string' ? encoder.encode(piece) : piece);
  const discarded = parser.end();
  return { events, discarded };
}

/** Every way to cut `bytes` in two, plus one-byte-at-a-time. */
function cuts(bytes: Uint8Array): Uint8Array[][] {
  const out: Uint8Array[][] = [];
  for (let i = 0; i <= bytes.length; i++) out.push([bytes.subarray(0, i), bytes.subarray(i)]);
  out.push(Array.from(bytes, (_, i) => bytes.subarray(i, i + 1)));
  return out;
}

describe('SseParser', () => {
  it('dispatches data events on blank lines, with the event type defaulting to message', () => {
    const { events } = parseAll(['data: {"a":1}\n\ndata: [DONE]\n\n']);
    expect(events.map((e) => [e.type, e.data])).toEqual([
      ['message', '{"a":1}'],
      ['message', '[DONE]'],
    ]);
  });

  it('gives the same events however the bytes are cut, including inside a multi-byte character', () => {
    const text = ': keep-alive\r\n\r\nevent: delta\ndata: {"content":"héllo 👋"}\r\n\r\ndata: line1\rdata: line2\r\rdata:[DONE]\n\n';
    const bytes = new TextEncoder().encode(text);
    const expected = [
      { type: 'delta', data: '{"content":"héllo 👋"}', id: undefined },
      { type: 'message', data: 'line1\nline2', id: undefined },
      { type: 'message', data: '[DONE]', id: undefined },
    ];
    for (const pieces of cuts(bytes)) expect(parseAll(pieces).events).toEqual(expected);
  });

  it('skips comments and keep-alives and blank lines that carry no data', () => {
    const { events } = parseAll([': ping\n\n:\n\n\n\ndata: x\n\n: bye\n\n']);
    expect(events.map((e) => e.data)).toEqual(['x']);
  });

  it('strips one optional space after the colon, keeps the rest, and handles fields without a value', () => {
    const { events } = parseAll(['data:  two spaces\ndata\ndata:\n\n']);
    expect(events[0]?.data).toBe(' two spaces\n\n');
  });

  it('remembers the last id and ignores retry and unknown fields', () => {
    const { events } = parseAll(['id: 7\nretry: 1000\nfoo: bar\ndata: a\n\ndata: b\n\n']);
    expect(events.map((e) => [e.id, e.data])).toEqual([
      ['7', 'a'],
      ['7', 'b'],
    ]);
  });

  it('strips a leading BOM once', () => {
    const { events } = parseAll(['\uFEFFdata: x\n\n']);
    expect(events[0]?.data).toBe('x');
  });

  it('discards an event cut off by the end of the stream and says so', () => {
    const cut = parseAll(['data: {"a":1}\n\ndata: {"choices":[{"del']);
    expect(cut.events.map((e) => e.data)).toEqual(['{"a":1}']);
    expect(cut.discarded).toBe(true);
    const noBlank = parseAll(['data: [DONE]\n']);
    expect(noBlank.events).toEqual([]);
    expect(noBlank.discarded).toBe(true);
    expect(parseAll(['data: x\n\n']).discarded).toBe(false);
  });

  it('lets an exception thrown by the consumer propagate out of push', () => {
    const parser = new SseParser(() => {
      throw new Error('consumer failed');
    });
    expect(() => parser.push(new TextEncoder().encode('data: x\n\n'))).toThrow('consumer failed');
  });
});

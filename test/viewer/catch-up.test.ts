/**
 * A live page's catch-up (the rest of a long trace after the page's first entries) comes as
 * several events of bounded size, over a real socket: each under the stream's buffer bound, in
 * order, and together exactly the trace; a page that reconnects from any of them gets the rest
 * with no entry repeated or missing. A served page's stream attaches to the feed its page load
 * started, so the session's log is loaded once per page, not again for the stream.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readSessionTrace, type ReadTraceEntry } from '../../src/sessions/trace.js';
import { MemorySessionStore } from '../../src/stores/memory.js';
import { CATCH_UP_BYTES, CATCH_UP_ENTRIES, catchUpParts, type CatchUp } from '../../src/viewer/catch-up.js';
import { SseStream, liveLimits } from '../../src/viewer/sse.js';
import { parseCursorId } from '../../src/viewer/feed.js';
import { startViewer, type RunningViewer } from '../../src/viewer.js';
import { writeBigSession } from './fixtures/big-session.js';
import { followLikeEventSource, readEvents, type SseEvent } from './fixtures/live-clients.js';

const BOUND = 1 << 20;
let store: MemorySessionStore;
let viewer: RunningViewer;
let trace: ReadTraceEntry[];

beforeAll(async () => {
  store = new MemorySessionStore();
  // Tool results of 600 bytes: the byte bound cuts the events before the entry count does.
  await writeBigSession(store, 'long', 3_000, 600);
  trace = await readSessionTrace(store, 'long');
  viewer = await startViewer({ store, port: 0, pollMs: 20, live: { maxBufferedBytes: BOUND } });
});
afterAll(() => viewer.close());

const entriesOf = (events: SseEvent[]) => events.flatMap((event) => (JSON.parse(event.data!) as { entries: ReadTraceEntry[] }).entries);

/** Reads the stream at `path` until an event brings the trace's last entry. */
async function catchUp(path: string, headers: Record<string, string> = {}) {
  const last = trace.at(-1)!.seq;
  const reader = readEvents(viewer.port, path, headers);
  await reader.waitFor((event) => event.id !== undefined && parseCursorId(event.id)!.seq === last, 20_000);
  reader.close();
  return reader.events().filter((event) => event.data !== undefined);
}

describe("a live page's catch-up", () => {
  it('arrives as several events, each under the bound, that together are the whole trace after the cursor', async () => {
    const after = trace[99]!.seq;
    const log = (await store.load('long'))!.messages.length;
    const events = await catchUp(`/s/long/events?after=${after}&log=${log}`);
    expect(events.length).toBeGreaterThan(2);
    for (const event of events) expect(Buffer.byteLength(event.data!)).toBeLessThan(CATCH_UP_BYTES + 64 * 1024);
    expect(entriesOf(events)).toEqual(trace.slice(100));
    // Each event's id is the cursor after it: the seq of its last entry.
    for (const event of events) expect(parseCursorId(event.id!)!.seq).toBe(entriesOf([event]).at(-1)!.seq);
    // The log and the head come once, with the first entries.
    expect(events.filter((event) => 'log' in JSON.parse(event.data!))).toHaveLength(1);
    expect('head' in JSON.parse(events[0]!.data!)).toBe(true);
  });

  it('resumes from any event it was cut after: no entry repeated or missing', async () => {
    const log = (await store.load('long'))!.messages.length;
    const first = await catchUp(`/s/long/events?after=0&log=${log}`);
    const cut = first[1]!;
    const rest = await catchUp(`/s/long/events?after=0&log=${log}`, { 'last-event-id': cut.id! });
    expect([...entriesOf(first.slice(0, 2)), ...entriesOf(rest)]).toEqual(trace);
  });

  it('cuts by entry count and by bytes, a single larger entry alone', () => {
    const only = (entries: readonly ReadTraceEntry[], rest = {}): CatchUp => ({ entries, rest, log: { from: 0, messages: [] }, seq: { from: 0, to: entries.at(-1)?.seq ?? 0 } });
    const counted = catchUpParts(only(trace.slice(0, 205)), { entries: 100, bytes: 1e9 });
    expect(counted.map((part) => (JSON.parse(part.json) as { entries: unknown[] }).entries.length)).toEqual([100, 100, 5]);
    expect(catchUpParts(only(trace)).every((part) => (JSON.parse(part.json) as { entries: unknown[] }).entries.length <= CATCH_UP_ENTRIES)).toBe(true);
    const big = { seq: 1e6, entry: { type: 'prune', at: 0, pruned: 0, before: 0, after: 0, note: 'x'.repeat(3_000) } } as unknown as ReadTraceEntry;
    const sized = catchUpParts({ ...only([trace[0]!, big, trace[1]!], { head: 1 }), seq: { from: 0, to: 2e6 } }, { entries: 100, bytes: 1_000 });
    // The last event's cursor is the feed's: every entry up to it is in.
    expect(sized.map((part) => part.cursor.seq)).toEqual([trace[0]!.seq, 1e6, 2e6]);
    expect(JSON.parse(sized[0]!.json)).toEqual({ entries: [trace[0]], head: 1 });
    expect(JSON.parse(catchUpParts(only([], { head: 1 }))[0]!.json)).toEqual({ entries: [], log: { from: 0, messages: [] }, head: 1 });
  });

  it('cuts the log too: entries first, then log slices; each cursor says what the page holds after it', () => {
    const messages = Array.from({ length: 10 }, (_, i) => ({ role: 'user', content: `${i}`.padEnd(400, '.') }));
    const parts = catchUpParts({ entries: trace.slice(0, 3), rest: { head: 1 }, log: { from: 5, messages }, seq: { from: 7, to: 99 } }, { entries: 100, bytes: 1_000 });
    const bodies = parts.map((part) => JSON.parse(part.json) as { entries: ReadTraceEntry[]; log?: { from: number; messages: unknown[] }; head?: number });
    // Entries of 193, 407 and 835 bytes, then messages of about 430: at most 1,000 bytes an event.
    expect(bodies.map((b) => [b.entries.length, b.log?.from, b.log?.messages.length])).toEqual([[2, undefined, undefined], [1, undefined, undefined], [0, 5, 2], [0, 7, 2], [0, 9, 2], [0, 11, 2], [0, 13, 2]]);
    expect(bodies[0]!.head).toBe(1);
    expect(bodies.slice(1).every((b) => b.head === undefined)).toBe(true);
    // While entries come, a page holds the log before `from` (unchanged all along the catch-up); once they
    // are all in, the whole trace (the feed's cursor, 99) and the log to each slice's end.
    expect(parts.map((part) => part.cursor)).toEqual([
      { seq: trace[1]!.seq, log: 5 },
      { seq: 99, log: 5 },
      { seq: 99, log: 7 },
      { seq: 99, log: 9 },
      { seq: 99, log: 11 },
      { seq: 99, log: 13 },
      { seq: 99, log: 15 },
    ]);
    expect(bodies.flatMap((b) => b.log?.messages ?? [])).toEqual(messages);
  });
});

describe("a served page's event stream", () => {
  it("attaches to the feed the page load started: the session's log is loaded once, not again for the stream", async () => {
    const counted = new MemorySessionStore();
    await writeBigSession(counted, 'once', 3_000, 600);
    const loads: string[] = [];
    const load = counted.load.bind(counted);
    counted.load = (id) => (loads.push(id), load(id));
    const served = await startViewer({ store: counted, port: 0, pollMs: 20 });
    try {
      const html = await (await fetch(`${served.url}s/once`)).text();
      expect(loads).toEqual(['once']);
      const data = JSON.parse(/id="loopchart-data">([\s\S]*?)<\/script>/.exec(html)![1]!) as { session: { logFrom: number; messages: unknown[] } };
      const from = (JSON.parse(/id="loopchart-trace">([\s\S]*?)<\/script>/.exec(html)![1]!) as ReadTraceEntry[]).at(-1)!.seq;
      const reader = readEvents(served.port, `/s/once/events?after=${from}&log=${data.session.logFrom + data.session.messages.length}`);
      const last = (await readSessionTrace(counted, 'once')).at(-1)!.seq;
      await reader.waitFor((event) => event.id !== undefined && parseCursorId(event.id)!.seq === last, 20_000);
      reader.close();
      // The catch-up came, from the feed the page started: no second load of the 3,000 messages.
      expect(reader.events().filter((event) => event.data !== undefined).length).toBeGreaterThan(0);
      expect(loads).toEqual(['once']);
    } finally {
      await served.close();
    }
  });
});

describe('a page that missed more than the bound while asleep (issue 41)', () => {
  /** A page that loaded the session near its start: it holds the first 10 entries and 10 messages. */
  let asleep: MemorySessionStore;
  let served: RunningViewer;
  let full: ReadTraceEntry[];
  let log: unknown[];
  const cursor = () => `after=${full[9]!.seq}&log=10`;
  const caughtUp = (events: SseEvent[]) => events.some((event) => event.id !== undefined && event.id === `${full.at(-1)!.seq}:${log.length}`);

  beforeAll(async () => {
    asleep = new MemorySessionStore();
    // About 1.2 MB of log and 2.4 MB of trace: the log it missed alone passes the 1 MiB bound.
    await writeBigSession(asleep, 'asleep', 2_000, 1_200);
    full = await readSessionTrace(asleep, 'asleep');
    log = (await asleep.load('asleep'))!.messages;
    served = await startViewer({ store: asleep, port: 0, pollMs: 20, live: { retryMs: 20 } });
  });
  afterAll(() => served.close());

  it('catches up on its first connection, in events under the bound, the log in slices; together exactly what it missed', async () => {
    expect(Buffer.byteLength(JSON.stringify(log.slice(10)))).toBeGreaterThan(BOUND);
    // Before: the first catch-up event (entries and the whole log) went out behind the stream's unsent header and
    // was "over the bound"; the drop notice had no id, so the page came back with the same cursor, for ever.
    const followed = await followLikeEventSource(served.port, `/s/asleep/events?${cursor()}`, caughtUp);
    expect(followed.connections).toBe(1);
    const data = followed.events.filter((event) => event.data !== undefined);
    expect(data.every((event) => event.event === undefined)).toBe(true);
    for (const event of data) expect(Buffer.byteLength(event.data!)).toBeLessThan(CATCH_UP_BYTES + 64 * 1024);
    expect(entriesOf(data)).toEqual(full.slice(10));
    const slices = data.map((event) => (JSON.parse(event.data!) as { log?: { from: number; messages: unknown[] } }).log).filter((slice) => slice !== undefined);
    expect(slices.length).toBeGreaterThan(1);
    expect(slices[0]!.from).toBe(10);
    expect(slices.flatMap((slice) => slice.messages)).toEqual(log.slice(10));
    expect(served.liveStats().dropped).toBe(0);
  });

  it('a page dropped in the middle of its catch-up reconnects past what it got: from an entries event and from a log slice', async () => {
    const first = await followLikeEventSource(served.port, `/s/asleep/events?${cursor()}`, caughtUp);
    const data = first.events.filter((event) => event.data !== undefined);
    const parsed = data.map((event) => JSON.parse(event.data!) as { entries: ReadTraceEntry[]; log?: { from: number; messages: unknown[] } });
    const inLog = parsed.findIndex((body, i) => i > 0 && body.entries.length === 0 && body.log !== undefined);
    expect(inLog).toBeGreaterThan(1);
    for (const cut of [1, inLog]) {
      const again = readEvents(served.port, `/s/asleep/events?${cursor()}`, { 'last-event-id': data[cut - 1]!.id! });
      const last = await again.waitFor((event) => caughtUp([event]), 20_000);
      again.close();
      const after = again.events().filter((event) => event.data !== undefined);
      expect(last).toBeDefined();
      // Entries: what it had, then the rest, each once.
      expect([...entriesOf(data.slice(0, cut)), ...entriesOf(after)]).toEqual(full.slice(10));
      // The log, applied as the page does (each slice replaces what it holds past `from`), is the stored log.
      let held = log.slice(0, 10);
      for (const body of [...parsed.slice(0, cut), ...after.map((event) => JSON.parse(event.data!) as (typeof parsed)[number])]) {
        if (body.log) held = [...held.slice(0, body.log.from), ...body.log.messages];
      }
      expect(held).toEqual(log);
    }
  });

  it("a dropped page's notice carries the id of the last event it was sent; the stream's own header is not unread", () => {
    const written: Buffer[] = [];
    // A sink whose client reads nothing: everything written stays waiting, the header (40 bytes) too.
    const sink = { writableLength: 40, write: (chunk: Buffer) => ((sink.writableLength += chunk.length), written.push(chunk)), end: (chunk?: Buffer) => chunk && written.push(chunk), destroy: () => {} };
    const stream = new SseStream(sink, liveLimits({ maxBufferedBytes: 100 }), () => {});
    // Larger than the bound minus the header: before, the header counted as unread and this dropped the page.
    expect(stream.send(Buffer.alloc(80, 'a'), '9:4')).toBe(true);
    expect(stream.send(Buffer.alloc(80, 'b'), '11:5')).toBe(false);
    expect(written.at(-1)!.toString()).toMatch(/^retry: 2000\nid: 9:4\nevent: dropped\n/);
  });
});

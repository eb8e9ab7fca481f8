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
import { CATCH_UP_BYTES, CATCH_UP_ENTRIES, catchUpParts } from '../../src/viewer/catch-up.js';
import { parseCursorId } from '../../src/viewer/feed.js';
import { startViewer, type RunningViewer } from '../../src/viewer.js';
import { writeBigSession } from './fixtures/big-session.js';
import { readEvents, type SseEvent } from './fixtures/live-clients.js';

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
    const counted = catchUpParts(trace.slice(0, 205), {}, { entries: 100, bytes: 1e9 });
    expect(counted.map((part) => (JSON.parse(part.json) as { entries: unknown[] }).entries.length)).toEqual([100, 100, 5]);
    expect(catchUpParts(trace, {}).every((part) => (JSON.parse(part.json) as { entries: unknown[] }).entries.length <= CATCH_UP_ENTRIES)).toBe(true);
    const big = { seq: 1e6, entry: { type: 'prune', at: 0, pruned: 0, before: 0, after: 0, note: 'x'.repeat(3_000) } } as unknown as ReadTraceEntry;
    const sized = catchUpParts([trace[0]!, big, trace[1]!], { head: 1 }, { entries: 100, bytes: 1_000 });
    expect(sized.map((part) => part.lastSeq)).toEqual([trace[0]!.seq, 1e6, trace[1]!.seq]);
    expect(JSON.parse(sized[0]!.json)).toEqual({ entries: [trace[0]], head: 1 });
    expect(JSON.parse(catchUpParts([], { head: 1 })[0]!.json)).toEqual({ entries: [], head: 1 });
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

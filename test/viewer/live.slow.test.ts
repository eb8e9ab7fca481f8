/**
 * The viewer's live streams under clients that stop reading (issue 25, item 1), over real
 * sockets: a stuck page is dropped once its unread bytes pass the bound, with a reconnect hint,
 * and the server's buffered bytes stay under the bound the whole time; a page that reads gets
 * only what changed since its cursor (one message per step, not the whole log); a dropped page
 * that reconnects with its last event id continues where it was. The same for `viewerInspector`.
 * A slow-project file: before the server buffers a byte for the stuck page, the loopback socket's
 * kernel buffers (megabytes) fill, about 14 s of steps.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MemorySessionStore } from '../../src/stores/memory.js';
import { assign, createActor, createMachine } from 'xstate';
import { startViewer, viewerInspector, type RunningViewer } from '../../src/viewer.js';
import { writeBigSession } from './fixtures/big-session.js';
import { growSession, readEvents, stuckClient, type SseEvent } from './fixtures/live-clients.js';

const BOUND = 512 * 1024;
const STEP_BYTES = 128 * 1024;
/** Far more than a loopback socket's kernel buffers hold, so the stuck page must hit the bound. */
const MAX_STEPS = 120;
const MESSAGES = 1_000;

interface Update {
  entries: { seq: number }[];
  head: { messageCount: number };
  log?: { from: number; messages: unknown[] };
}
const updateOf = (event: SseEvent) => JSON.parse(event.data!) as Update;

describe('viewer live streams', () => {
  let store: MemorySessionStore;
  let viewer: RunningViewer;
  let seq = 0;
  let log = 0;

  beforeAll(async () => {
    store = new MemorySessionStore();
    await writeBigSession(store, 'big', MESSAGES);
    seq = (await store.readTrace('big')).at(-1)!.seq;
    log = MESSAGES;
    viewer = await startViewer({ store, port: 0, pollMs: 5, live: { maxBufferedBytes: BOUND, dropGraceMs: 60_000 } });
  });
  afterAll(async () => {
    await viewer?.close();
  });

  it('drops a page that stops reading once its unread bytes pass the bound; a reading page gets each step as a delta', async () => {
    const path = `/s/big/events?after=${seq}&log=${log}`;
    const reader = readEvents(viewer.port, path);
    const stuck = stuckClient(viewer.port, path);
    expect(await reader.status()).toBe(200);
    await expectSoon(() => viewer.liveStats().clients === 2);
    let maxBuffered = 0;
    let steps = 0;
    while (viewer.liveStats().dropped === 0 && steps < MAX_STEPS) {
      ({ seq, log } = await growSession(store, 'big', STEP_BYTES, seq));
      steps++;
      const want = `${seq}:${log}`;
      await reader.waitFor((event) => event.id === want);
      maxBuffered = Math.max(maxBuffered, viewer.liveStats().bufferedBytes);
    }
    const stats = viewer.liveStats();
    console.log(`stuck page dropped after ${steps} steps of ${STEP_BYTES} bytes; at most ${maxBuffered} bytes buffered (bound ${BOUND})`);
    expect(stats.dropped).toBe(1);
    expect(stats.clients).toBe(1);
    // Never more waiting in the server than the bound (plus the short drop hint).
    expect(maxBuffered).toBeLessThanOrEqual(BOUND + 512);

    // The reading page: one update per step, each with only the message that step added.
    const updates = reader.events().filter((event) => event.data !== undefined && event.event === undefined);
    expect(updates).toHaveLength(steps);
    updates.forEach((event, i) => {
      const update = updateOf(event);
      expect(update.log!.from).toBe(MESSAGES + i);
      expect(update.log!.messages).toHaveLength(1);
      expect(update.entries).toHaveLength(1);
      expect(update.head.messageCount).toBe(MESSAGES + 1 + i);
    });

    // The stuck page, once it reads: what it was sent, then the reason and a reconnect hint, then the end.
    const seen = await stuck.readToEnd();
    const last = seen.at(-1)!;
    expect(last.event).toBe('dropped');
    expect(last.retry).toBeGreaterThan(0);
    expect(JSON.parse(last.data!).reason).toMatch(/fell behind \(\d+ bytes unread\); reconnect/);
    // The notice carries the cursor of the last update the page was sent: an EventSource reconnects from it.
    expect(last.id).toBe(seen.filter((event) => event.id !== undefined && event.event === undefined).at(-1)!.id);
    await expectSoon(() => viewer.liveStats().dropping === 0);
    expect(viewer.liveStats().bufferedBytes).toBe(0);

    // It reconnects with the id of the last update it got: it is sent exactly what it missed.
    const lastId = seen.filter((event) => event.id !== undefined).at(-1)!.id!;
    const [gotSeq, gotLog] = lastId.split(':').map(Number) as [number, number];
    const again = readEvents(viewer.port, path, { 'last-event-id': lastId });
    const catchUp = updateOf(await again.waitFor((event) => event.id === `${seq}:${log}`));
    expect(catchUp.log!.from).toBe(gotLog);
    expect(catchUp.log!.messages).toHaveLength(log - gotLog);
    expect(catchUp.entries.map((entry) => entry.seq)).toEqual(Array.from({ length: seq - gotSeq }, (_, i) => gotSeq + 1 + i));
    again.close();
    reader.close();
  }, 90_000);

  it('a page in step is sent nothing on connect; a malformed Last-Event-ID is a 400', async () => {
    const quiet = readEvents(viewer.port, `/s/big/events?after=${seq}&log=${log}`);
    expect(await quiet.status()).toBe(200);
    await expectSoon(() => viewer.liveStats().clients === 1);
    ({ seq, log } = await growSession(store, 'big', 10, seq));
    const first = updateOf(await quiet.waitFor((event) => event.id === `${seq}:${log}`));
    expect(first.log).toEqual({ from: log - 1, messages: [expect.objectContaining({ role: 'user' })] });
    expect(quiet.events().filter((event) => event.data !== undefined)).toHaveLength(1);
    quiet.close();
    for (const id of ['12', '1:2:3', 'x:1', '-1:0', '1e3:0']) {
      const refused = readEvents(viewer.port, '/s/big/events', { 'last-event-id': id });
      expect(await refused.status(), id).toBe(400);
      refused.close();
    }
  });
});

describe('viewerInspector live streams', () => {
  it('drops a page that stops reading once its unread bytes pass the bound; a reading page gets every row', async () => {
    const bound = 128 * 1024;
    const inspector = viewerInspector({ live: { maxBufferedBytes: bound, dropGraceMs: 60_000 } });
    const port = Number(new URL(await inspector.ready).port);
    try {
      // Every event's row carries the context (clipped to 4,000 characters): about 4 KB a row.
      const counter = createMachine({
        id: 'counter',
        context: { n: 0, note: 'x'.repeat(10_000) },
        on: { tick: { actions: assign({ n: ({ context }) => context.n + 1 }) } },
      });
      const actor = createActor(counter, { inspect: inspector.inspect }).start();
      const path = `/a/${encodeURIComponent(actor.sessionId)}/events?after=1`;
      const reader = readEvents(port, path);
      const stuck = stuckClient(port, path);
      await expectSoon(() => inspector.liveStats().clients === 2);
      let sent = 0;
      let maxBuffered = 0;
      while (inspector.liveStats().dropped === 0 && sent < 20_000) {
        // Bursts below the bound: a page that reads keeps up with each.
        for (let i = 0; i < 20; i++, sent++) actor.send({ type: 'tick' });
        await reader.waitFor((event) => event.id === String(sent + 1));
        maxBuffered = Math.max(maxBuffered, inspector.liveStats().bufferedBytes);
      }
      console.log(`inspector: stuck page dropped after ${sent} events; at most ${maxBuffered} bytes buffered (bound ${bound})`);
      expect(inspector.liveStats()).toMatchObject({ dropped: 1, clients: 1 });
      expect(maxBuffered).toBeLessThanOrEqual(bound + 512);
      const rows = reader.events().filter((event) => event.data !== undefined).flatMap((event) => (JSON.parse(event.data!) as { rows: { seq: number }[] }).rows.map((row) => row.seq));
      expect(rows).toEqual(Array.from({ length: sent }, (_, i) => i + 2));
      const seen = await stuck.readToEnd();
      expect(seen.at(-1)!.event).toBe('dropped');
      await expectSoon(() => inspector.liveStats().bufferedBytes === 0);
      reader.close();
    } finally {
      await inspector.close();
    }
  }, 90_000);
});

/** Waits (bounded: 5 s) for a condition on the server's own counters. */
async function expectSoon(condition: () => boolean, timeoutMs = 5_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > until) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

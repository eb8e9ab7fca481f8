/**
 * The viewer's live streams with clients that stop reading (issue 25, item 1): heap with 0, 20
 * and 200 stuck clients (sockets that send their request and never read) on one 5,000-message
 * session (about 10 MB of log), while a live run stores steps. One page that reads is open in
 * every row and checks what an update weighs.
 *
 * Two phases per row: 50 small steps (one ~2 KB message each, a run as it goes), then 24 big
 * ones (256 KB each: 6 MB per client, more than a loopback socket's kernel buffers hold, so
 * stuck clients reach the server's bound, 1 MiB by default, and are dropped). Memory is read after a full GC:
 * heap, plus array buffers (the bytes waiting in sockets are Buffers, outside the JS heap).
 * "waiting" counts what the server holds for every client (shared Buffers: the same bytes for
 * every client that got the same updates, so "buffers" stays small); dropped clients release it
 * once the grace ends. Before this fix every update carried the whole log ("whole log" column) to every client,
 * stuck or not, and nothing bounded what waited for them.
 */
import { pathToFileURL } from 'node:url';
import { MemorySessionStore } from '../src/stores/memory.js';
import { startViewer } from '../src/viewer.js';
import { writeBigSession } from '../test/viewer/fixtures/big-session.js';
import { growSession, readEvents, stuckClient, type StuckClient } from '../test/viewer/fixtures/live-clients.js';
import { printTable } from './support.js';

const MESSAGES = 5_000;
const STUCK = [0, 20, 200];
const SMALL_STEPS = 50;
const BIG_STEPS = 24;
const BIG_BYTES = 256 * 1024;
/** A dropped client still unread after this long is disconnected (the default is 10 s; shorter keeps the bench short). */
const GRACE_MS = 3_000;

const mb = (bytes: number) => bytes / 2 ** 20;

function memory(): { heap: number; buffers: number } {
  (globalThis as { gc?: () => void }).gc?.();
  const usage = process.memoryUsage();
  return { heap: usage.heapUsed, buffers: usage.arrayBuffers };
}

async function settle(): Promise<void> {
  for (let i = 0; i < 3; i++) await new Promise((resolve) => setTimeout(resolve, 20));
}

async function measure(stuckCount: number) {
  const store = new MemorySessionStore();
  await writeBigSession(store, 'big', MESSAGES, 4_000);
  let seq = (await store.readTrace('big')).at(-1)!.seq;
  let log = MESSAGES;
  const wholeLog = Buffer.byteLength(JSON.stringify((await store.load('big'))!.messages));
  const viewer = await startViewer({ store, port: 0, pollMs: 20, live: { dropGraceMs: GRACE_MS } });
  const path = `/s/big/events?after=${seq}&log=${log}`;
  const reader = readEvents(viewer.port, path);
  await reader.status();
  const stuck: StuckClient[] = Array.from({ length: stuckCount }, () => stuckClient(viewer.port, path));
  for (let i = 0; i < 500 && viewer.liveStats().clients < stuckCount + 1; i++) await settle();
  await settle();
  const before = memory();
  const step = async (bytes: number) => {
    ({ seq, log } = await growSession(store, 'big', bytes, seq));
    await reader.waitFor((event) => event.id === `${seq}:${log}`, 30_000);
  };
  const t0 = performance.now();
  for (let i = 0; i < SMALL_STEPS; i++) await step(2_000);
  const smallMs = (performance.now() - t0) / SMALL_STEPS;
  await settle();
  const afterSmall = memory();
  const perUpdate = reader.events().filter((event) => event.data !== undefined && event.event === undefined).map((event) => event.data!.length);
  const smallUpdate = perUpdate.reduce((a, b) => a + b, 0) / perUpdate.length;
  for (let i = 0; i < BIG_STEPS; i++) await step(BIG_BYTES);
  await settle();
  const afterBig = memory();
  const stats = viewer.liveStats();
  await new Promise((resolve) => setTimeout(resolve, GRACE_MS + 500));
  const afterGrace = { ...memory(), stats: viewer.liveStats() };
  for (const client of stuck) client.socket.destroy();
  reader.close();
  await viewer.close();
  return { stuckCount, wholeLog, smallUpdate, smallMs, before, afterSmall, afterBig, stats, afterGrace };
}

export async function run(): Promise<void> {
  const results = [];
  for (const count of STUCK) results.push(await measure(count));
  const base = results[0]!;
  printTable(
    `viewer live streams: one ${MESSAGES}-message session, ${SMALL_STEPS} steps of 2 KB then ${BIG_STEPS} of ${BIG_BYTES / 1024} KB; memory after GC (MB)`,
    ['stuck clients', 'heap before', 'heap after small steps', 'heap after big steps', 'vs 0 clients', 'buffers after', 'small update (bytes)', 'whole log (bytes)', 'ms/step', 'dropped', 'waiting (KB)', 'waiting after grace (KB)', 'heap after grace'],
    results.map((r) => [
      r.stuckCount,
      mb(r.before.heap),
      mb(r.afterSmall.heap),
      mb(r.afterBig.heap),
      `${(r.afterBig.heap / base.afterBig.heap).toFixed(2)}x`,
      mb(r.afterBig.buffers),
      Math.round(r.smallUpdate),
      r.wholeLog,
      r.smallMs,
      r.stats.dropped,
      Math.round(r.stats.bufferedBytes / 1024),
      Math.round(r.afterGrace.stats.bufferedBytes / 1024),
      mb(r.afterGrace.heap),
    ]),
  );
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await run();

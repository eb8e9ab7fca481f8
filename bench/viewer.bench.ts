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
 *
 * Then a 10,000-turn session in a SQLite file (issue 24 item 5, the parts without a browser;
 * test/browser/big-session.browser.test.ts prints the page's figures in chromium): a page load of the
 * unchanged session (its log read for the last page is used again) against one after a step
 * was stored (the log read and validated again, as every load did before), and the prompt of
 * the last model call on a fresh page (one slice of a shared tape) against rebuilding it from
 * every delta (what the page did on its first jump to the end).
 *
 * Then the statechart layout of a user's machine of 25 to 200 states (test/viewer/fixtures/
 * big-machine.ts: nested and parallel states, four transitions a state): before, ELK laid out
 * each view of a chart as one graph, whose cost grows much faster than the chart (the fullest
 * view and all the views a page carries are timed that way, `whole: 'always'`, one run from 100
 * states on); now a chart over the budget of one graph goes container by container
 * (src/viewer/chart-pieces.ts).
 * Also how long a small chart's layout waits when it is asked for while the big one is laid out
 * (the layout worker takes one graph at a time), and the longest the event loop was held.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { createMachine } from 'xstate';
import { promptsOf, type TraceEntry } from '../src/sessions/trace.js';
import { MemorySessionStore } from '../src/stores/memory.js';
import { SqliteSessionStore } from '../src/stores/sqlite.js';
import { loadSessionView } from '../src/viewer/load.js';
import { promptAt, rowsOf } from '../src/viewer/rows.js';
import { startViewer } from '../src/viewer.js';
import { chartOf, type ChartModel } from '../src/viewer/chart.js';
import { chartViews, compoundsOf } from '../src/viewer/chart-fold.js';
import { layoutChart, layoutViews } from '../src/viewer/chart-layout.js';
import { elkStats } from '../src/viewer/elk-worker.js';
import { bigMachine } from '../test/viewer/fixtures/big-machine.js';
import { writeBigSession } from '../test/viewer/fixtures/big-session.js';
import { growSession, readEvents, stuckClient, type StuckClient } from '../test/viewer/fixtures/live-clients.js';
import { median, printTable } from './support.js';

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

const TURNS = 10_000;
const LOADS = 7;

async function timed<T>(fn: () => Promise<T> | T): Promise<number> {
  const t0 = performance.now();
  await fn();
  return performance.now() - t0;
}

async function bigSession(): Promise<void> {
  const root = mkdtempSync(join(tmpdir(), 'loopchart-bench-viewer-'));
  const store = new SqliteSessionStore({ path: join(root, 'big.db') });
  try {
    await writeBigSession(store, 'turns', 2 * (TURNS - 1) + 2);
    const viewer = await startViewer({ store, port: 0, pollMs: 60_000 });
    const get = async () => (await fetch(`${viewer.url}s/turns`)).text();
    const cold = await timed(get);
    const unchanged: number[] = [];
    const changed: number[] = [];
    let seq = (await store.readTrace('turns')).at(-1)!.seq;
    for (let i = 0; i < LOADS; i++) {
      unchanged.push(await timed(get));
      ({ seq } = await growSession(store, 'turns', 200, seq));
      changed.push(await timed(get));
    }
    await viewer.close();
    const view = (await loadSessionView(store, 'turns'))!;
    const builds: number[] = [];
    const tapes: number[] = [];
    const deltas: number[] = [];
    const entries = view.trace.flatMap((record) => ('entry' in record ? [record.entry as TraceEntry] : []));
    for (let i = 0; i < 5; i++) {
      const t0 = performance.now();
      const builder = rowsOf({ session: view });
      builds.push(performance.now() - t0);
      const last = builder.rows.findLastIndex((row) => row.kind === 'model');
      tapes.push(await timed(() => promptAt(builder, last)));
      deltas.push(await timed(() => promptsOf(entries).at(-1)));
    }
    const [load, unchangedMs, prompt] = [median(changed), median(unchanged), median(tapes)];
    printTable(
      `viewer on a ${TURNS.toLocaleString('en-US')}-turn session (SQLite file, ${view.trace.length.toLocaleString('en-US')} trace entries; medians, ms)`,
      ['what', 'baseline', 'ms', 'now', 'ms', 'ratio'],
      [
        ['page load (server)', 'a step stored since: log read again', load, 'unchanged: log reused', unchangedMs, `${(load / unchangedMs).toFixed(1)}x`],
        ['last prompt, fresh page', 'rebuilt from every delta', median(deltas), 'slice of its tape', prompt, `${(median(deltas) / prompt).toFixed(0)}x`],
        ['first page load (cold)', '', '', 'trace and log read', cold, ''],
        ['timeline rows built', '', '', `${view.trace.length} entries`, median(builds), ''],
      ],
    );
  } finally {
    await store.close();
    rmSync(root, { recursive: true, force: true });
  }
}

const CHART_SIZES = [25, 50, 100, 200];
/** A small chart asked for while a big one is laid out: three states, a compound one. */
const smallChart = (n: number): ChartModel =>
  chartOf(createMachine({ id: `small${n}`, initial: 'a', states: { a: { on: { go: 'b' } }, b: { initial: 'x', on: { back: 'a' }, states: { x: { on: { [`step${n}`]: 'y' } }, y: {} } } } }));

async function timedMs(fn: () => Promise<unknown>): Promise<number> {
  const t0 = performance.now();
  await fn();
  return performance.now() - t0;
}

/** How long a fresh small chart's views take when asked for just after `big` started. */
async function smallWhile(big: () => Promise<unknown>, n: number): Promise<number> {
  const running = big();
  await new Promise((resolve) => setTimeout(resolve, 50));
  const waited = await timedMs(() => layoutViews(smallChart(n)));
  await running;
  return waited;
}

export async function chartLayouts(): Promise<void> {
  await layoutViews(chartOf(bigMachine(40))); // the worker started, ELK's code warm
  const rows: (string | number)[][] = [];
  let n = 0;
  for (const size of CHART_SIZES) {
    const chart = chartOf(bigMachine(size));
    const all = compoundsOf(chart);
    const runs = size <= 50 ? 3 : 1;
    const before: number[] = [];
    const beforeViews: number[] = [];
    const beforeWait: number[] = [];
    elkStats.largest = 0;
    for (let i = 0; i < runs; i++) {
      before.push(await timedMs(() => layoutChart(chart, all, { whole: 'always' })));
      beforeViews.push(await timedMs(() => layoutViews(chart, { whole: 'always' })));
      beforeWait.push(await smallWhile(() => layoutChart(chart, all, { whole: 'always' }), n++));
    }
    const largestBefore = elkStats.largest;
    const fullest: number[] = [];
    const views: number[] = [];
    const wait: number[] = [];
    elkStats.largest = 0;
    elkStats.longestMs = 0;
    const delay = monitorEventLoopDelay({ resolution: 10 });
    delay.enable();
    for (let i = 0; i < 3; i++) {
      fullest.push(await timedMs(() => layoutChart(chart, all)));
      views.push(await timedMs(() => layoutViews(chart)));
      wait.push(await smallWhile(() => layoutViews(chart), n++));
    }
    delay.disable();
    rows.push([
      size,
      chart.transitions.length,
      chartViews(chart).length,
      largestBefore,
      median(before),
      median(beforeViews),
      median(beforeWait),
      elkStats.largest,
      median(fullest),
      median(views),
      Math.round(elkStats.longestMs),
      median(wait),
      Math.round(delay.max / 1e6),
    ]);
  }
  printTable(
    'viewer statechart layout: a machine of N states (medians, ms; before: one run from 100 states on)',
    ['states', 'transitions', 'views', 'before: one graph (nodes+edges)', 'before: fullest view', 'before: all views', 'before: small chart waits', 'now: largest graph', 'now: fullest view', 'now: all views', 'now: longest ELK job', 'now: small chart waits', 'now: event loop held'],
    rows,
  );
}

export async function run(): Promise<void> {
  await chartLayouts();
  await bigSession();
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

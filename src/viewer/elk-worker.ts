import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import type { ElkNode } from 'elkjs/lib/elk-api.js';
import { LoopchartError } from '../errors.js';

/**
 * ELK in a worker thread, so no layout ever runs on the event loop of the process serving pages
 * (often a product's own server, its chat handler beside the viewer). The worker takes one graph
 * at a time: the rest wait here, in the order they were asked for, so a chart laid out in small
 * pieces (see chart-pieces.ts) lets another chart's pieces in between its own. Each graph has a
 * budget of time counted from when the worker starts it (not from when it was queued, behind
 * others); a graph over its budget is ended by terminating the worker, the only way to stop ELK
 * (a fresh worker takes the next graph), and its promise rejects with a `LayoutBudget` error.
 */

/** ELK's first layout in a thread takes seconds of CPU (1.6 MB of compiled Java warming up): the worker does it on a small graph before the first job, so no job's budget pays for it. */
const WORKER = `
const { parentPort, workerData } = require('node:worker_threads');
const ELK = require(workerData.elk);
const elk = new ELK();
const warm = {
  id: 'warm',
  layoutOptions: { 'elk.algorithm': 'layered', 'elk.hierarchyHandling': 'INCLUDE_CHILDREN', 'elk.edgeRouting': 'ORTHOGONAL', 'elk.layered.nodePlacement.strategy': 'NETWORK_SIMPLEX', 'elk.edgeLabels.placement': 'CENTER' },
  children: [{ id: 'a', width: 40, height: 20 }, { id: 'b', children: [{ id: 'c', width: 40, height: 20 }, { id: 'd', width: 40, height: 20 }], edges: [{ id: 'f', sources: ['c'], targets: ['d'] }] }],
  edges: [{ id: 'e', sources: ['a'], targets: ['c'], labels: [{ id: 'l', text: 'go', width: 20, height: 14 }] }],
};
parentPort.on('message', ({ id, graph }) => elk.layout(graph).then((laid) => parentPort.postMessage({ id, laid }), (error) => parentPort.postMessage({ id, error: String(error && error.message || error) })));
elk.layout(warm).then(() => parentPort.postMessage({ ready: true }), () => parentPort.postMessage({ ready: true }));
`;

/** A graph ELK did not lay out within its budget (the worker was terminated; the caller lays it out another way). */
export const layoutBudgetError = (budgetMs: number): LoopchartError => new LoopchartError('LayoutBudget', `the layout took over ${budgetMs} ms`);

/** Whether `error` is a layout past its budget (see `layoutBudgetError`). */
export const isLayoutBudget = (error: unknown): boolean => LoopchartError.isInstance(error) && error.code === 'LayoutBudget';

interface Job {
  id: number;
  graph: ElkNode;
  budgetMs: number;
  resolve: (graph: ElkNode) => void;
  reject: (error: Error) => void;
}

interface Running {
  thread: Worker;
  ready: boolean;
  job?: { job: Job; timer: NodeJS.Timeout } | undefined;
}

const queue: Job[] = [];
let current: Running | undefined;
let nextJob = 0;

/** Nodes and edges in an ELK graph, at every depth: what its layout's cost grows with (much faster than linearly). */
export function elementsOf(node: ElkNode): number {
  return (node.children ?? []).reduce((n, child) => n + 1 + elementsOf(child), node.edges?.length ?? 0);
}

/**
 * What ELK was given and did, since the process started: graphs laid out (or ended over budget),
 * their nodes and edges in all, the biggest one's, and the longest run (ms). For the bench, the
 * tests, and anyone wondering where a worker's CPU went.
 */
export const elkStats = { jobs: 0, overBudget: 0, elements: 0, largest: 0, longestMs: 0 };

function start(): Running {
  const elk = createRequire(import.meta.url).resolve('elkjs/lib/elk.bundled.js');
  const thread = new Worker(WORKER, { eval: true, workerData: { elk } });
  const running: Running = { thread, ready: false };
  thread.on('message', (message: { ready?: true | undefined; id?: number | undefined; laid?: ElkNode | undefined; error?: string | undefined }) => {
    if (message.ready) {
      running.ready = true;
      return pump();
    }
    const job = running.job;
    if (!job || job.job.id !== message.id) return;
    clearTimeout(job.timer);
    running.job = undefined;
    if (message.laid) job.job.resolve(message.laid);
    else job.job.reject(new Error(`ELK could not lay the chart out: ${message.error}`));
    pump();
  });
  const fail = (error: Error) => {
    if (current !== running) return; // terminated over budget: already settled
    current = undefined;
    if (running.job) {
      clearTimeout(running.job.timer);
      running.job.job.reject(error);
    } else if (!running.ready) {
      // It failed before its first job (elkjs cannot be loaded?): every waiting graph would fail the same way.
      for (const job of queue.splice(0)) job.reject(error);
    }
    pump();
  };
  thread.on('error', fail);
  thread.on('exit', (code) => fail(new Error(`the layout worker exited (${code})`)));
  return running;
}

/** Hands the worker the next graph when it is free. An idle worker never keeps a process alive; one with work does (a script awaiting a page must not exit mid-layout). */
function pump(): void {
  if (current?.job) return;
  if (queue.length === 0) {
    current?.thread.unref();
    return;
  }
  const running = (current ??= start());
  running.thread.ref();
  if (!running.ready) return; // its 'ready' pumps again
  const job = queue.shift()!;
  const started = performance.now();
  const elements = elementsOf(job.graph);
  elkStats.elements += elements;
  elkStats.largest = Math.max(elkStats.largest, elements);
  const timer = setTimeout(() => {
    // ELK cannot be interrupted: the worker goes, a fresh one (warmed up again) takes the next graph.
    current = undefined;
    running.job = undefined;
    void running.thread.terminate();
    elkStats.overBudget++;
    job.reject(layoutBudgetError(job.budgetMs));
    pump();
  }, job.budgetMs);
  timer.unref();
  const settle = <T>(fn: (value: T) => void) => (value: T) => {
    elkStats.jobs++;
    elkStats.longestMs = Math.max(elkStats.longestMs, performance.now() - started);
    fn(value);
  };
  running.job = { job: { ...job, resolve: settle(job.resolve), reject: settle(job.reject) }, timer };
  running.thread.postMessage({ id: job.id, graph: job.graph });
}

/**
 * Lays `graph` out in the worker, after the graphs asked for before it; rejects with
 * a `LayoutBudget` error (`isLayoutBudget`) when ELK takes longer than `budgetMs` on it.
 */
export function elkLayout(graph: ElkNode, budgetMs: number): Promise<ElkNode> {
  return new Promise<ElkNode>((resolve, reject) => {
    queue.push({ id: nextJob++, graph, budgetMs, resolve, reject });
    pump();
  });
}

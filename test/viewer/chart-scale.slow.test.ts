/**
 * A big chart's layout (a user's own statechart that embeds the agent can have hundreds of
 * states): ELK's layered layout of one graph costs much more than linearly in the graph's size
 * (a 100-state chart took seconds, a 200-state one ran into the 30 s timeout and the worker went
 * on with it after), and the layout worker lays out one graph at a time, so every other chart
 * waited behind it. Counted, not timed: what ELK is given (nodes and edges per graph, read from
 * the messages to the worker), so the bounds hold on a busy machine. Then the drawing of every
 * view is checked as the small charts' are, and a graph over its time budget ends the worker.
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { Worker } from 'node:worker_threads';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { cachedViews, WHOLE_BUDGET, wholeElements } from '../../src/viewer/chart-layout.js';
import { chartViews } from '../../src/viewer/chart-fold.js';
import type { ChartLayout } from '../../src/viewer/chart-geometry.js';
import { chartOf, type ChartModel } from '../../src/viewer/chart.js';
import { elementsOf, elkLayout, elkStats } from '../../src/viewer/elk-worker.js';
import { agentChart } from '../../src/viewer/server.js';
import { bigMachine } from './fixtures/big-machine.js';

type Box = { x: number; y: number; width: number; height: number };
const inside = (a: Box, b: Box) => a.x >= b.x && a.y >= b.y && a.x + a.width <= b.x + b.width && a.y + a.height <= b.y + b.height;
const overlap = (a: Box, b: Box) => a.x < b.x + b.width - 0.5 && b.x < a.x + a.width - 0.5 && a.y < b.y + b.height - 0.5 && b.y < a.y + a.height - 0.5;

/** The graphs the layout worker is given while `run` runs: each one's nodes and edges. */
async function graphsGiven<T>(run: () => Promise<T>): Promise<{ result: T; sizes: number[] }> {
  const sizes: number[] = [];
  const post = Worker.prototype.postMessage;
  vi.spyOn(Worker.prototype, 'postMessage').mockImplementation(function (this: Worker, message: unknown, ...rest: unknown[]) {
    const graph = (message as { graph?: Parameters<typeof elementsOf>[0] } | null)?.graph;
    if (graph) sizes.push(elementsOf(graph));
    return post.call(this, message, ...(rest as []));
  });
  try {
    return { result: await run(), sizes };
  } finally {
    vi.restoreAllMocks();
  }
}

/** Every state in its parent, every line in its state, every jump box in its container, no edge label over a box it does not belong to: what is wrong, as a list. */
function drawingProblems(layout: ChartLayout): string[] {
  const problems: string[] = [];
  const byId = new Map(layout.states.map((s) => [s.id, s]));
  const chart = { x: 0, y: 0, width: layout.width, height: layout.height };
  for (const s of layout.states) {
    if (!inside(s, s.parent ? byId.get(s.parent)! : chart)) problems.push(`${s.id} outside ${s.parent}`);
    for (const line of s.lines) if (!inside(line, s)) problems.push(`'${line.text}' outside ${s.id}`);
  }
  for (const jump of layout.jumps) if (!inside(jump, jump.parent ? byId.get(jump.parent)! : chart)) problems.push(`→ ${jump.to} outside ${jump.parent}`);
  const holders = (id: string | null) => new Set(id === null ? [] : id.split('.').map((_, i, parts) => parts.slice(0, i + 1).join('.')));
  for (const edge of layout.edges) {
    if (!/^M [\d.]+ [\d.]+( L [\d.]+ [\d.]+)+/.test(edge.path)) problems.push(`${edge.from} → ${edge.to}: path '${edge.path}'`);
    const own = holders(edge.container);
    for (const line of edge.lines) {
      for (const s of layout.states) if (!own.has(s.id) && overlap(line, s)) problems.push(`'${line.text}' of ${edge.from} → ${edge.to} over ${s.id}`);
      for (const j of layout.jumps) if (overlap(line, j)) problems.push(`'${line.text}' of ${edge.from} → ${edge.to} over → ${j.to}`);
    }
  }
  return problems;
}

/** Every transition with a target is an edge from its state, to its target or to a jump box standing for it, labelled with it. */
function checkTransitions(chart: ChartModel, layout: ChartLayout) {
  for (const t of chart.transitions) {
    if (t.to === null) continue;
    const edge = layout.edges.find((e) => e.from === t.from && e.to === t.to);
    expect(edge, `${t.from} → ${t.to}`).toBeDefined();
    expect(edge!.labels).toContain(`${t.event}${t.guards.length ? ` [${t.guards.join(' && ')}]` : ''}`);
    if (edge!.jump) expect(layout.jumps.some((j) => j.to === t.to && j.parent === edge!.container)).toBe(true);
  }
}

afterEach(() => vi.restoreAllMocks());

describe('a big chart', () => {
  it('150 states: ELK is given small graphs only, as many nodes and edges in all as the chart has (times a constant), and the event loop is never held', async () => {
    const small = chartOf(bigMachine(75));
    const big = chartOf(bigMachine(150));
    expect([small.states.length, big.states.length]).toEqual([75, 150]);
    const half = await graphsGiven(() => cachedViews(small));
    const delay = monitorEventLoopDelay({ resolution: 10 });
    delay.enable();
    const { result: views, sizes } = await graphsGiven(() => cachedViews(big));
    delay.disable();
    expect(views).not.toBeNull();
    expect(views!.map((v) => v.unfolded)).toEqual(chartViews(big));
    // Before: each view was one graph, the fullest 906 nodes and edges (ELK took most of a minute on all of them).
    expect(Math.max(...sizes)).toBeLessThanOrEqual(WHOLE_BUDGET);
    // All the views together: pieces shared between views are laid out once.
    const total = sizes.reduce((a, b) => a + b, 0);
    const elements = big.states.length + big.transitions.length;
    expect(total).toBeLessThan(20 * elements);
    // Twice the states, about twice the work (not four times).
    expect(total / half.sizes.reduce((a, b) => a + b, 0)).toBeLessThan(3);
    // Whatever ELK does happens in the worker: this thread only builds graphs and places pieces.
    expect(delay.max / 1e6).toBeLessThan(1_000);
    expect(views!.flatMap((view) => drawingProblems(view).map((p) => `${view.unfolded.length} unfolded: ${p}`))).toEqual([]);
    checkTransitions(big, views!.at(-1)!);
  }, 120_000);

  it('a graph over its time budget ends the worker, and a fresh one lays out the next graph', async () => {
    const graph = { id: 'g', layoutOptions: { 'elk.algorithm': 'layered' }, children: Array.from({ length: 400 }, (_, i) => ({ id: `n${i}`, width: 30, height: 20 })), edges: Array.from({ length: 1200 }, (_, i) => ({ id: `e${i}`, sources: [`n${i % 400}`], targets: [`n${(i * 7 + 13) % 400}`] })) };
    const over = elkStats.overBudget;
    await expect(elkLayout(graph, 1)).rejects.toMatchObject({ code: 'LayoutBudget' });
    expect(elkStats.overBudget).toBe(over + 1);
    const next = await elkLayout({ id: 'h', children: [{ id: 'a', width: 10, height: 10 }], edges: [] }, 30_000);
    expect(next.children![0]!.width).toBe(10);
  }, 60_000);

  it("the driver's chart stays under the budget of one graph (its drawing is ELK's whole layout, what the browser tests check)", () => {
    expect(wholeElements(agentChart())).toBeLessThanOrEqual(WHOLE_BUDGET);
  });
});

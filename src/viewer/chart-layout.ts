import type { ElkExtendedEdge, ElkNode } from 'elkjs/lib/elk-api.js';
import type { ChartModel } from './chart.js';
import { chartViews, compoundsOf, foldChart, type FoldedChart } from './chart-fold.js';
import type { ChartLayout, InitialMarker, LaidOutEdge, LaidOutJump } from './chart-geometry.js';
import { layoutPieces, type PieceMemo } from './chart-pieces.js';
import { compoundFrame, edgeLabelBox, jumpLine, jumpSize, jumpText, labelLines, LAYOUT_OPTIONS, MARKER, PAD, pairsOf, pathOf, stateOf, stateSize, staysOf, toHub, transitionLabel } from './chart-text.js';
import { elementsOf, elkLayout, isLayoutBudget } from './elk-worker.js';

export { edgeLabelLines, edgeLines, internalLines, transitionLabel, LAYOUT_OPTIONS } from './chart-text.js';

/**
 * A statechart laid out by ELK (the layered algorithm Stately's editor uses): nested states as
 * boxes inside their parents, one edge per pair of states carrying a label line per transition
 * (`event [guard && guard]`), transitions that stay listed inside their state's box. Runs in
 * Node when a page is produced, once per chart per process, so a served page and an exported
 * file carry the finished geometry and the page computes nothing.
 *
 * ELK lays a chart out whole, in one graph, while the graph is small (`WHOLE_BUDGET`): the
 * layered algorithm's cost grows much faster than the graph (bench/viewer.bench.ts: the fullest
 * view of a 100-state chart took 2.8 s, of a 200-state one 17 s, and all the views its page
 * carries 80 s; past 30 s the page gave up while the worker went on). A bigger chart, or one ELK
 * does not finish within `WHOLE_TIMEOUT_MS`, is laid out container by container
 * (chart-pieces.ts): each piece small, so the cost grows with the chart's size.
 */

/**
 * The largest chart ELK lays out in one graph, in nodes and edges (states, jump boxes, initial
 * dots, edges): the driver's chart is about 120, and takes ELK about a second; the cost of one
 * graph grows faster than its size, so a bigger chart goes by pieces.
 */
export const WHOLE_BUDGET = 160;
/** A whole chart ELK has not laid out in this long is laid out by pieces instead (the worker is terminated). */
export const WHOLE_TIMEOUT_MS = 20_000;

const parentOf = (id: string) => (id.includes('.') ? id.slice(0, id.lastIndexOf('.')) : null);
/** The deepest state holding both ends (a transition from a parent to its child is held by the parent). */
function containerOf(from: string, to: string): string | null {
  const a = from.split('.');
  const b = to.split('.');
  let i = 0;
  while (i < a.length - 1 && i < b.length - 1 && a[i] === b[i]) i++;
  const common = a.slice(0, i).join('.');
  if (to.startsWith(`${from}.`)) return from;
  if (from.startsWith(`${to}.`)) return to;
  return common || null;
}

interface Graph {
  elk: ElkNode;
  /** Each edge's transition labels, by the edge's id. */
  labels: Map<string, string[]>;
  /** Each jump box's hub and the state holding the box, by the box's id. */
  jumps: Map<string, { to: string; parent: string | null }>;
}

function buildGraph(chart: FoldedChart): Graph {
  const nodes = new Map<string, ElkNode>();
  const root: ElkNode = { id: '#root', children: [], edges: [] };
  const holder = (id: string | null) => (id === null ? root : nodes.get(id)!);
  const stays = staysOf(chart.transitions);
  const children = new Set(chart.states.map((s) => s.parent).filter((p): p is string => p !== null));
  for (const state of chart.states) {
    const size = stateSize(state, stays.get(state.id) ?? [], chart.folded.get(state.id));
    const frame = compoundFrame(size);
    const node: ElkNode = children.has(state.id)
      ? {
          id: state.id,
          children: [],
          edges: [],
          layoutOptions: {
            'elk.padding': `[top=${frame.top},left=${frame.left},bottom=${frame.bottom},right=${frame.right}]`,
            'elk.nodeSize.constraints': 'MINIMUM_SIZE',
            'elk.nodeSize.minimum': `(${frame.minWidth}, ${frame.minHeight})`,
          },
        }
      : { id: state.id, width: size.width, height: size.head + PAD };
    nodes.set(state.id, node);
    holder(state.parent).children!.push(node);
  }
  addInitials(chart, holder);
  return { elk: root, ...addEdges(chart, holder) };
}

function addInitials(chart: ChartModel, holder: (id: string | null) => ElkNode) {
  const parallel = new Set(chart.states.filter((s) => s.parallel).map((s) => s.id));
  for (const state of chart.states) {
    if (!state.initial || (state.parent !== null && parallel.has(state.parent))) continue;
    const box = holder(state.parent);
    box.children!.push({ id: `#init:${state.id}`, width: MARKER, height: MARKER });
    box.edges!.push({ id: `#init-edge:${state.id}`, sources: [`#init:${state.id}`], targets: [state.id] });
  }
}

function addEdges(chart: ChartModel, holder: (id: string | null) => ElkNode): Pick<Graph, 'labels' | 'jumps'> {
  const labelsOf = new Map<string, string[]>();
  const jumps: Graph['jumps'] = new Map();
  const { pairs, sources } = pairsOf(chart.transitions);
  const labelOf = new Map(chart.states.map((s) => [s.id, s.label]));
  let n = 0;
  for (const list of pairs.values()) {
    const { from, to } = list[0]! as { from: string; to: string };
    const labels = [...new Set(list.map(transitionLabel))];
    const { lines, width, height } = edgeLabelBox(labels);
    const id = `#edge:${n++}`;
    labelsOf.set(id, labels);
    const edge: ElkExtendedEdge = { id, sources: [from], targets: [to], labels: [{ id: `#label:${n}`, text: lines.join('\n'), width, height }] };
    // Into a hub from elsewhere (not from inside it): the edge ends at a jump box beside its source.
    if (toHub(sources, from, to)) {
      const jump = `#jump:${id}`;
      jumps.set(jump, { to, parent: parentOf(from) });
      const box = holder(parentOf(from));
      box.children!.push({ id: jump, ...jumpSize(jumpText(labelOf.get(to) ?? to)) });
      box.edges!.push({ ...edge, targets: [jump] });
      continue;
    }
    holder(containerOf(from, to)).edges!.push(edge);
  }
  return { labels: labelsOf, jumps };
}

function edgePath(edge: ElkExtendedEdge): string {
  return (edge.sections ?? []).map((s) => pathOf([s.startPoint, ...(s.bendPoints ?? []), s.endPoint])).join(' ');
}

function collectEdges(node: ElkNode, into: { edge: ElkExtendedEdge; container: string | null }[]) {
  for (const edge of node.edges ?? []) into.push({ edge, container: node.id === '#root' ? null : node.id });
  for (const child of node.children ?? []) collectEdges(child, into);
}

/** The chart as ELK laid it out in one graph. */
function wholeLayout(model: ChartModel, chart: FoldedChart, graph: Graph, done: ElkNode, unfolded: readonly string[]): ChartLayout {
  const placed = new Map<string, ElkNode>();
  const walk = (node: ElkNode) => {
    placed.set(node.id, node);
    node.children?.forEach(walk);
  };
  walk(done);
  const stays = staysOf(chart.transitions);
  const compound = new Set(chart.states.map((s) => s.parent));
  const boxOf = (node: ElkNode) => ({ x: node.x!, y: node.y!, width: node.width!, height: node.height! });
  const states = chart.states.map((s) => stateOf(s, boxOf(placed.get(s.id)!), compound.has(s.id), stays.get(s.id) ?? [], chart.folded.get(s.id)));
  const all: { edge: ElkExtendedEdge; container: string | null }[] = [];
  collectEdges(done, all);
  const edges: LaidOutEdge[] = [];
  const initials: InitialMarker[] = [];
  for (const { edge, container } of all) {
    const [from, to] = [edge.sources[0]!, edge.targets[0]!];
    if (from.startsWith('#init:')) {
      const dot = placed.get(from)!;
      initials.push({ parent: parentOf(to), to, x: dot.x! + MARKER / 2, y: dot.y! + MARKER / 2, path: edgePath(edge) });
      continue;
    }
    const lines = (edge.labels ?? []).flatMap((label) => labelLines(label.text ?? '', { x: label.x!, y: label.y! }));
    const hub = graph.jumps.get(to)?.to;
    edges.push({ from, to: hub ?? to, container, path: edgePath(edge), labels: graph.labels.get(edge.id) ?? [], lines, ...(hub !== undefined && { jump: true as const }) });
  }
  const labelOf = new Map(model.states.map((s) => [s.id, s.label]));
  const jumps = [...graph.jumps].map(([id, { to, parent }]): LaidOutJump => {
    const box = boxOf(placed.get(id)!);
    return { to, parent, ...box, lines: [jumpLine(jumpText(labelOf.get(to) ?? to), box)] };
  });
  return { unfolded: [...unfolded], width: Math.ceil(done.width!), height: Math.ceil(done.height!), states, edges, jumps, initials };
}

/** The size of a chart's view as one ELK graph (all unfolded by default), to hold against `WHOLE_BUDGET`. */
export const wholeElements = (chart: ChartModel, unfolded: readonly string[] = compoundsOf(chart)): number => elementsOf(buildGraph(foldChart(chart, unfolded)).elk);

/** How a chart was laid out: whole (one ELK graph) or by pieces; `whole: 'always'` skips the budget of size (the bench's "before"). */
export interface LayoutOptions {
  whole?: 'auto' | 'always' | 'never' | undefined;
  /** The pieces already laid out for another view of the same chart (`cachedViews` shares one). */
  memo?: PieceMemo | undefined;
}

/**
 * Lays a chart out with the compound states in `unfolded` open and every other one folded
 * (default: all open): whole when it is small (ELK layered, orthogonal edges routed through the
 * hierarchy, labels placed by the layout), else by pieces.
 */
export async function layoutChart(model: ChartModel, unfolded: readonly string[] = compoundsOf(model), options: LayoutOptions = {}): Promise<ChartLayout> {
  const chart = foldChart(model, unfolded);
  const whole = options.whole ?? 'auto';
  if (whole !== 'never') {
    const graph = buildGraph(chart);
    if (whole === 'always' || elementsOf(graph.elk) <= WHOLE_BUDGET) {
      try {
        const done = await elkLayout({ ...graph.elk, layoutOptions: LAYOUT_OPTIONS }, whole === 'always' ? 600_000 : WHOLE_TIMEOUT_MS);
        return wholeLayout(model, chart, graph, done, unfolded);
      } catch (error) {
        if (whole === 'always' || !isLayoutBudget(error)) throw error;
      }
    }
  }
  return layoutPieces(chart, unfolded, options.memo);
}

/**
 * A chart laid out in each of its views (see `chartViews`: all folded, each compound state
 * unfolded, all unfolded), one after the other, and a big chart's piece after piece: each is a
 * graph of its own for the layout worker, so another chart's layout waits for one piece at most,
 * not for this chart. Every view is drawn the same way: by pieces when the whole chart is over
 * the budget, even its views under it (`whole: 'always'`: each view whole, as before pieces).
 */
export async function layoutViews(chart: ChartModel, options: Pick<LayoutOptions, 'whole'> = {}): Promise<ChartLayout[]> {
  const memo: PieceMemo = new Map();
  const whole = options.whole ?? (wholeElements(chart) <= WHOLE_BUDGET ? 'auto' : 'never');
  const views: ChartLayout[] = [];
  for (const unfolded of chartViews(chart)) views.push(await layoutChart(chart, unfolded, { memo, whole }));
  return views;
}

const cache = new Map<string, Promise<ChartLayout[] | null>>();
const CACHED = 64;

/**
 * `layoutViews`, once per distinct chart (the viewer's pages ask for the same two charts every
 * time). Null when the chart cannot be laid out at all (the worker failed): the page then shows
 * the transitions table, and the next page tries again.
 */
export function cachedViews(chart: ChartModel): Promise<ChartLayout[] | null> {
  const key = JSON.stringify(chart);
  let views = cache.get(key);
  if (!views) {
    if (cache.size >= CACHED) cache.delete(cache.keys().next().value!);
    views = layoutViews(chart).catch(() => {
      cache.delete(key);
      return null;
    });
    cache.set(key, views);
  }
  return views;
}

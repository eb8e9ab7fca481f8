import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import type { ElkExtendedEdge, ElkNode } from 'elkjs/lib/elk-api.js';
import type { ChartModel, ChartState, ChartTransition } from './chart.js';
import { chartViews, compoundsOf, foldChart, type FoldedChart } from './chart-fold.js';
import { TEXT_METRICS, type ChartLayout, type InitialMarker, type LaidOutEdge, type LaidOutJump, type LaidOutState, type TextLine } from './chart-geometry.js';

/**
 * A statechart laid out by ELK (the layered algorithm Stately's editor uses): nested states as
 * boxes inside their parents, one edge per pair of states carrying a label line per transition
 * (`event [guard && guard]`), transitions that stay listed inside their state's box. Runs in
 * Node when a page is produced, once per chart per process, so a served page and an exported
 * file carry the finished geometry and the page computes nothing. Text is sized by a fixed
 * character advance, and the page draws each line to exactly that width (SVG `textLength`):
 * what the layout kept apart cannot collide in any font.
 */

const PAD = 8;
const MARKER = 10;
const WRAP = 44;
/** Edge labels wrap sooner: in a layered layout every label's width widens its layer. */
const EDGE_WRAP = 30;
/**
 * Transitions an edge's label lists at most; past that the last line says how many more (all of
 * them are in the edge's tooltip and the transitions table). An edge from a folded state stands
 * for many transitions: listed in full, their labels were a tall stack at the target.
 */
const EDGE_LABELS = 3;
/**
 * A state entered from more states than this is a hub: each of its sources' edges ends at a
 * jump box `→ hub` beside the source (see `LaidOutJump`) instead of joining a comb at the hub.
 */
const HUB_SOURCES = 5;

/** Words joined into lines of at most `max` characters (a longer word keeps its own line); continuation lines indented. */
function wrap(words: readonly string[], max: number): string[] {
  const lines: string[] = [];
  let line = '';
  for (const word of words) {
    if (line && line.length + 1 + word.length > max) {
      lines.push(line);
      line = `  ${word}`;
    } else line = line ? `${line} ${word}` : word;
  }
  if (line) lines.push(line);
  return lines;
}

/** A transition's label as short lines: `event [a &&`, `  b]`. */
export const edgeLines = (label: string): string[] => wrap(label.split(' '), EDGE_WRAP);

const widthOf = (text: string, kind: TextLine['kind']) => Math.ceil(text.length * TEXT_METRICS[kind].advance);

/** `event [a && b]`, or the event alone; an eventless transition is `always`. */
export const transitionLabel = (t: Pick<ChartTransition, 'event' | 'guards'>): string => `${t.event}${t.guards.length ? ` [${t.guards.join(' && ')}]` : ''}`;

/** A state's transitions that stay: grouped by guard, events joined, wrapped to short lines. */
export function internalLines(transitions: readonly ChartTransition[]): string[] {
  const byGuard = new Map<string, string[]>();
  for (const t of transitions) {
    const guard = t.guards.join(' && ');
    byGuard.set(guard, [...(byGuard.get(guard) ?? []), t.event]);
  }
  const lines: string[] = [];
  for (const [guard, events] of byGuard) {
    const words = [...new Set(events)].map((e, i, all) => (i < all.length - 1 ? `${e},` : e));
    if (guard) words.push(`[${guard}]`);
    lines.push(...wrap(words, WRAP));
  }
  return lines;
}

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
  nodes: Map<string, ElkNode>;
  /** Each edge's transition labels, by the edge's id. */
  labels: Map<string, string[]>;
  /** Each jump box's hub and the state holding the box, by the box's id. */
  jumps: Map<string, { to: string; parent: string | null }>;
}

/** What a folded state shows under its title. */
const foldedLine = (hidden: number) => `▸ ${hidden} state${hidden === 1 ? '' : 's'} inside`;

/** The label lines of an edge standing for `labels`: the first few, then how many more. */
export function edgeLabelLines(labels: readonly string[]): string[] {
  if (labels.length <= EDGE_LABELS) return labels.flatMap(edgeLines);
  return [...labels.slice(0, EDGE_LABELS - 1).flatMap(edgeLines), `+${labels.length - EDGE_LABELS + 1} more`];
}

function buildGraph(chart: FoldedChart): Graph {
  const nodes = new Map<string, ElkNode>();
  const root: ElkNode = { id: '#root', children: [], edges: [] };
  const holder = (id: string | null) => (id === null ? root : nodes.get(id)!);
  const stays = new Map<string, ChartTransition[]>();
  for (const t of chart.transitions) if (t.to === null) stays.set(t.from, [...(stays.get(t.from) ?? []), t]);
  const children = new Set(chart.states.map((s) => s.parent).filter((p): p is string => p !== null));
  for (const state of chart.states) {
    const hidden = chart.folded.get(state.id);
    const internal = [...(hidden === undefined ? [] : [foldedLine(hidden)]), ...internalLines(stays.get(state.id) ?? [])];
    const title = state.label + (state.parallel ? ' ∥' : '');
    const width = Math.max(widthOf(title, 'title'), ...internal.map((l) => widthOf(l, 'internal')), 60) + 2 * PAD;
    const head = TEXT_METRICS.title.line + internal.length * TEXT_METRICS.internal.line + PAD;
    const node: ElkNode = children.has(state.id)
      ? {
          id: state.id,
          children: [],
          edges: [],
          layoutOptions: {
            'elk.padding': `[top=${head + PAD},left=${PAD * 2},bottom=${PAD * 2},right=${PAD * 2}]`,
            'elk.nodeSize.constraints': 'MINIMUM_SIZE',
            'elk.nodeSize.minimum': `(${width}, ${head + 20})`,
          },
        }
      : { id: state.id, width, height: head + PAD };
    nodes.set(state.id, node);
    holder(state.parent).children!.push(node);
  }
  addInitials(chart, holder);
  return { elk: root, nodes, ...addEdges(chart, holder) };
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

/** What a jump box to `hub` says. */
const jumpText = (label: string) => `→ ${label}`;

function addEdges(chart: ChartModel, holder: (id: string | null) => ElkNode): Pick<Graph, 'labels' | 'jumps'> {
  const labelsOf = new Map<string, string[]>();
  const jumps: Graph['jumps'] = new Map();
  const pairs = new Map<string, ChartTransition[]>();
  const sources = new Map<string, Set<string>>();
  for (const t of chart.transitions) {
    if (t.to === null) continue;
    const key = `${t.from}\u0000${t.to}`;
    pairs.set(key, [...(pairs.get(key) ?? []), t]);
    if (t.from !== t.to) sources.set(t.to, (sources.get(t.to) ?? new Set()).add(t.from));
  }
  const labelOf = new Map(chart.states.map((s) => [s.id, s.label]));
  let n = 0;
  for (const list of pairs.values()) {
    const { from, to } = list[0]! as { from: string; to: string };
    const labels = [...new Set(list.map(transitionLabel))];
    const lines = edgeLabelLines(labels);
    const width = Math.max(...lines.map((l) => widthOf(l, 'edge')));
    const id = `#edge:${n++}`;
    labelsOf.set(id, labels);
    const edge: ElkExtendedEdge = { id, sources: [from], targets: [to], labels: [{ id: `#label:${n}`, text: lines.join('\n'), width: width + 4, height: lines.length * TEXT_METRICS.edge.line + 2 }] };
    // Into a hub from elsewhere (not from inside it): the edge ends at a jump box beside its source.
    if ((sources.get(to)?.size ?? 0) > HUB_SOURCES && from !== to && !from.startsWith(`${to}.`)) {
      const jump = `#jump:${id}`;
      jumps.set(jump, { to, parent: parentOf(from) });
      const text = jumpText(labelOf.get(to) ?? to);
      const box = holder(parentOf(from));
      box.children!.push({ id: jump, width: widthOf(text, 'internal') + 2 * PAD, height: TEXT_METRICS.internal.line + PAD });
      box.edges!.push({ ...edge, targets: [jump] });
      continue;
    }
    holder(containerOf(from, to)).edges!.push(edge);
  }
  return { labels: labelsOf, jumps };
}

export const LAYOUT_OPTIONS: Record<string, string> = {
  'elk.algorithm': 'layered',
  'elk.direction': 'DOWN',
  'elk.hierarchyHandling': 'INCLUDE_CHILDREN',
  // Edges into one state join before they reach it, and leave one state together: one entry, not a comb.
  'elk.layered.mergeEdges': 'true',
  'elk.edgeRouting': 'ORTHOGONAL',
  'elk.edgeLabels.placement': 'CENTER',
  'elk.layered.edgeLabels.sideSelection': 'SMART_DOWN',
  'elk.spacing.nodeNode': '20',
  'elk.spacing.edgeNode': '14',
  'elk.spacing.edgeEdge': '12',
  'elk.spacing.edgeLabel': '4',
  'elk.spacing.labelLabel': '6',
  'elk.layered.spacing.nodeNodeBetweenLayers': '30',
  'elk.layered.spacing.edgeNodeBetweenLayers': '18',
  'elk.layered.spacing.edgeEdgeBetweenLayers': '12',
  'elk.layered.considerModelOrder.strategy': 'NODES_AND_EDGES',
  'elk.layered.nodePlacement.strategy': 'NETWORK_SIMPLEX',
  'elk.padding': '[top=12,left=12,bottom=12,right=12]',
  'elk.json.shapeCoords': 'ROOT',
  'elk.json.edgeCoords': 'ROOT',
};

/** ELK's first layout in a process takes seconds of CPU (1.6 MB of compiled Java warming up): it runs in a worker thread, so a viewer keeps answering meanwhile. */
const WORKER = `
const { parentPort, workerData } = require('node:worker_threads');
const ELK = require(workerData.elk);
const elk = new ELK();
parentPort.on('message', ({ id, graph }) => elk.layout(graph).then((laid) => parentPort.postMessage({ id, laid }), (error) => parentPort.postMessage({ id, error: String(error && error.message || error) })));
`;
/** A layout that takes longer is given up (the page lists the transitions instead). */
export const LAYOUT_TIMEOUT_MS = 30_000;

interface Job {
  resolve: (graph: ElkNode) => void;
  reject: (error: Error) => void;
}
let worker: Worker | undefined;
const jobs = new Map<number, Job>();
let nextJob = 0;

function elkWorker(): Worker {
  if (worker) return worker;
  const elkPath = createRequire(import.meta.url).resolve('elkjs/lib/elk.bundled.js');
  const started = new Worker(WORKER, { eval: true, workerData: { elk: elkPath } });
  started.on('message', (message: { id: number; laid?: ElkNode | undefined; error?: string | undefined }) => {
    const job = jobs.get(message.id);
    jobs.delete(message.id);
    if (message.laid) job?.resolve(message.laid);
    else job?.reject(new Error(`ELK could not lay the chart out: ${message.error}`));
  });
  const fail = (error: Error) => {
    worker = undefined;
    for (const job of jobs.values()) job.reject(error);
    jobs.clear();
  };
  started.on('error', fail);
  started.on('exit', (code) => fail(new Error(`the layout worker exited (${code})`)));
  // Idle, never what keeps a process alive (`elkLayout` refs it while a layout is awaited). After
  // the listeners: adding a 'message' listener refs the worker's port again.
  started.unref();
  return (worker = started);
}

function elkLayout(graph: ElkNode): Promise<ElkNode> {
  const id = nextJob++;
  return new Promise<ElkNode>((resolve, reject) => {
    const laidOutBy = elkWorker();
    const timer = setTimeout(() => {
      jobs.delete(id);
      if (jobs.size === 0) laidOutBy.unref();
      reject(new Error(`the chart's layout took over ${LAYOUT_TIMEOUT_MS} ms`));
    }, LAYOUT_TIMEOUT_MS);
    timer.unref();
    const settle = <T>(fn: (value: T) => void) => (value: T) => {
      clearTimeout(timer);
      // A script that awaits a page (exportSessionHtml) must not exit mid-layout; an idle worker
      // must not keep a finished process alive.
      if (jobs.size === 0) laidOutBy.unref();
      fn(value);
    };
    jobs.set(id, { resolve: settle(resolve), reject: settle(reject) });
    laidOutBy.ref();
    laidOutBy.postMessage({ id, graph });
  });
}

/** One line at (x, y); a continuation line's indent becomes an offset (SVG drops leading spaces). */
function textLine(text: string, kind: TextLine['kind'], x: number, y: number): TextLine {
  const body = text.trimStart();
  const indent = (text.length - body.length) * TEXT_METRICS[kind].advance;
  return { text: body, kind, x: x + indent, y, width: widthOf(body, kind), height: TEXT_METRICS[kind].line };
}

function linesOf(text: string, at: { x: number; y: number }, kind: TextLine['kind']): TextLine[] {
  return text.split('\n').map((t, i) => textLine(t, kind, at.x, at.y + i * TEXT_METRICS[kind].line));
}

function stateOf(state: ChartState, node: ElkNode, compound: boolean, stays: readonly ChartTransition[], hidden: number | undefined): LaidOutState {
  const box = { x: node.x!, y: node.y!, width: node.width!, height: node.height! };
  const title = state.label + (state.parallel ? ' ∥' : '');
  const titleLine = textLine(title, 'title', box.x + PAD, box.y + PAD / 2);
  const texts = [...(hidden === undefined ? [] : [foldedLine(hidden)]), ...internalLines(stays)];
  const internal = texts.map((text, i) => textLine(text, 'internal', box.x + PAD, box.y + PAD / 2 + TEXT_METRICS.title.line + i * TEXT_METRICS.internal.line));
  const folded = hidden === undefined ? {} : { folded: hidden };
  return { id: state.id, parent: state.parent, compound: compound || hidden !== undefined, parallel: state.parallel, final: state.final, ...folded, ...box, lines: [titleLine, ...internal] };
}

const pathOf = (points: readonly { x: number; y: number }[]) => points.map((p, i) => `${i ? 'L' : 'M'} ${round(p.x)} ${round(p.y)}`).join(' ');
const round = (n: number) => Math.round(n * 10) / 10;

function edgePath(edge: ElkExtendedEdge): string {
  return (edge.sections ?? []).map((s) => pathOf([s.startPoint, ...(s.bendPoints ?? []), s.endPoint])).join(' ');
}

function collectEdges(node: ElkNode, into: { edge: ElkExtendedEdge; container: string | null }[]) {
  for (const edge of node.edges ?? []) into.push({ edge, container: node.id === '#root' ? null : node.id });
  for (const child of node.children ?? []) collectEdges(child, into);
}

/**
 * Lays a chart out (ELK layered, orthogonal edges routed through the hierarchy, labels placed by
 * the layout) with the compound states in `unfolded` open and every other one folded (default:
 * all open).
 */
export async function layoutChart(model: ChartModel, unfolded: readonly string[] = compoundsOf(model)): Promise<ChartLayout> {
  const chart = foldChart(model, unfolded);
  const graph = buildGraph(chart);
  const done = await elkLayout({ ...graph.elk, layoutOptions: LAYOUT_OPTIONS });
  const placed = new Map<string, ElkNode>();
  const walk = (node: ElkNode) => {
    placed.set(node.id, node);
    node.children?.forEach(walk);
  };
  walk(done);
  const stays = new Map<string, ChartTransition[]>();
  for (const t of chart.transitions) if (t.to === null) stays.set(t.from, [...(stays.get(t.from) ?? []), t]);
  const compound = new Set(chart.states.map((s) => s.parent));
  const states = chart.states.map((s) => stateOf(s, placed.get(s.id)!, compound.has(s.id), stays.get(s.id) ?? [], chart.folded.get(s.id)));
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
    const lines = (edge.labels ?? []).flatMap((label) => linesOf(label.text ?? '', { x: label.x! + 2, y: label.y! + 1 }, 'edge'));
    const hub = graph.jumps.get(to)?.to;
    edges.push({ from, to: hub ?? to, container, path: edgePath(edge), labels: graph.labels.get(edge.id) ?? [], lines, ...(hub !== undefined && { jump: true as const }) });
  }
  const labelOf = new Map(model.states.map((s) => [s.id, s.label]));
  const jumps = [...graph.jumps].map(([id, { to, parent }]): LaidOutJump => {
    const box = placed.get(id)!;
    return { to, parent, x: box.x!, y: box.y!, width: box.width!, height: box.height!, lines: [textLine(jumpText(labelOf.get(to) ?? to), 'internal', box.x! + PAD, box.y! + PAD / 2)] };
  });
  return { unfolded: [...unfolded], width: Math.ceil(done.width!), height: Math.ceil(done.height!), states, edges, jumps, initials };
}

const cache = new Map<string, Promise<ChartLayout[] | null>>();
const CACHED = 64;

/**
 * A chart laid out in each of its views (see `chartViews`: all folded, each compound state
 * unfolded, all unfolded), once per distinct chart (the viewer's pages ask for the same two
 * charts every time). Null when ELK cannot lay it out: the page then shows the transitions table.
 */
export function cachedViews(chart: ChartModel): Promise<ChartLayout[] | null> {
  const key = JSON.stringify(chart);
  let views = cache.get(key);
  if (!views) {
    if (cache.size >= CACHED) cache.delete(cache.keys().next().value!);
    // One at a time: the worker lays out one graph at a time anyway. A failed layout is not kept: the next page tries again.
    views = chartViews(chart)
      .reduce<Promise<ChartLayout[]>>(async (done, unfolded) => [...(await done), await layoutChart(chart, unfolded)], Promise.resolve([]))
      .catch(() => {
        cache.delete(key);
        return null;
      });
    cache.set(key, views);
  }
  return views;
}

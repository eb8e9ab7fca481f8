import type { ChartState, ChartTransition } from './chart.js';
import { TEXT_METRICS, type LaidOutState, type TextLine } from './chart-geometry.js';

/**
 * What both layouts of a chart share (the whole chart in one ELK graph, chart-layout.ts, and a
 * big one laid out container by container, chart-pieces.ts): the text of states, edges and jump
 * boxes, the sizes that text gives them, and ELK's options. Text is sized by a fixed character
 * advance, and the page draws each line to exactly that width (SVG `textLength`): what the layout
 * kept apart cannot collide in any font.
 */

export const PAD = 8;
export const MARKER = 10;
const WRAP = 44;
/** Edge labels wrap sooner: in a layered layout every label's width widens its layer. */
const EDGE_WRAP = 30;
/**
 * Transitions an edge's label lists at most; past that the last line says how many more (all of
 * them are in the edge's tooltip and the transitions table). An edge from a folded state stands
 * for many transitions: listed in full, their labels were a tall stack at the target.
 */
const EDGE_LABELS = 3;

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

export const widthOf = (text: string, kind: TextLine['kind']) => Math.ceil(text.length * TEXT_METRICS[kind].advance);

/** `event [a && b]`, or the event alone; an eventless transition is `always`. */
export const transitionLabel = (t: Pick<ChartTransition, 'event' | 'guards'>): string => `${t.event}${t.guards.length ? ` [${t.guards.join(' && ')}]` : ''}`;

/** A state's transitions that stay: grouped by guard, events joined, wrapped to short lines. */
export function internalLines(transitions: readonly ChartTransition[]): string[] {
  const byGuard = new Map<string, string[]>();
  for (const t of transitions) {
    const guard = t.guards.join(' && ');
    const events = byGuard.get(guard);
    if (events) events.push(t.event);
    else byGuard.set(guard, [t.event]);
  }
  const lines: string[] = [];
  for (const [guard, events] of byGuard) {
    const words = [...new Set(events)].map((e, i, all) => (i < all.length - 1 ? `${e},` : e));
    if (guard) words.push(`[${guard}]`);
    lines.push(...wrap(words, WRAP));
  }
  return lines;
}

/** The label lines of an edge standing for `labels`: the first few, then how many more. */
export function edgeLabelLines(labels: readonly string[]): string[] {
  if (labels.length <= EDGE_LABELS) return labels.flatMap(edgeLines);
  return [...labels.slice(0, EDGE_LABELS - 1).flatMap(edgeLines), `+${labels.length - EDGE_LABELS + 1} more`];
}

/** An edge's label box as ELK sizes it: its lines, and 2 px around them. */
export function edgeLabelBox(labels: readonly string[]): { lines: string[]; width: number; height: number } {
  const lines = edgeLabelLines(labels);
  return { lines, width: Math.max(...lines.map((l) => widthOf(l, 'edge'))) + 4, height: lines.length * TEXT_METRICS.edge.line + 2 };
}

/**
 * A state entered from more states than this is a hub: each of its sources' edges ends at a
 * jump box `→ hub` beside the source (see `LaidOutJump`) instead of joining a comb at the hub.
 */
export const HUB_SOURCES = 5;

/** The transitions between two states, one list per pair (in the chart's order), and each state's sources (not itself). */
export function pairsOf(transitions: readonly ChartTransition[]): { pairs: Map<string, ChartTransition[]>; sources: Map<string, Set<string>> } {
  const pairs = new Map<string, ChartTransition[]>();
  const sources = new Map<string, Set<string>>();
  for (const t of transitions) {
    if (t.to === null) continue;
    const key = `${t.from}\u0000${t.to}`;
    const list = pairs.get(key);
    if (list) list.push(t);
    else pairs.set(key, [t]);
    if (t.from !== t.to) sources.set(t.to, (sources.get(t.to) ?? new Set()).add(t.from));
  }
  return { pairs, sources };
}

/** Whether an edge into `to` ends at a jump box beside its source: `to` is a hub, and the edge comes from outside it. */
export const toHub = (sources: ReadonlyMap<string, ReadonlySet<string>>, from: string, to: string) => (sources.get(to)?.size ?? 0) > HUB_SOURCES && from !== to && !from.startsWith(`${to}.`);

/** What a folded state shows under its title. */
const foldedLine = (hidden: number) => `▸ ${hidden} state${hidden === 1 ? '' : 's'} inside`;

/** What a jump box to `label` says. */
export const jumpText = (label: string) => `→ ${label}`;

/** A jump box's size for its text. */
export const jumpSize = (text: string) => ({ width: widthOf(text, 'internal') + 2 * PAD, height: TEXT_METRICS.internal.line + PAD });

const titleOf = (state: ChartState) => state.label + (state.parallel ? ' ∥' : '');
const linesUnderTitle = (stays: readonly ChartTransition[], hidden: number | undefined) => [...(hidden === undefined ? [] : [foldedLine(hidden)]), ...internalLines(stays)];

/** A state's box as its text sizes it: the width, and the height of its head (title and lines that stay) before any child. */
export function stateSize(state: ChartState, stays: readonly ChartTransition[], hidden: number | undefined): { width: number; head: number } {
  const internal = linesUnderTitle(stays, hidden);
  const width = Math.max(widthOf(titleOf(state), 'title'), ...internal.map((l) => widthOf(l, 'internal')), 60) + 2 * PAD;
  return { width, head: TEXT_METRICS.title.line + internal.length * TEXT_METRICS.internal.line + PAD };
}

/** A compound state's padding around its children, and its least size (ELK's words for them). */
export function compoundFrame(size: { width: number; head: number }) {
  return { top: size.head + PAD, left: PAD * 2, bottom: PAD * 2, right: PAD * 2, minWidth: size.width, minHeight: size.head + 20 };
}

/** One line at (x, y); a continuation line's indent becomes an offset (SVG drops leading spaces). */
export function textLine(text: string, kind: TextLine['kind'], x: number, y: number): TextLine {
  const body = text.trimStart();
  const indent = (text.length - body.length) * TEXT_METRICS[kind].advance;
  return { text: body, kind, x: x + indent, y, width: widthOf(body, kind), height: TEXT_METRICS[kind].line };
}

/** An edge label's lines, its box's corner at `at` (ELK's label position). */
export function labelLines(text: string, at: { x: number; y: number }): TextLine[] {
  return text.split('\n').map((t, i) => textLine(t, 'edge', at.x + 2, at.y + 1 + i * TEXT_METRICS.edge.line));
}

/** A state drawn in `box`: its title, then the lines of its transitions that stay. */
export function stateOf(state: ChartState, box: { x: number; y: number; width: number; height: number }, compound: boolean, stays: readonly ChartTransition[], hidden: number | undefined): LaidOutState {
  const titleLine = textLine(titleOf(state), 'title', box.x + PAD, box.y + PAD / 2);
  const internal = linesUnderTitle(stays, hidden).map((text, i) => textLine(text, 'internal', box.x + PAD, box.y + PAD / 2 + TEXT_METRICS.title.line + i * TEXT_METRICS.internal.line));
  const folded = hidden === undefined ? {} : { folded: hidden };
  const { x, y, width, height } = box;
  return { id: state.id, parent: state.parent, compound: compound || hidden !== undefined, parallel: state.parallel, final: state.final, ...folded, x, y, width, height, lines: [titleLine, ...internal] };
}

/** A jump box's one line. */
export const jumpLine = (text: string, box: { x: number; y: number }): TextLine => textLine(text, 'internal', box.x + PAD, box.y + PAD / 2);

const round = (n: number) => Math.round(n * 10) / 10;
/** SVG path data through `points` (orthogonal segments). */
export const pathOf = (points: readonly { x: number; y: number }[]) => points.map((p, i) => `${i ? 'L' : 'M'} ${round(p.x)} ${round(p.y)}`).join(' ');

/** The transitions that stay, by their state. */
export function staysOf(transitions: readonly ChartTransition[]): Map<string, ChartTransition[]> {
  const stays = new Map<string, ChartTransition[]>();
  for (const t of transitions) {
    if (t.to !== null) continue;
    const list = stays.get(t.from);
    if (list) list.push(t);
    else stays.set(t.from, [t]);
  }
  return stays;
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

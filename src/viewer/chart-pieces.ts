import type { ElkExtendedEdge, ElkNode } from 'elkjs/lib/elk-api.js';
import type { ChartState } from './chart.js';
import type { FoldedChart } from './chart-fold.js';
import type { Box, ChartLayout, InitialMarker, LaidOutEdge, LaidOutJump } from './chart-geometry.js';
import { compoundFrame, edgeLabelBox, jumpLine, jumpSize, jumpText, labelLines, LAYOUT_OPTIONS, MARKER, PAD, pairsOf, pathOf, stateOf, stateSize, staysOf, toHub, transitionLabel } from './chart-text.js';
import { elkLayout } from './elk-worker.js';

/**
 * A big chart laid out container by container: the chart itself and each unfolded compound
 * state is a piece, its children laid out on their own (the innermost first: a compound child
 * is one box of the size its own piece came to), then the pieces placed in their parents' boxes.
 * An edge between two children of one container is drawn as ELK routes it; any other (into
 * another container, from a state to its own child) ends at a jump box `→ path` beside its
 * source, as an edge into a hub does, so every edge stays inside one piece.
 *
 * What it costs grows with the chart's size: each piece is a graph of at most `PIECE_BUDGET`
 * nodes and edges for ELK (a piece over it, or one ELK does not finish in `PIECE_TIMEOUT_MS`,
 * is laid out as a grid here, in linear time), a piece that comes again in another view of the
 * chart is laid out once (`PieceMemo`), and the layout worker takes one piece at a time, so
 * another chart's layout waits for one piece at most.
 */

/**
 * The largest piece ELK lays out, in nodes and edges (its children, jump boxes, initial dot,
 * edges): ELK takes about a tenth of a second on one this size; a container with more is a grid.
 */
export const PIECE_BUDGET = 100;
/** A piece ELK has not laid out in this long is a grid (the worker is terminated). */
export const PIECE_TIMEOUT_MS = 5_000;

interface Point {
  x: number;
  y: number;
}

/**
 * A piece's options: the whole chart's, with the cheaper node placement (Brandes & Köpf, ELK's
 * default) and fewer rounds of crossing minimization: 2.4 times less CPU on the biggest pieces.
 */
const PIECE_OPTIONS: Record<string, string> = { ...LAYOUT_OPTIONS, 'elk.layered.nodePlacement.strategy': 'BRANDES_KOEPF', 'elk.layered.thoroughness': '3' };

/** A piece laid out: every position relative to its container's corner. */
export interface PieceLayout {
  width: number;
  height: number;
  /** By node id: a child state's id, `#jump:EDGE` (the jump box an edge ends at), `#init` (the initial dot). */
  boxes: Map<string, Box>;
  /** By edge id (`#edge:N`, `#init-edge`): its sections' points, and its label's corner. */
  edges: Map<string, { sections: Point[][]; label: Point | null }>;
}

/** The pieces of a chart laid out so far, by their graph (the same piece in another view is not laid out again). */
export type PieceMemo = Map<string, Promise<PieceLayout | null>>;

interface PieceEdge {
  id: string;
  from: string;
  to: string;
  labels: string[];
  label: { lines: string[]; width: number; height: number };
  /** Its jump box's text when the edge ends at one whatever the piece's layout (else only in a grid). */
  jump: string | null;
  /** What its jump box says, if it gets one: the target's path from the container. */
  jumpText: string;
}

interface Piece {
  /** The container (null: the chart). */
  id: string | null;
  padding: { top: number; left: number; bottom: number; right: number };
  minWidth: number;
  minHeight: number;
  /** Its child states (boxes of a size known before the piece is laid out). */
  children: { id: string; width: number; height: number }[];
  /** The child the initial dot points at (none in a parallel state). */
  initial: string | null;
  edges: PieceEdge[];
}

/** The target's path as read from inside `container` (its own id when it is not inside). */
function pathFrom(container: string | null, to: string): string {
  return container !== null && to.startsWith(`${container}.`) ? to.slice(container.length + 1) : to;
}

/** The chart's containers (the chart, then each state with children here, outermost first) with their edges. */
function piecesOf(chart: FoldedChart): Piece[] {
  const stays = staysOf(chart.transitions);
  const byId = new Map(chart.states.map((s) => [s.id, s]));
  const childrenOf = new Map<string | null, ChartState[]>([[null, []]]);
  for (const state of chart.states) {
    const list = childrenOf.get(state.parent);
    if (list) list.push(state);
    else childrenOf.set(state.parent, [state]);
  }
  const pieces = new Map<string | null, Piece>();
  for (const [id, children] of childrenOf) {
    const state = id === null ? undefined : byId.get(id)!;
    const frame = state ? compoundFrame(stateSize(state, stays.get(state.id) ?? [], chart.folded.get(state.id))) : { top: 12, left: 12, bottom: 12, right: 12, minWidth: 0, minHeight: 0 };
    const initial = state?.parallel ? null : (children.find((c) => c.initial)?.id ?? null);
    pieces.set(id, { id, padding: frame, minWidth: frame.minWidth, minHeight: frame.minHeight, children: [], initial, edges: [] });
  }
  for (const state of chart.states) {
    if (pieces.has(state.id)) continue; // a container: its size is its piece's
    const size = stateSize(state, stays.get(state.id) ?? [], chart.folded.get(state.id));
    pieces.get(state.parent)!.children.push({ id: state.id, width: size.width, height: size.head + PAD });
  }
  const { pairs, sources } = pairsOf(chart.transitions);
  for (const list of pairs.values()) {
    const { from, to } = list[0]! as { from: string; to: string };
    const parent = byId.get(from)!.parent;
    const piece = pieces.get(parent)!;
    const labels = [...new Set(list.map(transitionLabel))];
    const text = jumpText(pathFrom(parent, to));
    const sibling = byId.get(to)?.parent === parent && !toHub(sources, from, to);
    piece.edges.push({ id: `#edge:${piece.edges.length}`, from, to, labels, label: edgeLabelBox(labels), jump: sibling ? null : text, jumpText: text });
  }
  // Children in the chart's order (containers included, sized later), so a piece's graph is the same wherever it comes.
  for (const piece of pieces.values()) {
    const order = new Map((childrenOf.get(piece.id) ?? []).map((s, i) => [s.id, i]));
    for (const child of childrenOf.get(piece.id) ?? []) if (pieces.has(child.id)) piece.children.push({ id: child.id, width: 0, height: 0 });
    piece.children.sort((a, b) => order.get(a.id)! - order.get(b.id)!);
  }
  return [...pieces.values()];
}

/** A piece as one flat ELK graph (the children, the jump boxes its edges end at, the initial dot). */
function pieceGraph(piece: Piece): ElkNode {
  const { top, left, bottom, right } = piece.padding;
  const children: ElkNode[] = piece.children.map((c) => ({ id: c.id, width: c.width, height: c.height }));
  const edges: ElkExtendedEdge[] = [];
  if (piece.initial !== null) {
    children.push({ id: '#init', width: MARKER, height: MARKER });
    edges.push({ id: '#init-edge', sources: ['#init'], targets: [piece.initial] });
  }
  for (const edge of piece.edges) {
    if (edge.jump !== null) children.push({ id: `#jump:${edge.id}`, ...jumpSize(edge.jump) });
    const label = { id: `#label:${edge.id}`, text: edge.label.lines.join('\n'), width: edge.label.width, height: edge.label.height };
    edges.push({ id: edge.id, sources: [edge.from], targets: [edge.jump === null ? edge.to : `#jump:${edge.id}`], labels: [label] });
  }
  return { id: '#piece', layoutOptions: { ...PIECE_OPTIONS, 'elk.padding': `[top=${top},left=${left},bottom=${bottom},right=${right}]` }, children, edges };
}

/** ELK's layout of a piece's graph as a `PieceLayout`. */
function fromElk(piece: Piece, done: ElkNode): PieceLayout {
  const boxes: PieceLayout['boxes'] = new Map();
  for (const c of done.children ?? []) boxes.set(c.id, { x: c.x!, y: c.y!, width: c.width!, height: c.height! });
  const edges: PieceLayout['edges'] = new Map();
  for (const e of done.edges ?? []) {
    const sections = (e.sections ?? []).map((s) => [s.startPoint, ...(s.bendPoints ?? []), s.endPoint].map(({ x, y }) => ({ x, y })));
    const label = e.labels?.[0];
    edges.set(e.id, { sections, label: label ? { x: label.x!, y: label.y! } : null });
  }
  return { width: Math.max(done.width!, piece.minWidth), height: Math.max(done.height!, piece.minHeight), boxes, edges };
}

const GAP = 20;
const ROW_GAP = 30;
/** From a state's right side to the line its edges go down (the labels and jump boxes start just after it). */
const TRUNK = 10;
const INDENT = 8;

/**
 * A piece laid out here, in time linear in its size: its children in rows (reading order, rows
 * about half again as wide as high), each with its edges beside it, one under the other, every
 * one ending at a jump box `→ target` under its label; the initial dot above the initial child.
 */
function gridPiece(piece: Piece): PieceLayout {
  const boxes: PieceLayout['boxes'] = new Map();
  const edges: PieceLayout['edges'] = new Map();
  const bySource = new Map<string, PieceEdge[]>();
  for (const edge of piece.edges) {
    const list = bySource.get(edge.from);
    if (list) list.push(edge);
    else bySource.set(edge.from, [edge]);
  }
  const cells = piece.children.map((child) => {
    const top = child.id === piece.initial ? MARKER + 16 : 0;
    const trunk = child.width + TRUNK;
    const rows = (bySource.get(child.id) ?? []).map((edge) => ({ edge, box: jumpSize(edge.jumpText) }));
    const height = Math.max(top + child.height, rows.reduce((y, r) => y + r.edge.label.height + r.box.height + 8, top));
    const width = rows.length === 0 ? child.width : trunk + INDENT + Math.max(...rows.map((r) => Math.max(r.edge.label.width, r.box.width)));
    /** Writes the cell's boxes and edges with its corner at (x, y). */
    const place = (x: number, y: number) => {
      boxes.set(child.id, { x, y: y + top, width: child.width, height: child.height });
      if (top > 0) {
        boxes.set('#init', { x: x + 10, y, width: MARKER, height: MARKER });
        edges.set('#init-edge', { sections: [[{ x: x + 10 + MARKER / 2, y: y + MARKER }, { x: x + 10 + MARKER / 2, y: y + top }]], label: null });
      }
      const start = { x: x + child.width, y: y + top + 12 };
      let at = y + top;
      for (const { edge, box } of rows) {
        const end = { x: x + trunk + INDENT, y: at + edge.label.height + box.height / 2 };
        boxes.set(`#jump:${edge.id}`, { x: end.x, y: at + edge.label.height, ...box });
        edges.set(edge.id, { sections: [[start, { x: x + trunk, y: start.y }, { x: x + trunk, y: end.y }, end]], label: { x: end.x, y: at } });
        at += edge.label.height + box.height + 8;
      }
    };
    return { width, height, place };
  });
  const area = cells.reduce((sum, c) => sum + (c.width + GAP) * (c.height + ROW_GAP), 0);
  const wide = Math.max(...cells.map((c) => c.width), Math.sqrt(area * 1.5));
  const { top, left, bottom, right } = piece.padding;
  let [x, y, rowHeight, widest] = [0, 0, 0, 0];
  for (const cell of cells) {
    if (x > 0 && x + cell.width > wide) [x, y, rowHeight] = [0, y + rowHeight + ROW_GAP, 0];
    cell.place(left + x, top + y);
    [x, rowHeight, widest] = [x + cell.width + GAP, Math.max(rowHeight, cell.height), Math.max(widest, x + cell.width)];
  }
  return { width: Math.max(left + widest + right, piece.minWidth), height: Math.max(top + y + rowHeight + bottom, piece.minHeight), boxes, edges };
}

/** A piece ELK lays out wider than this, and this many times wider than high, is a grid instead. */
const WIDE_PX = 4_000;
const WIDE_RATIO = 3;

/** A piece laid out by ELK when it is small enough and ELK finishes in time, else as a grid. */
async function layPiece(piece: Piece, memo: PieceMemo): Promise<PieceLayout> {
  const graph = pieceGraph(piece);
  if (graph.children!.length + graph.edges!.length > PIECE_BUDGET) return gridPiece(piece);
  const key = JSON.stringify(graph);
  let laid = memo.get(key);
  if (!laid) {
    laid = elkLayout(graph, PIECE_TIMEOUT_MS).then(
      (done) => fromElk(piece, done),
      () => null,
    );
    memo.set(key, laid);
  }
  const done = await laid;
  if (!done) return gridPiece(piece);
  // Layered puts children side by side in one layer when few edges join them (edges to other containers end at jump boxes): a row many screens wide reads worse than a grid.
  if (done.width > WIDE_PX && done.width > WIDE_RATIO * done.height) {
    const grid = gridPiece(piece);
    if (grid.width < done.width) return grid;
  }
  return done;
}

/**
 * A folded chart laid out by pieces (see the top of this file), as `layoutChart` returns it.
 * `memo` keeps the pieces laid out for the chart's other views.
 */
export async function layoutPieces(chart: FoldedChart, unfolded: readonly string[], memo: PieceMemo = new Map()): Promise<ChartLayout> {
  const pieces = piecesOf(chart);
  const byId = new Map(pieces.map((p) => [p.id, p]));
  const depth = new Map(chart.states.map((s) => [s.id, s.depth]));
  const laid = new Map<string | null, PieceLayout>();
  // The innermost first: a container's size is what its piece came to.
  for (const piece of [...pieces].sort((a, b) => (b.id === null ? -1 : depth.get(b.id)!) - (a.id === null ? -1 : depth.get(a.id)!))) {
    for (const child of piece.children) {
      const inner = laid.get(child.id);
      if (inner) [child.width, child.height] = [inner.width, inner.height];
    }
    laid.set(piece.id, await layPiece(piece, memo));
  }
  return composed(chart, unfolded, byId, laid);
}

/** The pieces placed in their containers' boxes, as one chart. */
function composed(chart: FoldedChart, unfolded: readonly string[], pieces: Map<string | null, Piece>, laid: Map<string | null, PieceLayout>): ChartLayout {
  const stays = staysOf(chart.transitions);
  const origin = new Map<string | null, Point>([[null, { x: 0, y: 0 }]]);
  const placed = new Map<string, Box>();
  const edges: LaidOutEdge[] = [];
  const jumps: LaidOutJump[] = [];
  const initials: InitialMarker[] = [];
  // Outermost first (the chart's order): a container's corner is known before its children are placed.
  for (const id of [null, ...chart.states.map((s) => s.id)]) {
    const piece = pieces.get(id);
    if (!piece) continue;
    const at = origin.get(id)!;
    const layout = laid.get(id)!;
    const shift = (p: Point) => ({ x: p.x + at.x, y: p.y + at.y });
    for (const child of piece.children) {
      const box = layout.boxes.get(child.id)!;
      placed.set(child.id, { ...box, ...shift(box) });
      if (pieces.has(child.id)) origin.set(child.id, shift(box));
    }
    const path = (edgeId: string) => layout.edges.get(edgeId)!.sections.map((points) => pathOf(points.map(shift))).join(' ');
    if (piece.initial !== null) {
      const dot = shift(layout.boxes.get('#init')!);
      initials.push({ parent: id, to: piece.initial, x: dot.x + MARKER / 2, y: dot.y + MARKER / 2, path: path('#init-edge') });
    }
    for (const edge of piece.edges) {
      const corner = layout.edges.get(edge.id)!.label;
      const lines = corner ? labelLines(edge.label.lines.join('\n'), shift(corner)) : [];
      const jumpBox = layout.boxes.get(`#jump:${edge.id}`);
      edges.push({ from: edge.from, to: edge.to, container: id, path: path(edge.id), labels: edge.labels, lines, ...(jumpBox && { jump: true as const }) });
      if (jumpBox) {
        const box = { ...jumpBox, ...shift(jumpBox) };
        jumps.push({ to: edge.to, parent: id, ...box, lines: [jumpLine(edge.jumpText, box)] });
      }
    }
  }
  const compound = new Set(chart.states.map((s) => s.parent));
  const states = chart.states.map((s) => stateOf(s, placed.get(s.id)!, compound.has(s.id), stays.get(s.id) ?? [], chart.folded.get(s.id)));
  const root = laid.get(null)!;
  return { unfolded: [...unfolded], width: Math.ceil(root.width), height: Math.ceil(root.height), states, edges, jumps, initials };
}

/// <reference lib="dom" />
/**
 * Draws a laid-out statechart (computed in Node by ELK, see ../chart-layout.ts) as SVG: every
 * state a box inside its parent's, parallel regions dashed, final states double-bordered, folded
 * states marked, an initial dot in each container, one edge per pair of states with a line per
 * transition (the first few), jump boxes where edges into a hub end. Text
 * is drawn at exactly the width the layout reserved (`textLength`), whatever the font.
 */
import { TEXT_METRICS, type ChartLayout, type TextLine } from '../chart-geometry.js';

const SVG = 'http://www.w3.org/2000/svg';
function svg(tag: string, attrs: Record<string, string | number> = {}, text?: string): SVGElement {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, String(value));
  if (text !== undefined) node.textContent = text;
  return node;
}

function textOf(line: TextLine, owner: string): SVGElement {
  const metrics = TEXT_METRICS[line.kind];
  // The baseline sits at about 3/4 of the line box for these sizes.
  return svg(
    'text',
    { x: line.x, y: line.y + (metrics.line + metrics.size * 0.7) / 2, textLength: line.width, lengthAdjust: 'spacingAndGlyphs', class: `label ${line.kind}`, 'data-owner': owner },
    line.text,
  );
}

export interface DrawnChart {
  svg: SVGSVGElement;
  /** Each state's group by its id (dotted path), for highlighting. */
  nodes: Map<string, SVGElement>;
}

/** The SVG of one chart; `name` keeps marker ids apart when a page draws two. */
export function drawChart(layout: ChartLayout, name: string, label: string): DrawnChart {
  // Sized by its frame (chart-frame.ts), which zooms and pans by moving the viewBox.
  const root = svg('svg', { viewBox: `0 0 ${layout.width} ${layout.height}`, width: '100%', height: '100%', role: 'img', 'aria-label': label, 'data-chart': name, 'data-width': layout.width, 'data-height': layout.height }) as SVGSVGElement;
  const defs = svg('defs');
  const marker = svg('marker', { id: `arrow-${name}`, viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' });
  marker.append(svg('path', { d: 'M 0 0 L 10 5 L 0 10 z', class: 'arrowhead' }));
  defs.append(marker);
  root.append(defs);
  const nodes = new Map<string, SVGElement>();
  const parallel = new Set(layout.states.filter((s) => s.parallel).map((s) => s.id));
  // Containers first, so their children and the edges inside them draw on top.
  const states = [...layout.states].sort((a, b) => a.id.split('.').length - b.id.split('.').length);
  for (const state of states) {
    const region = state.parent !== null && parallel.has(state.parent);
    const folded = state.folded !== undefined;
    const g = svg('g', { class: `node${state.compound ? ' compound' : ''}${folded ? ' folded' : ''}${region ? ' region' : ''}${state.final ? ' final' : ''}`, 'data-state': state.id });
    // A compound state folds and unfolds from its title (chart-frame.ts listens).
    if (state.compound) g.setAttribute('data-fold', folded ? 'folded' : 'open');
    g.append(svg('rect', { x: state.x, y: state.y, width: state.width, height: state.height, rx: state.compound ? 10 : 8, class: 'box' }));
    if (state.final) g.append(svg('rect', { x: state.x + 3, y: state.y + 3, width: state.width - 6, height: state.height - 6, rx: 6, class: 'inner' }));
    for (const line of state.lines) g.append(textOf(line, state.id));
    g.append(svg('title', {}, state.compound ? `${state.id} (click to ${folded ? 'unfold' : 'fold'})` : state.id));
    nodes.set(state.id, g);
    root.append(g);
  }
  for (const dot of layout.initials) {
    const g = svg('g', { class: 'initial', 'data-to': dot.to });
    g.append(svg('path', { d: dot.path, 'marker-end': `url(#arrow-${name})` }), svg('circle', { cx: dot.x, cy: dot.y, r: 5 }));
    root.append(g);
  }
  for (const jump of layout.jumps) {
    const g = svg('g', { class: 'jump', 'data-to': jump.to });
    g.append(svg('rect', { x: jump.x, y: jump.y, width: jump.width, height: jump.height, rx: jump.height / 2, class: 'box' }));
    for (const line of jump.lines) g.append(textOf(line, jump.parent ?? ''));
    g.append(svg('title', {}, `goes to ${jump.to}`));
    root.append(g);
  }
  for (const edge of layout.edges) {
    const g = svg('g', { class: `edge${edge.jump ? ' to-jump' : ''}`, 'data-from': edge.from, 'data-to': edge.to, 'data-container': edge.container ?? '' });
    g.append(svg('title', {}, `${edge.from} → ${edge.to}\n${edge.labels.join('\n')}`));
    g.append(svg('path', { d: edge.path, 'marker-end': `url(#arrow-${name})` }));
    for (const line of edge.lines) g.append(textOf(line, edge.container ?? ''));
    root.append(g);
  }
  return { svg: root, nodes };
}

/** Marks the states named by `paths` (`a.b | c.d` lists) and, more lightly, their ancestors. */
export function markStates(nodes: ReadonlyMap<string, SVGElement>, cls: string, paths: string): void {
  const list = paths ? paths.split(' | ') : [];
  for (const [id, node] of nodes) {
    node.classList.toggle(cls, list.includes(id));
    node.classList.toggle(`${cls}-within`, list.some((path) => path.startsWith(`${id}.`)));
  }
}

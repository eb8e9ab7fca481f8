/**
 * A laid-out statechart (src/viewer/chart-layout.ts, ELK) as one standalone SVG file, for the
 * docs' pictures: the drawing of the viewer's chart-view.ts as text, with its style inlined, so
 * the file shows the same in a README on a forge, in the docs site and opened on its own.
 */
import { TEXT_METRICS, type ChartLayout, type TextLine } from './chart-geometry.js';

const escapeXml = (text: string): string => text.replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]!);

function tag(name: string, attrs: Record<string, string | number>, body = ''): string {
  const list = Object.entries(attrs).map(([key, value]) => ` ${key}="${escapeXml(String(value))}"`).join('');
  return body ? `<${name}${list}>${body}</${name}>` : `<${name}${list}/>`;
}

function text(line: TextLine): string {
  const metrics = TEXT_METRICS[line.kind];
  // The same baseline as the viewer: about 3/4 of the line box for these sizes.
  const y = line.y + (metrics.line + metrics.size * 0.7) / 2;
  return tag('text', { x: line.x, y: y.toFixed(1), textLength: line.width, lengthAdjust: 'spacingAndGlyphs', class: line.kind }, escapeXml(line.text));
}

const STYLE = `
.box { fill: #fff; stroke: #667; stroke-width: 1.2; }
.compound > .box { fill: #f6f7f9; }
.region > .box { stroke-dasharray: 5 4; fill: none; }
.inner { fill: none; stroke: #667; }
text { font-family: ui-monospace, 'DejaVu Sans Mono', Menlo, Consolas, monospace; fill: #223; }
.title { font-size: 12px; font-weight: 600; } .internal { font-size: 10px; fill: #556; } .edge { font-size: 10.5px; fill: #556; }
.edge-path, .initial path { fill: none; stroke: #667; stroke-width: 1.1; }
.arrowhead, .initial circle { fill: #667; }
.jump-box { fill: none; stroke: #667; stroke-dasharray: 3 3; }`;

/** The SVG document of one chart; `label` is its accessible name. */
export function chartSvg(layout: ChartLayout, label: string): string {
  const parts: string[] = [];
  const parallel = new Set(layout.states.filter((s) => s.parallel).map((s) => s.id));
  // Containers first, so their children and the edges inside them draw on top.
  const states = [...layout.states].sort((a, b) => a.id.split('.').length - b.id.split('.').length);
  for (const state of states) {
    const region = state.parent !== null && parallel.has(state.parent);
    const cls = ['node', state.compound && 'compound', region && 'region', state.final && 'final'].filter(Boolean).join(' ');
    const body = [
      tag('rect', { x: state.x, y: state.y, width: state.width, height: state.height, rx: state.compound ? 10 : 8, class: 'box' }),
      state.final ? tag('rect', { x: state.x + 3, y: state.y + 3, width: state.width - 6, height: state.height - 6, rx: 6, class: 'inner' }) : '',
      ...state.lines.map(text),
      tag('title', {}, escapeXml(state.id)),
    ];
    parts.push(tag('g', { class: cls, 'data-state': state.id }, body.join('')));
  }
  for (const dot of layout.initials) {
    parts.push(tag('g', { class: 'initial' }, tag('path', { d: dot.path, 'marker-end': 'url(#arrow)' }) + tag('circle', { cx: dot.x, cy: dot.y, r: 5 })));
  }
  // Where the edges into a hub end (a state entered from many others: see LaidOutJump).
  for (const jump of layout.jumps) {
    parts.push(tag('g', { class: 'jump' }, tag('rect', { x: jump.x, y: jump.y, width: jump.width, height: jump.height, rx: jump.height / 2, class: 'jump-box' }) + jump.lines.map(text).join('')));
  }
  for (const edge of layout.edges) {
    parts.push(tag('g', { class: 'transition' }, tag('path', { d: edge.path, class: 'edge-path', 'marker-end': 'url(#arrow)' }) + edge.lines.map(text).join('')));
  }
  const marker = tag(
    'marker',
    { id: 'arrow', viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' },
    tag('path', { d: 'M 0 0 L 10 5 L 0 10 z', class: 'arrowhead' }),
  );
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${layout.width} ${layout.height}" width="${layout.width}" height="${layout.height}" role="img" aria-label="${escapeXml(label)}">`,
    `<style>${STYLE}</style>`,
    `<defs>${marker}</defs>`,
    `<rect width="100%" height="100%" fill="#fff"/>`,
    ...parts,
    '</svg>',
    '',
  ].join('\n');
}

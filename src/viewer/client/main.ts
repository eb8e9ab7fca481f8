/// <reference lib="dom" />
/// <reference lib="dom.iterable" />
/**
 * The viewer page: plain DOM, no framework, bundled into one script the server inlines. Every
 * piece of stored text reaches the page through `textContent` or `setAttribute` of attributes
 * that never load or run anything: nothing from a session is ever parsed as HTML.
 */
import type { PageData, Row } from '../page-model.js';
import { rowsOf, promptAt, type RowBuilder } from '../rows.js';

const ROW_HEIGHT = 30;
const OVERSCAN = 8;

const data = JSON.parse(document.getElementById('loopchart-data')!.textContent!) as PageData;

function el<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Record<string, string> = {}, ...children: (Node | string)[]): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, value);
  for (const child of children) node.append(typeof child === 'string' ? document.createTextNode(child) : child);
  return node;
}
const SVG = 'http://www.w3.org/2000/svg';
function svg(tag: string, attrs: Record<string, string | number> = {}, text?: string): SVGElement {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, String(value));
  if (text !== undefined) node.textContent = text;
  return node;
}

const app = document.getElementById('app')!;
const builder: RowBuilder = rowsOf(data);
let selected = -1;

// ---------- header ----------
const header = el('header', { id: 'summary' });
function renderHeader() {
  header.replaceChildren();
  const s = data.session;
  header.append(el('h1', {}, data.mode === 'inspector' ? 'Live actor ' : 'Session ', el('code', { id: 'session-id' }, s.sessionId)));
  if (s.error) {
    header.append(el('p', { class: 'error', role: 'alert', id: 'session-error' }, `${s.error.name} (${s.error.code}): ${s.error.message}`));
  }
  const facts: [string, string][] = [];
  if (s.state) {
    facts.push(['state', s.state.brain], ['driver', s.state.io || '—'], ['runs', String(s.state.runs)], ['turns', String(s.state.turns)]);
    facts.push(['tokens', `${s.state.usage.inputTokens} in / ${s.state.usage.outputTokens} out`]);
    facts.push(['outcome', s.state.outcome ?? (s.state.inFlight ? (builder.closed ?? 'run in flight') : '—')]);
  }
  facts.push(['cost', builder.costUsd > 0 ? `$${builder.costUsd.toFixed(6)}` : '—'], ['version', String(s.version)], ['messages', String(s.messageCount)]);
  if (data.live) facts.push(['live', `${liveStatus} ${data.mode === 'inspector' ? 'the actor' : 'the store'}`]);
  const dl = el('dl', { class: 'facts' });
  for (const [k, v] of facts) dl.append(el('div', { 'data-fact': k }, el('dt', {}, k), el('dd', {}, v)));
  header.append(dl);
  const ops = s.state?.operations;
  if (ops && (Object.keys(ops.slices).length > 0 || ops.point || ops.waiting)) {
    const list = el('dl', { class: 'facts' });
    for (const [name, slice] of Object.entries(ops.slices)) list.append(el('div', { 'data-operation': name }, el('dt', {}, name), el('dd', {}, JSON.stringify(slice))));
    if (ops.point) list.append(el('div', { 'data-fact': 'operation point' }, el('dt', {}, 'in progress'), el('dd', {}, ops.point)));
    if (ops.waiting) {
      const { operation, reason, payload } = ops.waiting;
      list.append(el('div', { 'data-fact': 'operation yield' }, el('dt', {}, 'waits on'), el('dd', {}, `${operation}: ${reason} ${JSON.stringify(payload) ?? ''}`)));
    }
    header.append(el('section', { id: 'operations', 'aria-label': 'Operations' }, el('h2', {}, 'Operations'), list));
  }
}

// ---------- statechart ----------
const chartBox = el('section', { id: 'chart', 'aria-label': 'Statechart' });
const NODE_W = 178;
const NODE_H = 40;
function layout(chart: PageData['chart']) {
  const top = chart.states.filter((s) => s.depth === 0);
  const ids = new Set(top.map((s) => s.id));
  const initial = top.find((s) => s.initial) ?? top[0]!;
  const layer = new Map<string, number>([[initial.id, 0]]);
  const queue = [initial.id];
  while (queue.length) {
    const at = queue.shift()!;
    for (const t of chart.transitions) {
      if (t.from !== at || !t.to || !ids.has(t.to) || layer.has(t.to)) continue;
      layer.set(t.to, layer.get(at)! + 1);
      queue.push(t.to);
    }
  }
  const columns = new Map<number, string[]>();
  for (const s of top) {
    const l = layer.get(s.id) ?? Math.max(0, ...layer.values()) + 1;
    columns.set(l, [...(columns.get(l) ?? []), s.id]);
  }
  const pos = new Map<string, { x: number; y: number }>();
  for (const [l, list] of columns) list.forEach((id, i) => pos.set(id, { x: 16 + l * (NODE_W + 90), y: 16 + i * (NODE_H + 46) }));
  return pos;
}
const chartNodes = new Map<string, SVGElement>();
function renderChart() {
  const chart = data.chart;
  const pos = layout(chart);
  const width = Math.max(...[...pos.values()].map((p) => p.x)) + NODE_W + 20;
  const height = Math.max(...[...pos.values()].map((p) => p.y)) + NODE_H + 20;
  const root = svg('svg', { viewBox: `0 0 ${width} ${height}`, width, height, role: 'img', 'aria-label': `statechart of ${chart.id}` });
  const defs = svg('defs');
  const marker = svg('marker', { id: 'arrow', viewBox: '0 0 10 10', refX: 10, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' });
  marker.append(svg('path', { d: 'M 0 0 L 10 5 L 0 10 z', class: 'arrowhead' }));
  defs.append(marker);
  root.append(defs);
  const edges = new Map<string, PageData['chart']['transitions']>();
  const topOf = (id: string) => id.split('.')[0]!;
  for (const t of chart.transitions) {
    if (!t.to) continue;
    const from = topOf(t.from);
    const to = topOf(t.to);
    if (from === to || !pos.has(from) || !pos.has(to)) continue;
    edges.set(`${from}>${to}`, [...(edges.get(`${from}>${to}`) ?? []), t]);
  }
  for (const [key, list] of edges) {
    const [from, to] = key.split('>') as [string, string];
    const a = pos.get(from)!;
    const b = pos.get(to)!;
    const back = edges.has(`${to}>${from}`) && from > to;
    const x1 = a.x + NODE_W / 2;
    const y1 = a.y + NODE_H / 2;
    const x2 = b.x + NODE_W / 2;
    const y2 = b.y + NODE_H / 2;
    // Clip to the boxes' borders along the line between centres.
    const clip = (x: number, y: number, dx: number, dy: number) => {
      const t = Math.min(Math.abs(NODE_W / 2 / (dx || 1e-9)), Math.abs(NODE_H / 2 / (dy || 1e-9)));
      return [x + dx * t, y + dy * t] as const;
    };
    const [sx, sy] = clip(x1, y1, x2 - x1, y2 - y1);
    const [ex, ey] = clip(x2, y2, x1 - x2, y1 - y2);
    const bend = back ? 28 : 10;
    const mx = (sx + ex) / 2 - ((ey - sy) / Math.hypot(ex - sx, ey - sy || 1)) * bend;
    const my = (sy + ey) / 2 + ((ex - sx) / Math.hypot(ex - sx, ey - sy || 1)) * bend;
    const g = svg('g', { class: 'edge', 'data-from': from, 'data-to': to });
    g.append(svg('title', {}, list.map((t) => `${t.event}${t.guards.length ? ` [${t.guards.join(' && ')}]` : ''}`).join('\n')));
    g.append(svg('path', { d: `M ${sx} ${sy} Q ${mx} ${my} ${ex} ${ey}`, 'marker-end': 'url(#arrow)' }));
    g.append(svg('text', { x: mx, y: my - 3, 'text-anchor': 'middle' }, [...new Set(list.map((t) => t.event))].join(', ')));
    root.append(g);
  }
  for (const state of chart.states.filter((s) => s.depth === 0)) {
    const p = pos.get(state.id)!;
    const g = svg('g', { class: 'node', 'data-state': state.id });
    g.append(svg('rect', { x: p.x, y: p.y, width: NODE_W, height: NODE_H, rx: 8 }));
    g.append(svg('text', { x: p.x + NODE_W / 2, y: p.y + NODE_H / 2 + 5, 'text-anchor': 'middle' }, state.label));
    chartNodes.set(state.id, g);
    root.append(g);
  }
  const driver = el('ul', { class: 'driver', 'aria-label': "Driver's IO state" });
  for (const state of data.driver.states.filter((s) => s.depth <= 1 || s.label === 'AwaitingApproval')) {
    driver.append(el('li', { 'data-io': state.id }, state.id));
  }
  const table = el('table', { class: 'transitions' }, el('caption', {}, `Transitions of ${chart.id} (generated from the machine definition)`));
  table.append(el('tr', {}, el('th', {}, 'from'), el('th', {}, 'event'), el('th', {}, 'guards'), el('th', {}, 'to')));
  for (const t of chart.transitions) {
    table.append(el('tr', { 'data-from': t.from }, el('td', {}, t.from), el('td', {}, t.event), el('td', {}, t.guards.join(' && ') || '—'), el('td', {}, t.to ?? '(stays)')));
  }
  const details = el('details', {}, el('summary', {}, `${chart.transitions.length} transitions`), table);
  chartBox.replaceChildren(el('h2', {}, data.mode === 'inspector' ? 'Statechart' : 'The brain'), root, el('h3', {}, 'Driver'), driver, details);
}
function highlight() {
  const current = data.session.state?.brain ?? null;
  const row = selected >= 0 ? builder.rows[selected] : undefined;
  for (const [id, node] of chartNodes) {
    node.classList.toggle('current', id === current);
    node.classList.toggle('selected', row !== undefined && row.state.split(' | ').some((path) => path === id || path.startsWith(`${id}.`)));
  }
  const io = row?.io ?? data.session.state?.io ?? '';
  for (const chip of chartBox.querySelectorAll<HTMLElement>('[data-io]')) {
    const id = chip.dataset.io!;
    chip.classList.toggle('active', io.split(' | ').some((path) => path === id || path.startsWith(`${id}.`)));
  }
}

// ---------- timeline (virtualized) ----------
const timeline = el('div', { id: 'timeline', role: 'listbox', tabindex: '0', 'aria-label': 'Timeline of runs and steps (arrow keys to move)' });
const spacer = el('div', { class: 'spacer' });
timeline.append(spacer);
const detail = el('section', { id: 'detail', 'aria-live': 'polite', 'aria-label': 'Selected step' });
const rendered = new Map<number, HTMLElement>();

function rowElement(row: Row, index: number): HTMLElement {
  const node = el(
    'div',
    { class: `row kind-${row.kind}${row.error ? ' failed' : ''}`, role: 'option', id: `row-${index}`, 'data-index': String(index), 'data-kind': row.kind },
    el('span', { class: 'time' }, row.time),
    el('span', { class: 'kind' }, row.kind),
    el('span', { class: 'title' }, row.title),
  );
  node.style.top = `${index * ROW_HEIGHT}px`;
  node.setAttribute('aria-selected', String(index === selected));
  return node;
}
function renderRows() {
  const count = builder.rows.length;
  spacer.style.height = `${count * ROW_HEIGHT}px`;
  const first = Math.max(0, Math.floor(timeline.scrollTop / ROW_HEIGHT) - OVERSCAN);
  const last = Math.min(count, Math.ceil((timeline.scrollTop + timeline.clientHeight) / ROW_HEIGHT) + OVERSCAN);
  for (const [index, node] of rendered) {
    if (index < first || index >= last) {
      node.remove();
      rendered.delete(index);
    }
  }
  for (let index = first; index < last; index++) {
    const existing = rendered.get(index);
    if (existing) {
      existing.setAttribute('aria-selected', String(index === selected));
      continue;
    }
    const node = rowElement(builder.rows[index]!, index);
    rendered.set(index, node);
    timeline.append(node);
  }
}
timeline.addEventListener('scroll', () => renderRows());
timeline.addEventListener('click', (event) => {
  const target = (event.target as HTMLElement).closest<HTMLElement>('.row');
  if (target) select(Number(target.dataset.index));
});
timeline.addEventListener('keydown', (event) => {
  const page = Math.max(1, Math.floor(timeline.clientHeight / ROW_HEIGHT) - 1);
  const moves: Record<string, number> = { ArrowDown: 1, j: 1, ArrowUp: -1, k: -1, PageDown: page, PageUp: -page };
  let next: number | undefined;
  if (event.key in moves) next = (selected < 0 ? 0 : selected + moves[event.key]!);
  else if (event.key === 'Home') next = 0;
  else if (event.key === 'End') next = builder.rows.length - 1;
  if (next === undefined) return;
  event.preventDefault();
  select(Math.max(0, Math.min(builder.rows.length - 1, next)));
});

function select(index: number) {
  if (index < 0 || index >= builder.rows.length) return;
  selected = index;
  const top = index * ROW_HEIGHT;
  if (top < timeline.scrollTop) timeline.scrollTop = top;
  else if (top + ROW_HEIGHT > timeline.scrollTop + timeline.clientHeight) timeline.scrollTop = top + ROW_HEIGHT - timeline.clientHeight;
  timeline.setAttribute('aria-activedescendant', `row-${index}`);
  renderRows();
  renderDetail();
  highlight();
}

/** Text past this length is shown cut, with a button for the rest: a 23 MB reply costs nothing until asked for. */
const LONG_TEXT = 20_000;
const SHOWN_OF_LONG = 2_000;
function textView(text: string, attrs: Record<string, string> = {}): HTMLElement {
  if (text.length <= LONG_TEXT) return el('pre', attrs, text);
  const pre = el('pre', { ...attrs, 'data-cut': String(text.length) }, text.slice(0, SHOWN_OF_LONG));
  const more = el('button', { type: 'button', class: 'more' }, `show all ${text.length.toLocaleString('en-US')} characters`);
  more.addEventListener('click', () => {
    pre.textContent = text;
    pre.removeAttribute('data-cut');
    more.remove();
  });
  return el('div', { class: 'long' }, pre, more);
}

function messageView(message: { role: string; content: string; toolCalls?: { id: string; name: string; args: unknown }[]; toolCallId?: string; toolName?: string; isError?: boolean }, index: number): HTMLElement {
  const box = el('article', { class: `message role-${message.role}`, 'data-position': String(index) });
  const who = message.role === 'tool' ? `tool ${message.toolName} (${message.toolCallId})${message.isError ? ' error' : ''}` : message.role;
  box.append(el('header', {}, `#${index} ${who}`), textView(message.content));
  for (const call of message.toolCalls ?? []) box.append(el('pre', { class: 'call' }, `→ ${call.name} (${call.id}) ${JSON.stringify(call.args, null, 2)}`));
  return box;
}

function renderDetail() {
  const row = builder.rows[selected];
  detail.replaceChildren();
  if (!row) {
    detail.append(el('p', { class: 'hint' }, 'Select a step (click, or arrow keys in the timeline).'));
    return;
  }
  detail.append(el('h2', {}, `${row.kind}: ${row.title}`));
  const dl = el('dl', { class: 'facts' });
  for (const [k, v] of row.facts) dl.append(el('div', { 'data-fact': k }, el('dt', {}, k), el('dd', {}, v)));
  dl.append(el('div', { 'data-fact': 'state' }, el('dt', {}, 'brain state'), el('dd', {}, row.state)));
  dl.append(el('div', { 'data-fact': 'io' }, el('dt', {}, 'driver'), el('dd', {}, row.io)));
  detail.append(dl);
  for (const [label, text] of row.blocks) detail.append(el('h3', {}, label), textView(text, { class: 'block' }));
  const prompt = promptAt(builder, selected);
  if (prompt) {
    const list = el('div', { class: 'conversation', id: 'conversation' });
    const messages = prompt.messages;
    // The latest messages at once; the earlier ones (thousands, on a long session) when asked for.
    const showFrom = (from: number) => {
      list.replaceChildren();
      if (from > 0) {
        const earlier = el('button', { type: 'button', class: 'more', id: 'conversation-earlier' }, `show the ${from} earlier messages`);
        earlier.addEventListener('click', () => showFrom(0));
        list.append(earlier);
      }
      for (let i = from; i < messages.length; i++) list.append(messageView(messages[i]!, i));
    };
    showFrom(Math.max(0, messages.length - CONVERSATION_SHOWN));
    detail.append(el('h3', {}, `The conversation as the model saw it (model call of turn ${prompt.turn}, ${messages.length} messages)`), list);
  }
}
/** Messages of a model call's conversation shown before "show earlier". */
const CONVERSATION_SHOWN = 100;

// ---------- live ----------
/** One live update: the trace entries after the page's cursor and, for a session, what changed in its log. */
interface LiveUpdate {
  entries: PageData['session']['trace'];
  rows?: Row[];
  head?: Partial<PageData['session']>;
  /** The log from position `from` on (what the page has past it is replaced). */
  log?: { from: number; messages: PageData['session']['messages'] };
  state?: Partial<NonNullable<PageData['session']['state']>> | null;
}
/** Following, or dropped for falling behind (the EventSource reconnects where it was). */
let liveStatus = 'following';
function connect() {
  if (!data.live || !data.eventsUrl) return;
  // A reconnect (after a drop) sends the last event's id instead: the server continues from it.
  const source = new EventSource(`${data.eventsUrl}?after=${builder.lastSeq}&log=${data.session.messages.length}`);
  source.onmessage = (message) => {
    const update = JSON.parse(message.data) as LiveUpdate;
    liveStatus = 'following';
    if (update.head) Object.assign(data.session, update.head);
    if (update.state) data.session.state = { ...data.session.state!, ...update.state };
    if (update.log) data.session.messages = data.session.messages.slice(0, update.log.from).concat(update.log.messages);
    builder.addRows(update.rows ?? []);
    builder.add(update.entries);
    renderHeader();
    renderRows();
    if (update.log) renderLog();
    timelineTitle.textContent = `Timeline (${builder.rows.length} steps)`;
    highlight();
  };
  source.addEventListener('dropped', () => {
    liveStatus = 'fell behind; reconnecting to';
    renderHeader();
  });
}

// ---------- the page ----------
const log = el('section', { id: 'log' });
function renderLog() {
  const messages = data.session.messages;
  log.replaceChildren(el('h2', {}, `The log (${messages.length} messages, as stored now)`));
  const shown = messages.slice(-200);
  const offset = messages.length - shown.length;
  if (offset > 0) log.append(el('p', { class: 'hint' }, `${offset} earlier messages not shown; select a model call to see its whole conversation.`));
  shown.forEach((message, i) => log.append(messageView(message, offset + i)));
}

renderHeader();
renderChart();
const timelineTitle = el('h2', { id: 'timeline-title' }, `Timeline (${builder.rows.length} steps)`);
const main = el('main', {}, el('div', { class: 'left' }, timelineTitle, timeline, log), detail);
app.replaceChildren(header, chartBox, main);
renderLog();
renderRows();
renderDetail();
highlight();
connect();
document.body.dataset.ready = String(performance.now());

/// <reference lib="dom" />
/// <reference lib="dom.iterable" />
/**
 * The viewer page: plain DOM, no framework, bundled into one script the server inlines. Every
 * piece of stored text reaches the page through `textContent` or `setAttribute` of attributes
 * that never load or run anything: nothing from a session is ever parsed as HTML.
 */
import { LAZY_TEXT_OVER, LAZY_HEAD, lazyTextId, parseLazy } from '../lazy-text.js';
import { LOG_SHOWN, type PageData, type Row } from '../page-model.js';
import { rowsOf, promptAt, type RowBuilder, type TimelineRow } from '../rows.js';
import { chartFrame, type ChartFrame } from './chart-frame.js';
import { markStates } from './chart-view.js';

const ROW_HEIGHT = 30;
const OVERSCAN = 8;

const data = JSON.parse(document.getElementById('loopchart-data')!.textContent!) as PageData;
data.session.trace = JSON.parse(document.getElementById('loopchart-trace')!.textContent!) as PageData['session']['trace'];

function el<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Record<string, string> = {}, ...children: (Node | string)[]): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, value);
  for (const child of children) node.append(typeof child === 'string' ? document.createTextNode(child) : child);
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
    if (s.state.agent) facts.push(['agent', `${s.state.agent.name} (handed over by ${s.state.agent.from})`]);
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
const chartBox = el('section', { id: 'chart', 'aria-label': 'Statecharts' });
let brainFrame: ChartFrame | undefined;
let driverFrame: ChartFrame | undefined;

function transitionsTable(chart: PageData['chart']): HTMLElement {
  const table = el('table', { class: 'transitions' }, el('caption', {}, `Transitions of ${chart.id} (generated from the machine definition)`));
  table.append(el('tr', {}, el('th', {}, 'from'), el('th', {}, 'event'), el('th', {}, 'guards'), el('th', {}, 'to')));
  for (const t of chart.transitions) {
    table.append(el('tr', { 'data-from': t.from }, el('td', {}, t.from), el('td', {}, t.event), el('td', {}, t.guards.join(' && ') || '—'), el('td', {}, t.to ?? '(stays)')));
  }
  // A long guard list scrolls inside its box: the page never grows wider than the window.
  return el('details', { class: 'transitions' }, el('summary', {}, `${chart.transitions.length} transitions as a table`), el('div', { class: 'table-scroll' }, table));
}

function chartFigure(name: string, title: string, chart: PageData['chart'], views: PageData['layouts']['chart'], current: string) {
  const figure = el('details', { class: 'chart', id: `chart-${name}`, open: '' }, el('summary', {}, el('h2', {}, title)));
  if (!views || views.length === 0) {
    figure.append(el('p', { class: 'hint' }, 'This chart could not be laid out; its transitions are listed below.'), transitionsTable(chart));
    return { figure, frame: undefined };
  }
  const frame = chartFrame(views, name, `statechart of ${chart.id}`, current, highlight);
  figure.append(frame.element, transitionsTable(chart));
  return { figure, frame };
}

/** Drawn after the first rows are on screen: the timeline is what a reader waits for. */
function renderChart() {
  const agent = data.driver.states.length > 0;
  const brain = chartFigure('brain', data.mode === 'inspector' && !agent ? `Statechart of ${data.chart.id}` : 'The brain (what to do next)', data.chart, data.layouts.chart, data.session.state?.brain ?? '');
  brainFrame = brain.frame;
  chartBox.replaceChildren(brain.figure);
  if (agent) {
    const driver = chartFigure('driver', 'The driver (the side effects)', data.driver, data.layouts.driver, data.session.state?.io ?? '');
    driverFrame = driver.frame;
    chartBox.append(driver.figure);
  }
  highlight();
}
const NO_NODES = new Map<string, SVGElement>();
function highlight() {
  const row = selected >= 0 ? builder.rows[selected] : undefined;
  const brainNodes = brainFrame?.nodes() ?? NO_NODES;
  const driverNodes = driverFrame?.nodes() ?? NO_NODES;
  markStates(brainNodes, 'current', data.session.state?.brain ?? '');
  markStates(brainNodes, 'selected', row?.state ?? '');
  markStates(driverNodes, 'current', data.session.state?.io ?? '');
  markStates(driverNodes, 'selected', row?.io ?? '');
}

// ---------- timeline (virtualized) ----------
const timeline = el('div', { id: 'timeline', role: 'listbox', tabindex: '0', 'aria-label': 'Timeline of runs and steps (arrow keys to move)' });
const spacer = el('div', { class: 'spacer' });
timeline.append(spacer);
const detail = el('section', { id: 'detail', 'aria-live': 'polite', 'aria-label': 'Selected step' });
const rendered = new Map<number, HTMLElement>();

function rowElement(row: TimelineRow, index: number): HTMLElement {
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
  // The selected step's states are shown: unfolded when folded away, brought into the box when outside it.
  const row = builder.rows[index]!;
  brainFrame?.reveal(row.state);
  driverFrame?.reveal(row.io);
}

/**
 * Text past `LAZY_TEXT_OVER` characters shows its head, its size and a button for the rest: a
 * 23 MB reply costs nothing until asked for. In the page's data such a text is a marker (the
 * text waits in its own island, parsed on the click); a live update may bring it whole.
 */
function textView(text: string, attrs: Record<string, string> = {}): HTMLElement {
  const lazy = parseLazy(text);
  if (!lazy && text.length <= LAZY_TEXT_OVER) return el('pre', attrs, text);
  const length = lazy?.length ?? text.length;
  const pre = el('pre', { ...attrs, 'data-cut': String(length) }, lazy?.head ?? text.slice(0, LAZY_HEAD));
  const more = el('button', { type: 'button', class: 'more' }, `show all ${length.toLocaleString('en-US')} characters`);
  more.addEventListener('click', () => {
    const whole = lazy ? (JSON.parse(document.getElementById(lazyTextId(lazy.index))!.textContent!) as string) : text;
    showChunked(pre, whole);
    pre.removeAttribute('data-cut');
    more.remove();
  });
  return el('div', { class: 'long' }, pre, more);
}

/** Characters per chunk of an expanded text: each chunk is laid out only once it scrolls into view. */
const CHUNK = 32_768;
/**
 * The whole text in a scrolling box, in chunks the browser skips while they are off screen
 * (`content-visibility: auto`): expanding 23 MB lays out one screenful, not 23 MB of lines.
 * Chunks end after a line break where the chunk has one, so lines are not cut.
 */
function showChunked(pre: HTMLElement, text: string) {
  const chunks: HTMLElement[] = [];
  for (let at = 0; at < text.length; ) {
    let piece = text.slice(at, at + CHUNK);
    // Searched within the chunk only: lastIndexOf on the whole text would scan back to its start.
    const newline = at + piece.length < text.length ? piece.lastIndexOf('\n') : -1;
    if (newline >= 0) piece = piece.slice(0, newline + 1);
    chunks.push(el('span', { class: 'chunk' }, piece));
    at += piece.length;
  }
  pre.classList.add('expanded');
  pre.replaceChildren(...chunks);
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
  const { facts, blocks } = row.detail();
  const dl = el('dl', { class: 'facts' });
  for (const [k, v] of facts) dl.append(el('div', { 'data-fact': k }, el('dt', {}, k), el('dd', {}, v)));
  dl.append(el('div', { 'data-fact': 'state' }, el('dt', {}, 'brain state'), el('dd', {}, row.state)));
  dl.append(el('div', { 'data-fact': 'io' }, el('dt', {}, 'driver'), el('dd', {}, row.io)));
  detail.append(dl);
  // A served page links a tool call to the child session it started; an exported file has no server to open it.
  if (row.child && data.live) detail.append(el('p', {}, el('a', { href: `/s/${encodeURIComponent(row.child)}`, 'data-child-session': row.child }, `open the child session ${row.child}`)));
  for (const [label, text] of blocks) detail.append(el('h3', {}, label), textView(text, { class: 'block' }));
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
  const source = new EventSource(`${data.eventsUrl}?after=${builder.lastSeq}&log=${logFrom + data.session.messages.length}`);
  // Updates apply in order; a big one (the rest of a long trace) in slices, so keys and scrolling still answer meanwhile.
  let applying = Promise.resolve();
  // Each event (a catch-up comes as several of bounded size) is parsed and applied in its own task.
  source.onmessage = (message) => {
    applying = applying.then(() => new Promise((resolve) => setTimeout(resolve, 0))).then(() => apply(JSON.parse(message.data) as LiveUpdate));
  };
  source.addEventListener('dropped', () => {
    liveStatus = 'fell behind; reconnecting to';
    renderHeader();
  });
}

/**
 * Trace entries a live update adds to the timeline between two yields to the browser: a slice
 * takes a few milliseconds, so a key pressed while the rest of a long trace comes in (or
 * anything else waiting for the page) waits no longer than that.
 */
const ENTRIES_PER_SLICE = 250;
/**
 * Lets the browser run what waits (input, rendering) and comes back at once: `scheduler.yield`
 * where the browser has it, else a message to itself. Not `setTimeout(0)`, which nested
 * timers stretch to 4 ms: 80 slices of a 20,000-entry trace would idle a third of a second.
 */
const yieldToBrowser = (): Promise<void> => {
  const scheduler = (globalThis as { scheduler?: { yield?: () => Promise<void> } }).scheduler;
  if (scheduler?.yield) return scheduler.yield();
  return new Promise((resolve) => {
    const channel = new MessageChannel();
    channel.port1.onmessage = () => resolve();
    channel.port2.postMessage(null);
  });
};
async function apply(update: LiveUpdate) {
  liveStatus = 'following';
  builder.addRows(update.rows ?? []);
  for (let at = 0; at < update.entries.length; at += ENTRIES_PER_SLICE) {
    if (at > 0) await yieldToBrowser();
    builder.add(update.entries.slice(at, at + ENTRIES_PER_SLICE));
    // The scrollbar grows with each slice; rows are drawn once, below (drawing reads the layout, which forces it).
    spacer.style.height = `${builder.rows.length * ROW_HEIGHT}px`;
    renderTitle();
  }
  if (update.head) Object.assign(data.session, update.head);
  if (update.state) data.session.state = { ...data.session.state!, ...update.state };
  if (update.log) keepLog(update.log.from, update.log.messages);
  renderHeader();
  renderRows();
  if (update.log) renderLog();
  renderTitle();
  highlight();
}

// ---------- the page ----------
/** The page holds the log's last `LOG_SHOWN` messages; this is the log position of the first. */
let logFrom = data.session.logFrom ?? 0;
/** The log from position `from` on is `messages` (what the page held past it is replaced). */
function keepLog(from: number, messages: PageData['session']['messages']) {
  const held = from < logFrom ? messages : data.session.messages.slice(0, from - logFrom).concat(messages);
  logFrom = Math.min(from, logFrom) + Math.max(0, held.length - LOG_SHOWN);
  data.session.messages = held.slice(-LOG_SHOWN);
}
const log = el('section', { id: 'log' });
function renderLog() {
  const shown = data.session.messages;
  log.replaceChildren(el('h2', {}, `The log (${logFrom + shown.length} messages, as stored now)`));
  if (logFrom > 0) log.append(el('p', { class: 'hint' }, `${logFrom} earlier messages not shown; select a model call to see its whole conversation.`));
  shown.forEach((message, i) => log.append(messageView(message, logFrom + i)));
}

renderHeader();
const timelineTitle = el('h2', { id: 'timeline-title' });
/** A served page of a long session holds the trace's start; until the event stream brought the rest, the title says so. */
function renderTitle() {
  const loading = builder.lastSeq < (data.session.traceTo ?? 0);
  timelineTitle.textContent = `Timeline (${builder.rows.length} steps${loading ? ', loading the rest…' : ''})`;
  if (!loading && document.body.dataset.complete === undefined) document.body.dataset.complete = String(performance.now());
}
renderTitle();
const main = el('main', {}, el('div', { class: 'left' }, timelineTitle, timeline, log), detail);
app.replaceChildren(header, chartBox, main);
renderLog();
renderRows();
renderDetail();
connect();
document.body.dataset.ready = String(performance.now());
requestAnimationFrame(() => {
  renderChart();
  document.body.dataset.charts = String(performance.now());
});

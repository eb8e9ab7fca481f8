import type { ScheduleInfo } from '../schedules/schedules.js';
import type { ReadTraceEntry } from '../sessions/trace.js';
import { LazyTexts, lazyTextId } from './lazy-text.js';
import { LOG_SHOWN, type PageData } from './page-model.js';
import type { SessionListing } from './load.js';
import { VIEWER_STYLE } from './style.js';

/**
 * The viewer's HTML documents. Everything that came from a store goes through `escapeHtml`
 * (server-rendered parts) or into a JSON island the page script reads with `textContent`.
 * Every page forbids network access beyond its own origin (and an exported file beyond itself)
 * with a Content-Security-Policy, so even a missed escape could not load or send anything.
 */

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Text for HTML element content and quoted attribute values. */
export const escapeHtml = (text: string): string => text.replace(/[&<>"']/g, (c) => ESCAPES[c]!);

/**
 * JSON inside `<script type="application/json">`: `<`, `>`, `&` and the JavaScript line
 * separators as `\u` escapes, so no `</script>` or `<!--` can end or change the block.
 */
export const jsonIsland = (value: unknown): string =>
  JSON.stringify(value).replace(/[<>&\u2028\u2029]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);

/** A session page's path: the id is percent-encoded, whatever it holds. */
export const sessionPath = (sessionId: string): string => `/s/${encodeURIComponent(sessionId)}`;
/** The page of a live actor `viewerInspector()` streams (ids chosen by the host, so encoded too). */
export const actorPath = (actorId: string): string => `/a/${encodeURIComponent(actorId)}`;

/** A whole page: the viewer's style, its Content-Security-Policy, `body` as given (already escaped). */
export function document(title: string, body: string, options: { script?: string | undefined; connect?: boolean | undefined; after?: string | undefined } = {}): string {
  // An exported file has no server: no connection at all. A served page talks to its own origin only.
  const csp = [
    "default-src 'none'",
    "style-src 'unsafe-inline'",
    options.script ? "script-src 'unsafe-inline'" : '',
    options.connect ? "connect-src 'self'" : '',
    "img-src 'none'",
    "base-uri 'none'",
    "form-action 'none'",
  ]
    .filter(Boolean)
    .join('; ');
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="${escapeHtml(csp)}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)}</title>
<style>${VIEWER_STYLE}</style>
</head>
<body>
${body}
${options.script ? `<script>${options.script.replace(/<\/script/gi, '<\\/script')}</script>` : ''}
${options.after ?? ''}
</body>
</html>
`;
}

/** A trace as a page embeds it: each entry's island JSON, its long texts as markers of `texts`. */
export interface EmbeddedTrace {
  json: readonly string[];
  texts: LazyTexts;
  /** The last entry's seq (0 for none). */
  lastSeq: number;
}

/** Entries as a page embeds them (their long texts kept in `texts`). */
export const embedTrace = (entries: readonly ReadTraceEntry[], texts = new LazyTexts()): EmbeddedTrace => ({
  json: entries.map((entry) => jsonIsland(texts.lift(entry))),
  texts,
  lastSeq: entries.at(-1)?.seq ?? 0,
});

/** Trace entries a live page gets in the page itself; the rest come over its event stream. */
export const FIRST_ENTRIES = 500;

/** The texts' islands, each encoded once (a cached trace's 23 MB reply is not escaped again on every load). */
const encoded = new WeakMap<LazyTexts, string[]>();
function encodedTexts(texts: LazyTexts): string[] {
  let islands = encoded.get(texts);
  if (!islands) encoded.set(texts, (islands = []));
  for (let i = islands.length; i < texts.texts.length; i++) islands.push(jsonIsland(texts.texts[i]));
  return islands;
}

/**
 * A session page (served live, or exported to one file). The page's data holds the log's end
 * only, and long texts as markers: their islands come after the page script, so the page is
 * drawn before the browser has even read them, and parses one only when it is expanded. The
 * trace is its own island, made of the entries' JSON: a viewer keeps it per session (see
 * `TraceCache`) and passes it as `trace`, so a load does not encode 20,000 entries again.
 */
export function sessionPage(data: PageData, script: string, trace: EmbeddedTrace = embedTrace(data.session.trace)): string {
  const { messages } = data.session;
  const logFrom = (data.session.logFrom ?? 0) + Math.max(0, messages.length - LOG_SHOWN);
  // A live page draws the trace's start and gets the rest over its event stream, after the first render.
  const cut = data.live && trace.json.length > FIRST_ENTRIES;
  const entries = cut ? trace.json.slice(0, FIRST_ENTRIES) : trace.json;
  const traceTo = cut ? { traceTo: trace.lastSeq } : {};
  const session = { ...data.session, messages: messages.slice(-LOG_SHOWN), logFrom, trace: [], ...traceTo };
  const main = jsonIsland(trace.texts.lift({ ...data, session }));
  const islands = encodedTexts(trace.texts).map((json, i) => `<script type="application/json" id="${lazyTextId(i)}">${json}</script>`).join('\n');
  return document(
    `loopchart · ${data.session.sessionId}`,
    `<nav>${data.live ? '<a href="/">all sessions</a> · ' : ''}loopchart view</nav>
<div id="app"><p>Loading ${escapeHtml(data.session.sessionId)}…</p></div>
<script type="application/json" id="loopchart-data">${main}</script>
<script type="application/json" id="loopchart-trace">[${entries.join(',')}]</script>`,
    { script, connect: data.live, after: islands },
  );
}

const dateText = (date: Date) => date.toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z');

/** The schedules page's path (routed by the path alone). */
export const SCHEDULES_PATH = '/schedules';

const NAV = `<nav>loopchart view · <a href="/">sessions</a> · <a href="${SCHEDULES_PATH}">schedules</a></nav>`;

/** When a schedule fires: its cron and zone, its interval, or its one instant. */
function timingText(info: ScheduleInfo): string {
  switch (info.timing.kind) {
    case 'cron':
      return `cron ${info.timing.cron} (${info.timezone})`;
    case 'every':
      return `every ${info.timing.everyMs / 1000} s`;
    case 'at':
      return `once at ${dateText(new Date(info.timing.at))}`;
  }
}

/**
 * The schedules of the store, read only: what each sends to which session, when, and its last and
 * next runs. `null` for a store that cannot hold schedules: the page says so, with no table.
 */
export function schedulesPage(schedules: readonly ScheduleInfo[] | null, storeLabel: string): string {
  const date = (value: Date | null) => (value ? escapeHtml(dateText(value)) : '—');
  const rows = (schedules ?? [])
    .map((s) => {
      const state = s.paused ? 'paused' : s.firingBy ? `firing (${s.firingBy})` : s.nextAt ? 'active' : 'done';
      const last = s.lastOutcome === null ? '—' : `${s.lastOutcome}${s.lastError ? `: ${s.lastError}` : ''}`;
      return `<tr${s.lastOutcome === 'Failed' ? ' class="unreadable"' : ''}>
<td class="id">${escapeHtml(s.id)}</td>
<td>${escapeHtml(s.agent)}</td>
<td class="id"><a href="${escapeHtml(sessionPath(s.session))}">${escapeHtml(s.session)}</a>${s.scope === undefined ? '' : ` <span class="scope">(scope ${escapeHtml(s.scope)})</span>`}</td>
<td>${escapeHtml(timingText(s))}</td>
<td>${escapeHtml(state)}</td>
<td class="next">${date(s.nextAt)}</td>
<td class="last">${date(s.lastFiredAt)}</td>
<td>${escapeHtml(last)}</td>
<td>${s.runs}</td>
</tr>`;
    })
    .join('\n');
  const body =
    schedules === null
      ? '<p>This store cannot hold schedules.</p>'
      : schedules.length === 0
        ? '<p>No schedules yet.</p>'
        : `<div class="table"><table id="schedules"><thead><tr><th>schedule</th><th>agent</th><th>session</th><th>when</th><th>state</th><th>next run</th><th>last run</th><th>last outcome</th><th>runs</th></tr></thead>
<tbody>
${rows}
</tbody></table></div>`;
  return document('loopchart · schedules', `${NAV}\n<main class="home">\n<h1>Schedules in ${escapeHtml(storeLabel)}</h1>\n${body}\n</main>`);
}

/** The home page: every session of the store (with a link to its schedules when `schedules`: the viewer's, not the inspector's). */
export function homePage(listings: readonly SessionListing[], storeLabel: string, pathOf: (id: string) => string = sessionPath, schedules = false): string {
  const rows = listings
    .map(
      (s) => `<tr${s.error ? ' class="unreadable"' : ''}>
<td class="id"><a href="${escapeHtml(pathOf(s.sessionId))}">${escapeHtml(s.sessionId)}</a></td>
<td>${escapeHtml(dateText(s.updatedAt))}</td>
<td>${s.runs ?? '—'}</td>
<td>${escapeHtml(s.error ? `${s.error.name} (${s.error.code}): ${s.error.message}` : s.outcome)}</td>
<td>${s.tokens ?? '—'}</td>
<td>${s.costUsd === null ? '—' : `$${s.costUsd.toFixed(6)}`}</td>
</tr>`,
    )
    .join('\n');
  return document(
    'loopchart · sessions',
    `${schedules ? NAV : '<nav>loopchart view</nav>'}
<main class="home">
<h1>Sessions in ${escapeHtml(storeLabel)}</h1>
${
  listings.length === 0
    ? '<p>No sessions yet.</p>'
    : `<div class="table"><table id="sessions"><thead><tr><th>session</th><th>last activity</th><th>runs</th><th>outcome</th><th>tokens</th><th>cost</th></tr></thead>
<tbody>
${rows}
</tbody></table></div>`
}
</main>`,
  );
}

/**
 * The 500 page of a request that failed: a reference, never the error, whose message may hold a
 * connection string, a path or another session's data (see `reportFailure`, which logs it).
 */
export const failurePage = (reference: string): string =>
  messagePage('Internal error', `The viewer could not answer this request (reference ${reference}); the error is in the server's log under that reference.`);

/** A plain page for 404s and errors. */
export function messagePage(title: string, text: string): string {
  return document(`loopchart · ${title}`, `<nav><a href="/">all sessions</a></nav><main class="home"><h1>${escapeHtml(title)}</h1><p id="message">${escapeHtml(text)}</p></main>`);
}

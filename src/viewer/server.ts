import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { wholeChart } from '../../machines/agent.machine.js';
import { LoopchartError } from '../errors.js';
import { readSessionTrace } from '../sessions/trace.js';
import { isSessionStore, type SessionStore } from '../stores/session-store.js';
import { MAX_TIMER_MS } from '../timer-bound.js';
import { sessionIdProblem } from '../stores/step.js';
import { clientScript } from './asset.js';
import { SessionFeeds, liveCursor } from './feed.js';
import { answerFailure, closeAfterAnswer, localRequestProblem, pagePath, refuse, requestTarget, sendHtml as send } from './http.js';
import { brainChart, chartOf, type ChartModel } from './chart.js';
import { cachedViews } from './chart-layout.js';
import { comparePage, comparePaths } from './compare.js';
import { listSessionViews, loadSessionView } from './load.js';
import { homePage, messagePage, SCHEDULES_PATH, schedulesPage, sessionPage, sessionPath } from './page.js';
import type { PageData, SessionView } from './page-model.js';
import { ScheduleSourceSchema, sourcedSchedules, storedSchedules } from './schedules.js';
import { refusalPage, ViewerAccess, ViewerAccessOptionsSchema, type ViewerAuthorizer } from './access.js';
import type { AuthorizationRefusal } from '../authorization.js';
import type { ScheduleSource } from '../schedules/schedules.js';
import { TraceCache } from './trace-cache.js';
import { LiveStreams, liveLimits, ViewerOptionsError, type LiveLimitsInput, type LiveStats } from './sse.js';
import { checkKnownKeys, optionKeys, parseOptions } from '../known-keys.js';

/** The viewer's address: loopback only, never another interface. */
export const VIEWER_HOST = '127.0.0.1';
export const DEFAULT_VIEWER_PORT = 4317;

/**
 * The viewer could not listen (the port is taken, or not allowed).
 *
 * @example
 * ```ts
 * try { await startViewer({ store, port: 4317 }); } catch (e) { if (ViewerListenError.isInstance(e)) console.error(e.message); }
 * ```
 */
export class ViewerListenError extends LoopchartError {
  readonly port: number;
  constructor(port: number, problem: string, options?: { cause?: unknown }) {
    super('ViewerListen', `cannot serve the viewer on ${VIEWER_HOST}:${port}: ${problem}`, options);
    this.port = port;
  }
}

export interface ViewerOptions {
  store: SessionStore;
  /** Default 4317; 0 picks a free port. */
  port?: number | undefined;
  /** How often a live page's store is polled for new steps, in ms (default 250). */
  pollMs?: number | undefined;
  /** Shown on the home page (the store's location). */
  storeLabel?: string | undefined;
  /** How far a live page may fall behind before it is dropped (it reconnects where it was). */
  live?: LiveLimitsInput | undefined;
  /**
   * Asked before any page, event stream or list is served, and for each session a list would
   * show (see `ViewerAuthorizer`). Without it, every request from this machine is answered.
   */
  authorize?: ViewerAuthorizer | undefined;
  /** How long `authorize` may take to answer, in ms (default 5 s); then the request is refused. */
  authorizeTimeoutMs?: number | undefined;
  /** Where `/schedules` lists from (default: the store): a `restateScheduleClient` for schedules kept by Restate. */
  schedules?: ScheduleSource | undefined;
}

const VIEWER_OPTION_KEYS = optionKeys<ViewerOptions>()({
  store: true,
  port: true,
  pollMs: true,
  storeLabel: true,
  live: true,
  authorize: true,
  authorizeTimeoutMs: true,
  schedules: true,
});

/** The options besides the store's and the port's, checked once the keys are: the hook, its timeout, the schedule source. */
const CheckedOptionsSchema = ViewerAccessOptionsSchema.extend({ schedules: ScheduleSourceSchema.optional() });

/** A longer pollMs would poll every millisecond (Node cuts such a delay to 1 ms). */
const MAX_POLL_MS = MAX_TIMER_MS;

/**
 * The store, port, poll interval and label, checked before anything listens. Before, a port of
 * 'x' listened on a socket file named x, a pollMs of 0, -1 or 1e12 polled every millisecond, and
 * a store or label of the wrong type failed every page.
 */
function checkViewerSettings(options: ViewerOptions): void {
  const bad = (message: string) => new ViewerOptionsError(`startViewer: ${message}`);
  const { store, port, pollMs, storeLabel }: Record<string, unknown> = { ...options };
  if (!isSessionStore(store)) throw bad('store must be a session store (openSessionStore)');
  if (port !== undefined && (!Number.isInteger(port) || (port as number) < 0 || (port as number) > 65_535)) throw bad(`port must be a whole number from 0 to 65535, got ${String(port)}`);
  if (pollMs !== undefined && (!Number.isInteger(pollMs) || (pollMs as number) < 1 || (pollMs as number) > MAX_POLL_MS)) throw bad(`pollMs must be a whole number of ms from 1 to ${MAX_POLL_MS}, got ${String(pollMs)}`);
  if (storeLabel !== undefined && typeof storeLabel !== 'string') throw bad(`storeLabel must be a string, got ${typeof storeLabel}`);
}

export interface RunningViewer {
  url: string;
  port: number;
  /** The live pages now: how many follow, the bytes waiting for them, how many were dropped. */
  liveStats(): LiveStats;
  close(): Promise<void>;
}

let driverChart: ChartModel | undefined;
/**
 * The driver's chart, generated once from the whole chart: every feature's branches (an agent
 * runs the variant without those of features it is not configured with; its states are the same).
 */
export const agentChart = (): ChartModel => (driverChart ??= chartOf(wholeChart()));

/** Both charts of a page, laid out in each of their views (once per process: the layouts are cached). */
export async function chartLayouts(chart: ChartModel, driver: ChartModel): Promise<PageData['layouts']> {
  const [a, b] = await Promise.all([cachedViews(chart), driver.states.length ? cachedViews(driver) : null]);
  return { chart: a, driver: b };
}

/** A refusal of `authorize`, answered as `refusalPage` says (a 404 with the page of a missing session, by default). */
function sendRefusal(res: ServerResponse, refusal: AuthorizationRefusal, text: string, title = 'Session not found'): void {
  const page = refusalPage(refusal, { title, text });
  send(res, page.status, page.html);
}

/** The data of a session page. */
export async function pageData(session: SessionView, live: boolean): Promise<PageData> {
  const chart = brainChart();
  const driver = agentChart();
  return {
    mode: 'session',
    live,
    eventsUrl: live ? `${sessionPath(session.sessionId)}/events` : null,
    chart,
    driver,
    layouts: await chartLayouts(chart, driver),
    session,
  };
}

/**
 * A session as one self-contained HTML file (script and style inlined, no network access):
 * what `loopchart view export` writes. Undefined for an unknown session.
 *
 * @example
 * ```ts
 * import { writeFile } from 'node:fs/promises';
 * import { exportSessionHtml } from 'loopchart/viewer';
 *
 * const html = await exportSessionHtml(store, 'support-42');
 * if (html) await writeFile('run.html', html);
 * ```
 */
export async function exportSessionHtml(store: SessionStore, sessionId: string): Promise<string | undefined> {
  const view = await loadSessionView(store, sessionId);
  return view && sessionHtml(view);
}

/** A loaded session as one self-contained HTML file (see `exportSessionHtml`); its error, if any, is shown on the page. */
export async function sessionHtml(view: SessionView): Promise<string> {
  return sessionPage(await pageData(view, false), await clientScript());
}

/**
 * Serves the viewer on 127.0.0.1: the home page (every session), a page per session (the
 * brain's statechart, the timeline, the conversation at any step), the store's schedules with
 * their last and next runs (`/schedules`, read only), an eval case's recorded and new run side by
 * side (`/compare/<recorded>/<new>`, see `comparePath` in loopchart/evals) and, for open pages, the
 * session's new steps as server-sent events, polled from the store. Resolves once it listens and
 * the two charts are laid out (ELK, in a worker thread; a second or two the first time in a process).
 *
 * @example
 * ```ts
 * import { openSessionStore } from 'loopchart';
 * import { startViewer } from 'loopchart/viewer';
 * const viewer = await startViewer({ store: await openSessionStore(), port: 0 });
 * console.log(`open ${viewer.url}`);
 * ```
 */
export async function startViewer(options: ViewerOptions): Promise<RunningViewer> {
  checkKnownKeys(options, VIEWER_OPTION_KEYS, 'startViewer', (message) => new ViewerOptionsError(message));
  checkViewerSettings(options);
  const { store } = options;
  const checked = parseOptions(CheckedOptionsSchema, { authorize: options.authorize, authorizeTimeoutMs: options.authorizeTimeoutMs, schedules: options.schedules }, 'startViewer', (message) => new ViewerOptionsError(message));
  const access = new ViewerAccess(checked);
  const schedules = checked.schedules;
  const live = new LiveStreams(liveLimits(options.live));
  const traces = new TraceCache(store);
  const readTrace = async (sessionId: string, afterSeq = 0) => (await traces.read(sessionId)).entries.filter((record) => record.seq > afterSeq);
  const feeds = new SessionFeeds(store, options.pollMs ?? 250, readTrace);
  const label = options.storeLabel ?? 'the store';
  let port = 0;
  // The charts are laid out (in a worker) while the server starts listening: no page waits for ELK's slow first run.
  const laidOut = chartLayouts(brainChart(), agentChart());

  /** An eval case's two runs side by side: both sessions must be in the store (a 404 names the one that is not). */
  const sendCompare = async (res: ServerResponse, request: Request | undefined, recorded: string, got: string) => {
    for (const id of [recorded, got]) {
      const refusal = await access.check(request, id);
      if (refusal) return sendRefusal(res, refusal, `There is no session '${id}' in ${label}: both runs must be in the store the viewer serves.`);
    }
    const known = new Set((await store.list()).map((summary) => summary.sessionId));
    for (const id of [recorded, got]) {
      if (sessionIdProblem(id) !== null || !known.has(id)) return send(res, 404, messagePage('Session not found', `There is no session '${id}' in ${label}: both runs must be in the store the viewer serves.`));
    }
    const [a, b] = await Promise.all([recorded, got].map((id) => readSessionTrace(store, id)));
    return send(res, 200, comparePage({ sessionId: recorded, trace: a! }, { sessionId: got, trace: b! }));
  };

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    closeAfterAnswer(req, res);
    const refused = localRequestProblem(req.headers, port, req.rawHeaders);
    if (refused) return refuse(res, refused.status, refused.code, refused.reason);
    const url = requestTarget(req.url);
    if (url === null) return refuse(res, 400, 'BadRequestTarget', 'only a path (/...) is served here');
    if (req.method !== 'GET') return send(res, 405, messagePage('Method not allowed', `${req.method} is not served here.`));
    const request = access.requestOf(req, `http://${VIEWER_HOST}:${port}`);
    if (request === null) return refuse(res, 400, 'BadRequest', 'a header of this request cannot be read');
    if (url.pathname === '/' || url.pathname === SCHEDULES_PATH) {
      const refusal = await access.check(request, null);
      if (refusal) return sendRefusal(res, refusal, `Nothing is served at ${url.pathname}.`, 'Not found');
      if (url.pathname === '/') return send(res, 200, homePage(await access.visible(request, await listSessionViews(store), (s) => s.sessionId), label, sessionPath, true));
      const listed = schedules ? await sourcedSchedules(schedules) : await storedSchedules(store);
      const shown = listed && (await access.visible(request, listed, (s) => s.session));
      return send(res, 200, schedulesPage(shown, schedules?.label ?? label));
    }
    const compared = comparePaths(url.pathname);
    if (compared) return sendCompare(res, request, compared.recorded, compared.got);
    const page = pagePath(url.pathname, 's');
    if (page === null || sessionIdProblem(page.id) !== null) return send(res, 404, messagePage('Not found', `Nothing is served at ${url.pathname}.`));
    const sessionId = page.id;
    const missing = () => send(res, 404, messagePage('Session not found', `There is no session '${sessionId}' in ${label}.`));
    // Asked before the store is read: a refused caller learns nothing of the session, not even whether it exists.
    const refusal = await access.check(request, sessionId);
    if (refusal) return sendRefusal(res, refusal, `There is no session '${sessionId}' in ${label}.`);
    if (page.events) {
      const lastEventId = req.headers['last-event-id'];
      const cursor = liveCursor(url.searchParams, Array.isArray(lastEventId) ? lastEventId[0] : lastEventId);
      if (cursor === null) return send(res, 400, messagePage('Bad request', "'after' and 'log' must be whole numbers from 0 (a trace sequence number and a log length)."));
      const feed = await feeds.feed(sessionId);
      if (!feed) return missing();
      const stream = live.open(res, (closed) => feed.detach(closed));
      return feed.attach(stream, cursor);
    }
    const trace = await traces.read(sessionId).catch(() => undefined);
    const loaded = await loadSessionView(store, sessionId, trace ? async () => trace.entries.slice() : readTrace);
    if (!loaded) return missing();
    // The page links its subagents' sessions: only those this caller may read.
    const view = loaded.children ? { ...loaded, children: await access.visible(request, loaded.children, (id) => id) } : loaded;
    if (!view.error) feeds.prime(view);
    return send(res, view.error ? 500 : 200, sessionPage(await pageData(view, true), await clientScript(), trace));
  };

  // A request with no Host is answered here (a JSON 400), not by Node's plain one.
  const server: Server = createServer({ requireHostHeader: false }, (request, response) => {
    handle(request, response).catch((error: unknown) => answerFailure(request, response, error));
  });
  const wanted = options.port ?? DEFAULT_VIEWER_PORT;
  await new Promise<void>((resolve, reject) => {
    server.once('error', (error: NodeJS.ErrnoException) => {
      const problem =
        error.code === 'EADDRINUSE'
          ? `the port is in use (EADDRINUSE); stop what holds it or pick another with --port`
          : error.code === 'EACCES'
            ? 'permission denied (EACCES); pick a port above 1023 with --port'
            : error.message;
      reject(new ViewerListenError(wanted, problem, { cause: error }));
    });
    server.listen(wanted, VIEWER_HOST, () => resolve());
  });
  port = (server.address() as AddressInfo).port;
  await laidOut;
  return {
    url: `http://${VIEWER_HOST}:${port}/`,
    port,
    liveStats: () => live.stats(),
    close: () =>
      new Promise<void>((resolve) => {
        feeds.stopAll();
        live.endAll();
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

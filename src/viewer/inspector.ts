import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AgentContext } from '../agent/core/context.js';
import type { AddressInfo } from 'node:net';
import type { AnyStateMachine, InspectionEvent } from 'xstate';
import { statePath } from '../sessions/trace.js';
import { clientScript } from './asset.js';
import { answerFailure, closeAfterAnswer, cursorParam, localRequestProblem, pagePath, refuse, requestTarget, sendHtml as html } from './http.js';
import { brainChart, chartOf, type ChartModel } from './chart.js';
import { actorPath, homePage, messagePage, sessionPage } from './page.js';
import type { PageData, Row, SessionView } from './page-model.js';
import { describeOutcome } from './load.js';
import { agentChart, chartLayouts, VIEWER_HOST, ViewerListenError } from './server.js';
import { LiveStreams, liveLimits, sseEvent, ViewerOptionsError, type LiveLimitsInput, type LiveStats, type SseStream } from './sse.js';
import { checkKnownKeys, optionKeys, parseOptions } from '../known-keys.js';
import { refusalPage, ViewerAccess, ViewerAccessOptionsSchema, type ViewerAuthorizer } from './access.js';

/**
 * `viewerInspector()`: the offline counterpart of the Stately inspector. Pass `inspect` to
 * `createActor` (any XState actor); a local page on 127.0.0.1 shows each inspected machine's
 * statechart, generated from its definition, with the current state highlighted and every
 * event it took as a timeline row, live. A loopchart agent gets the brain's chart with the
 * driver's IO state, and a summary of its conversation (never the whole history: inspecting
 * 10,000 messages per event would cost tens of milliseconds each).
 */

export interface ViewerInspectorOptions {
  /** Default 0: a free port (read `url` once `ready` resolves). */
  port?: number | undefined;
  /** Rows kept per actor, oldest dropped first. Default 10,000. */
  maxRows?: number | undefined;
  /** How far a live page may fall behind before it is dropped (it reconnects where it was). */
  live?: LiveLimitsInput | undefined;
  /** Asked before any page or event stream is served, with the actor's id as `sessionId` (null for the list); see `ViewerAuthorizer`. */
  authorize?: ViewerAuthorizer | undefined;
  /** How long `authorize` may take to answer, in ms (default 5 s); then the request is refused. */
  authorizeTimeoutMs?: number | undefined;
}

const INSPECTOR_OPTION_KEYS = optionKeys<ViewerInspectorOptions>()({ port: true, maxRows: true, live: true, authorize: true, authorizeTimeoutMs: true });

export interface ViewerInspector {
  /** The `inspect` option for `createActor`. */
  inspect: (event: InspectionEvent) => void;
  /** Resolves with the page's URL once the server listens and the charts are laid out (rejects with ViewerListenError). */
  ready: Promise<string>;
  /** The live pages now: how many follow, the bytes waiting for them, how many were dropped. */
  liveStats(): LiveStats;
  close(): Promise<void>;
}

interface Tracked {
  id: string;
  chart: ChartModel;
  agent: boolean;
  rows: Row[];
  seq: number;
  state: string;
  io: string;
  /** A loopchart agent's counters from its last snapshot (zeros for any other machine). */
  counts: Counts;
  /** The open pages of this actor: each gets every new row, or is dropped when it falls behind. */
  listeners: Set<SseStream>;
}

/** New rows for an actor's pages; the id is the last row's number (a reconnect continues after it). */
const rowsEvent = (tracked: Tracked, rows: readonly Row[]): Buffer =>
  sseEvent({ entries: [], rows, state: { brain: tracked.state, io: tracked.io, ...tracked.counts } }, { id: String(rows.at(-1)!.seq) });

type Counts = Pick<NonNullable<SessionView['state']>, 'inFlight' | 'runs' | 'turns' | 'usage' | 'outcome'>;
const NO_COUNTS: Counts = { inFlight: false, runs: 0, turns: 0, usage: { inputTokens: 0, outputTokens: 0 }, outcome: null };

/** The header's counters, read from the agent's own context: runs, turns, tokens, the outcome. */
function agentCounts(context: InspectedAgent): Counts {
  const { brain } = context;
  // `runInFlight`'s rule, read from the lists as they came (a summarized context carries no log).
  const inFlight = brain.value !== 'Terminal' && (brain.value !== 'Start' || countOf(brain.context.pending) > 0);
  const outcome = brain.context.outcome ?? context.lastRun?.outcome ?? null;
  return { inFlight, runs: context.runIndex, turns: brain.context.turnsTaken, usage: context.sessionUsage, outcome: inFlight ? null : outcome && describeOutcome(outcome) };
}

/**
 * A message list as the actor holds it, or as `summarizingInspector` passes it on (`{ count,
 * last }`): the docs advise wrapping this inspector in it, and an agent must stay an agent then.
 */
type MessageList = readonly unknown[] | { count: number; last: readonly unknown[] };
const isMessageList = (value: unknown): value is MessageList =>
  Array.isArray(value) || (typeof value === 'object' && value !== null && typeof (value as { count?: unknown }).count === 'number' && Array.isArray((value as { last?: unknown }).last));
const countOf = (list: MessageList): number => ('count' in list ? list.count : list.length);
const lastOf = (list: MessageList): readonly unknown[] => ('count' in list ? list.last : list);

/** What the inspector reads of a loopchart agent's context (see `isAgentContext`). */
interface InspectedAgent {
  brain: { value: string; context: { history: MessageList; pending: MessageList; turnsTaken: number; contextTokens: number; totalToolCalls: number; outcome?: AgentContext['brain']['context']['outcome'] | undefined } };
  runIndex: number;
  sessionUsage: AgentContext['sessionUsage'];
  lastRun?: AgentContext['lastRun'] | undefined;
}

const summaryOf = (value: unknown): string => {
  try {
    const text = JSON.stringify(value, null, 2) ?? 'undefined';
    return text.length > 4000 ? `${text.slice(0, 4000)}…` : text;
  } catch {
    return String(value);
  }
};

/** An agent's context without its conversation: counts and the last messages only. */
function agentSummary(context: InspectedAgent) {
  const { history, pending, turnsTaken, contextTokens, totalToolCalls } = context.brain.context;
  const all = countOf(history) + countOf(pending);
  return { brain: context.brain.value, messages: all, turnsTaken, contextTokens, totalToolCalls, lastMessages: [...lastOf(history), ...lastOf(pending)].slice(-3) };
}

/** A loopchart agent's context (what the header counts from), not just any machine's. */
function isAgentContext(context: unknown): context is InspectedAgent {
  const c = context as { brain?: { value?: unknown; context?: { history?: unknown; pending?: unknown } | undefined } | undefined; runIndex?: unknown; sessionUsage?: unknown } | null;
  return (
    typeof c === 'object' &&
    c !== null &&
    typeof c.brain?.value === 'string' &&
    isMessageList(c.brain.context?.history) &&
    isMessageList(c.brain.context?.pending) &&
    typeof c.runIndex === 'number' &&
    typeof c.sessionUsage === 'object' &&
    c.sessionUsage !== null
  );
}

/** The page of one inspected actor: its chart (and the driver's, for an agent) and its rows so far. */
async function pageFor(tracked: Tracked, script: string): Promise<string> {
  const driver = tracked.agent ? agentChart() : { id: tracked.chart.id, states: [], transitions: [] };
  const data: PageData = {
    mode: 'inspector',
    live: true,
    eventsUrl: `${actorPath(tracked.id)}/events`,
    chart: tracked.chart,
    driver,
    layouts: await chartLayouts(tracked.chart, driver),
    session: {
      sessionId: tracked.id,
      version: tracked.seq,
      messageCount: 0,
      updatedAt: null,
      error: null,
      state: { brain: tracked.state as never, io: tracked.io, ...tracked.counts, operations: { slices: {}, point: null, waiting: null } },
      messages: [],
      trace: [],
    },
    rows: tracked.rows,
  };
  return sessionPage(data, script);
}

/**
 * An `inspect` option that streams any live actor to a local page.
 *
 * @example
 * ```ts
 * import { createActor } from 'xstate';
 * import { viewerInspector } from 'loopchart/viewer';
 *
 * const inspector = viewerInspector();
 * const actor = createActor(machine, { input: { prompt: 'Hi' }, inspect: inspector.inspect }).start();
 * console.log(`watch it at ${await inspector.ready}`);
 * ```
 */
export function viewerInspector(options: ViewerInspectorOptions = {}): ViewerInspector {
  checkKnownKeys(options, INSPECTOR_OPTION_KEYS, 'viewerInspector', (message) => new ViewerOptionsError(message));
  const access = new ViewerAccess(
    parseOptions(ViewerAccessOptionsSchema, { authorize: options.authorize, authorizeTimeoutMs: options.authorizeTimeoutMs }, 'viewerInspector', (message) => new ViewerOptionsError(message)),
  );
  const maxRows = options.maxRows ?? 10_000;
  const actors = new Map<string, Tracked>();
  const live = new LiveStreams(liveLimits(options.live));

  const inspect = (event: InspectionEvent) => {
    if (event.type !== '@xstate.snapshot') return;
    const ref = event.actorRef;
    const logic = (ref as unknown as { logic?: Partial<AnyStateMachine> | undefined }).logic;
    if (!logic || typeof logic !== 'object' || !('root' in logic)) return; // a promise or callback actor: no chart
    const snapshot = event.snapshot as { value?: unknown; context?: unknown };
    let tracked = actors.get(ref.sessionId);
    const agent = isAgentContext(snapshot.context);
    if (!tracked) {
      tracked = { id: ref.sessionId, chart: agent ? brainChart() : chartOf(logic as AnyStateMachine), agent, rows: [], seq: 0, state: '', io: '', counts: NO_COUNTS, listeners: new Set() };
      actors.set(ref.sessionId, tracked);
    }
    const path = statePath(snapshot.value);
    tracked.state = agent ? (snapshot.context as { brain: { value: string } }).brain.value : path;
    tracked.io = agent ? path : '';
    if (agent) tracked.counts = agentCounts(snapshot.context as InspectedAgent);
    const sent = event.event as { type?: unknown };
    const row: Row = {
      kind: 'event',
      seq: ++tracked.seq,
      at: Date.now(),
      time: new Date().toISOString().slice(11, 23),
      title: `${String(sent?.type ?? '?')} → ${path}`,
      state: tracked.state,
      io: tracked.io,
      error: false,
      facts: [
        ['event', String(sent?.type ?? '?')],
        ['state', path],
      ],
      blocks: [
        ['event', summaryOf(sent)],
        ['context', summaryOf(agent ? agentSummary(snapshot.context as never) : snapshot.context)],
      ],
      modelIndex: -1,
    };
    tracked.rows.push(row);
    if (tracked.rows.length > maxRows) tracked.rows.splice(0, tracked.rows.length - maxRows);
    if (tracked.listeners.size === 0) return;
    const update = rowsEvent(tracked, [row]);
    for (const stream of tracked.listeners) if (!stream.send(update, String(row.seq))) tracked.listeners.delete(stream);
  };

  const handle = async (req: IncomingMessage, res: ServerResponse, port: number) => {
    closeAfterAnswer(req, res);
    const refused = localRequestProblem(req.headers, port, req.rawHeaders);
    if (refused) return refuse(res, refused.status, refused.code, refused.reason);
    const url = requestTarget(req.url);
    if (url === null) return refuse(res, 400, 'BadRequestTarget', 'only a path (/...) is served here');
    if (req.method !== 'GET') return html(res, 405, messagePage('Method not allowed', `${req.method} is not served here.`));
    const request = access.requestOf(req, `http://${VIEWER_HOST}:${port}`);
    if (request === null) return refuse(res, 400, 'BadRequest', 'a header of this request cannot be read');
    const page = url.pathname === '/' ? null : pagePath(url.pathname, 'a');
    // Asked before anything is looked up: a refused caller cannot tell a refused actor from none.
    const refusal = url.pathname === '/' || page !== null ? await access.check(request, page?.id ?? null) : null;
    if (refusal) {
      const refused = refusalPage(refusal, { title: 'Not found', text: `No inspected actor at ${url.pathname}.` });
      return html(res, refused.status, refused.html);
    }
    if (url.pathname === '/') {
      const shown = await access.visible(request, [...actors.values()], (a) => a.id);
      const listings = shown.map((a) => ({ sessionId: a.id, updatedAt: new Date(a.rows.at(-1)?.at ?? Date.now()), runs: null, outcome: a.state, tokens: null, costUsd: null, error: null }));
      return html(res, 200, homePage(listings, 'live actors', actorPath));
    }
    const tracked = page === null ? undefined : actors.get(page.id);
    if (!tracked) return html(res, 404, messagePage('Not found', `No inspected actor at ${url.pathname}.`));
    if (!page!.events) return html(res, 200, await pageFor(tracked, await clientScript()));
    const lastEventId = req.headers['last-event-id'];
    const after = typeof lastEventId === 'string' ? cursorParam(lastEventId) : cursorParam(url.searchParams.get('after'));
    if (after === null) return html(res, 400, messagePage('Bad request', "'after' must be an event sequence number (a whole number from 0)."));
    const stream = live.open(res, (closed) => tracked.listeners.delete(closed));
    const missed = tracked.rows.filter((row) => row.seq > after);
    if (missed.length === 0 || stream.send(rowsEvent(tracked, missed), String(missed.at(-1)!.seq))) tracked.listeners.add(stream);
  };

  // A request with no Host is answered here (a JSON 400), not by Node's plain one.
  const server = createServer({ requireHostHeader: false }, (req, res) => {
    handle(req, res, (server.address() as AddressInfo).port).catch((error: unknown) => answerFailure(req, res, error));
  });
  const port = options.port ?? 0;
  const ready = new Promise<string>((resolve, reject) => {
    server.once('error', (error: NodeJS.ErrnoException) =>
      reject(new ViewerListenError(port, error.code === 'EADDRINUSE' ? 'the port is in use (EADDRINUSE); pick another port' : error.message, { cause: error })),
    );
    // Ready once the agent's two charts are laid out too (in a worker): no page waits for ELK's slow first run.
    const laidOut = chartLayouts(brainChart(), agentChart());
    server.listen(port, VIEWER_HOST, () => void laidOut.then(() => resolve(`http://${VIEWER_HOST}:${(server.address() as AddressInfo).port}/`)));
  });
  ready.catch(() => {});
  return {
    inspect,
    ready,
    liveStats: () => live.stats(),
    close: () =>
      new Promise<void>((resolve) => {
        live.endAll();
        if (!server.listening) return resolve();
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createAgentMachine } from '../../machines/agent.machine.js';
import { LoopchartError } from '../errors.js';
import type { Model } from '../model.js';
import { readSessionTrace } from '../sessions/trace.js';
import type { SessionStore } from '../stores/session-store.js';
import { sessionIdProblem } from '../stores/step.js';
import { clientScript } from './asset.js';
import { cursorParam, pagePath, sendHtml as send } from './http.js';
import { brainChart, chartOf, type ChartModel } from './chart.js';
import { listSessionViews, loadSessionView } from './load.js';
import { homePage, messagePage, sessionPage, sessionPath } from './page.js';
import type { PageData, SessionView } from './page-model.js';

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
  port?: number;
  /** How often a live page's store is polled for new steps, in ms (default 250). */
  pollMs?: number;
  /** Shown on the home page (the store's location). */
  storeLabel?: string;
}

export interface RunningViewer {
  url: string;
  port: number;
  close(): Promise<void>;
}

const NO_MODEL: Model = { name: 'none', generate: () => Promise.reject(new Error('the viewer calls no model')) };
let driverChart: ChartModel | undefined;
/** The driver's chart, generated once from a real agent machine (its states do not depend on the config). */
export const agentChart = (): ChartModel => (driverChart ??= chartOf(createAgentMachine({ model: NO_MODEL })));

/** The data of a session page. */
export function pageData(session: SessionView, live: boolean): PageData {
  return {
    mode: 'session',
    live,
    eventsUrl: live ? `${sessionPath(session.sessionId)}/events` : null,
    chart: brainChart(),
    driver: agentChart(),
    session,
  };
}

/**
 * A session as one self-contained HTML file (script and style inlined, no network access):
 * what `loopchart view export` writes. Undefined for an unknown session.
 *
 * @example
 * ```ts
 * const html = await exportSessionHtml(store, 'support-42');
 * if (html) writeFileSync('run.html', html);
 * ```
 */
export async function exportSessionHtml(store: SessionStore, sessionId: string): Promise<string | undefined> {
  const view = await loadSessionView(store, sessionId);
  return view && sessionPage(pageData(view, false), await clientScript());
}

/**
 * Serves the viewer on 127.0.0.1: the home page (every session), a page per session (the
 * brain's statechart, the timeline, the conversation at any step) and, for open pages, the
 * session's new steps as server-sent events, polled from the store.
 *
 * @example
 * ```ts
 * import { startViewer } from 'loopchart/viewer';
 * const viewer = await startViewer({ store: await openSessionStore(), port: 0 });
 * console.log(`open ${viewer.url}`);
 * ```
 */
export async function startViewer(options: ViewerOptions): Promise<RunningViewer> {
  const { store } = options;
  const pollMs = options.pollMs ?? 250;
  const streams = new Set<() => void>();

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? '/', `http://${VIEWER_HOST}`);
    if (req.method !== 'GET') return send(res, 405, messagePage('Method not allowed', `${req.method} is not served here.`));
    if (url.pathname === '/') return send(res, 200, homePage(await listSessionViews(store), options.storeLabel ?? 'the store'));
    const page = pagePath(url.pathname, 's');
    if (page === null || sessionIdProblem(page.id) !== null) return send(res, 404, messagePage('Not found', `Nothing is served at ${url.pathname}.`));
    const sessionId = page.id;
    if (page.events) {
      const after = cursorParam(url.searchParams.get('after'));
      if (after === null) return send(res, 400, messagePage('Bad request', "'after' must be a trace sequence number (a whole number from 0)."));
      return stream(res, sessionId, after);
    }
    const view = await loadSessionView(store, sessionId);
    if (!view) return send(res, 404, messagePage('Session not found', `There is no session '${sessionId}' in ${options.storeLabel ?? 'the store'}.`));
    return send(res, view.error ? 500 : 200, sessionPage(pageData(view, true), await clientScript()));
  };

  /** New trace entries as they are stored, with the session's head and state after them. */
  const stream = (res: ServerResponse, sessionId: string, after: number) => {
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-store', connection: 'keep-alive' });
    res.write(': loopchart\n\n');
    let closed = false;
    let timer: NodeJS.Timeout | undefined;
    let cursor = after;
    const stop = () => {
      closed = true;
      clearTimeout(timer);
      streams.delete(stop);
      res.end();
    };
    streams.add(stop);
    req(res).on('close', stop);
    const tick = async () => {
      try {
        const entries = await readSessionTrace(store, sessionId, cursor);
        if (entries.length > 0 && !closed) {
          cursor = entries.at(-1)!.seq;
          const view = await loadSessionView(store, sessionId);
          const head = view && { version: view.version, messageCount: view.messageCount, messages: view.messages, error: view.error };
          res.write(`data: ${JSON.stringify({ entries, head, state: view?.state ?? null })}\n\n`);
        }
      } catch (error) {
        if (!closed) res.write(`event: failure\ndata: ${JSON.stringify({ message: (error as Error).message })}\n\n`);
      }
      if (!closed) timer = setTimeout(tick, pollMs);
    };
    void tick();
  };
  const req = (res: ServerResponse) => res.req;

  const server: Server = createServer((request, response) => {
    handle(request, response).catch((error) => {
      if (!response.headersSent) send(response, 500, messagePage('Error', (error as Error).message ?? String(error)));
      else response.end();
    });
  });
  const port = options.port ?? DEFAULT_VIEWER_PORT;
  await new Promise<void>((resolve, reject) => {
    server.once('error', (error: NodeJS.ErrnoException) => {
      const problem =
        error.code === 'EADDRINUSE'
          ? `the port is in use (EADDRINUSE); stop what holds it or pick another with --port`
          : error.code === 'EACCES'
            ? 'permission denied (EACCES); pick a port above 1023 with --port'
            : error.message;
      reject(new ViewerListenError(port, problem, { cause: error }));
    });
    server.listen(port, VIEWER_HOST, () => resolve());
  });
  const bound = (server.address() as AddressInfo).port;
  return {
    url: `http://${VIEWER_HOST}:${bound}/`,
    port: bound,
    close: () =>
      new Promise<void>((resolve) => {
        for (const stop of [...streams]) stop();
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

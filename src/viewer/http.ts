import type { IncomingHttpHeaders, ServerResponse } from 'node:http';

/** Writes a whole HTML page: never cached, never sniffed as anything but HTML. */
export function sendHtml(res: ServerResponse, status: number, html: string): void {
  res.writeHead(status, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store', 'x-content-type-options': 'nosniff' });
  res.end(html);
}

/**
 * The id in a page path `/<section>/<id>` or its event stream `/<section>/<id>/events`, or null
 * when the path is neither or the id is not valid percent-encoding (a 404, not a thrown URIError).
 */
export function pagePath(pathname: string, section: 's' | 'a'): { id: string; events: boolean } | null {
  const match = new RegExp(`^/${section}/([^/]+)(/events)?$`).exec(pathname);
  if (!match) return null;
  try {
    return { id: decodeURIComponent(match[1]!), events: match[2] !== undefined };
  } catch {
    return null;
  }
}

/**
 * The `after` cursor of an event stream: absent is 0, otherwise a trace sequence number (a
 * non-negative safe integer); anything else is null, for a 400, never a query with NaN or Infinity.
 */
export function cursorParam(value: string | null): number | null {
  if (value === null) return 0;
  if (!/^\d{1,15}$/.test(value)) return null;
  return Number(value);
}

/** The names a local server answers to: loopback only, so a page on another site cannot reach it by rebinding DNS. */
const LOOPBACK_NAMES = ['127.0.0.1', 'localhost', '[::1]'];

/**
 * Why a request to a loopback server on `port` is refused, or null when it may be answered:
 * a `Host` that is not a loopback name with that port (DNS rebinding: a hostile site whose name
 * now points at 127.0.0.1) is a 421; an `Origin` that is not this server (a page elsewhere
 * opening the event stream or a page) is a 403.
 */
export function localRequestProblem(headers: IncomingHttpHeaders, port: number): { status: 421 | 403; reason: string } | null {
  const own = new Set(LOOPBACK_NAMES.map((name) => `${name}:${port}`));
  const host = headers.host?.toLowerCase();
  if (host === undefined || !own.has(host)) return { status: 421, reason: `this server answers only to ${[...own].join(', ')}` };
  const origin = headers.origin === undefined ? undefined : /^http:\/\/(.+)$/i.exec(headers.origin)?.[1]?.toLowerCase() ?? '';
  if (origin !== undefined && !own.has(origin)) return { status: 403, reason: 'requests from other origins are refused' };
  return null;
}

/** Refuses a request before anything is read for it (plain text: the refusal shows no page). */
export function refuse(res: ServerResponse, status: number, reason: string): void {
  res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8', 'cache-control': 'no-store', 'x-content-type-options': 'nosniff', connection: 'close' });
  res.end(`${reason}\n`);
}

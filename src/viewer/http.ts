import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { reportFailure } from './failure.js';
import { failurePage } from './page.js';

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
const LOOPBACK_NAMES = new Set(['127.0.0.1', 'localhost', '[::1]']);

/**
 * A `Host` value as RFC 9110 writes it, `uri-host [":" port]`: a name (letters, digits and the
 * few marks a reg-name or an IPv4 address has) or a bracketed IPv6 literal, then an optional
 * port. Userinfo (`a@b`), spaces, paths and ports past 65535 are not a Host.
 */
const HOST_SYNTAX = /^(\[[0-9a-f:.]+\]|[a-z0-9._~!$&'()*+,;=%-]*)(?::(\d{1,5}))?$/;

/** A Host header's name (lower case) and port (null when it names none), or null when it is malformed. */
export function parseHost(value: string): { name: string; port: number | null } | null {
  const match = HOST_SYNTAX.exec(value.toLowerCase());
  if (!match) return null;
  const port = match[2] === undefined ? null : Number(match[2]);
  return port !== null && port > 65_535 ? null : { name: match[1]!, port };
}

/**
 * Whether `host:port` names this loopback server on `port`: a loopback name with that port, or
 * with no port when it listens on 80 (a browser leaves the default port out of Host and Origin).
 */
const isOwnHost = (host: { name: string; port: number | null }, port: number): boolean =>
  LOOPBACK_NAMES.has(host.name) && (host.port ?? 80) === port;

/** A refusal of a request to a local server: its status, a stable code and why. */
export interface LocalRequestProblem {
  status: 400 | 421 | 403;
  code: 'BadHost' | 'MisdirectedRequest' | 'ForeignOrigin';
  reason: string;
}

/**
 * Why a request to a loopback server on `port` is refused, or null when it may be answered. The
 * `Host` header only guards the server here (DNS rebinding); nothing is ever routed by it. A
 * missing, repeated or malformed `Host` is a 400 (RFC 9112 §3.2); a well-formed one that is not
 * a loopback name on this port (a hostile site whose name now points at 127.0.0.1) is a 421;
 * an `Origin` that is not this server (a page elsewhere opening the event stream or a page) is
 * a 403. `rawHeaders` (Node's list of names and values) tells a repeated Host, which Node's
 * `headers` would fold into its first value.
 */
export function localRequestProblem(headers: IncomingHttpHeaders, port: number, rawHeaders: readonly string[] = []): LocalRequestProblem | null {
  const answers = [...LOOPBACK_NAMES].map((name) => `${name}:${port}`).concat(port === 80 ? [...LOOPBACK_NAMES] : []);
  const hosts = rawHeaders.filter((name, i) => i % 2 === 0 && name.toLowerCase() === 'host').length;
  const value = headers.host;
  const host = value === undefined ? null : parseHost(value);
  if (value === undefined || host === null || hosts > 1) {
    const what = value === undefined ? 'no Host header' : hosts > 1 ? 'more than one Host header' : `a malformed Host header (${JSON.stringify(value.slice(0, 100))})`;
    return { status: 400, code: 'BadHost', reason: `${what}; this server answers only to ${answers.join(', ')}` };
  }
  if (!isOwnHost(host, port)) return { status: 421, code: 'MisdirectedRequest', reason: `this server answers only to ${answers.join(', ')}` };
  if (headers.origin !== undefined) {
    const origin = /^http:\/\/(.+)$/i.exec(headers.origin)?.[1];
    const parsed = origin === undefined ? null : parseHost(origin);
    if (parsed === null || !isOwnHost(parsed, port)) return { status: 403, code: 'ForeignOrigin', reason: 'requests from other origins are refused' };
  }
  return null;
}

/**
 * The path and query of a request target, never its Host: routes are chosen by the path alone.
 * Only the origin form (`/path?query`) is routed; anything else (`http://host/path`, `*`)
 * is null, for a 400. A path such as `//x/y` stays a path (a 404), never a host `x`.
 */
export function requestTarget(url: string | undefined): { pathname: string; searchParams: URLSearchParams } | null {
  const target = url ?? '/';
  if (!target.startsWith('/')) return null;
  const at = target.indexOf('?');
  return at < 0 ? { pathname: target, searchParams: new URLSearchParams() } : { pathname: target.slice(0, at), searchParams: new URLSearchParams(target.slice(at + 1)) };
}

/** Refuses a request before anything is read for it: a JSON error (the refusal shows no page). */
export function refuse(res: ServerResponse, status: number, code: string, reason: string): void {
  const body = Buffer.from(`${JSON.stringify({ error: { code, message: reason } })}\n`);
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': body.length, 'cache-control': 'no-store', 'x-content-type-options': 'nosniff', connection: 'close' });
  res.end(body);
}

/**
 * The viewer and the inspector read no request body. A request that comes with one (a POST, a GET
 * with a `Content-Length`) is answered as any other, and the answer closes the connection: the
 * rest of the body is never waited for, so a client that trickles a body, or never ends it, holds
 * no socket. Before, Node kept the socket open for the rest of the body until its
 * `requestTimeout` (300 s by default).
 */
export function closeAfterAnswer(req: IncomingMessage, res: ServerResponse): void {
  const length = req.headers['content-length'];
  if (req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0')) res.setHeader('connection', 'close');
}

/**
 * A request whose handling threw: the error goes to the server's log under a reference, and the
 * client gets the page with that reference only (the error may hold a path, a connection string,
 * an actor's context), or the end of an answer already begun.
 */
export function answerFailure(req: IncomingMessage, res: ServerResponse, error: unknown): void {
  const reference = reportFailure(`${req.method} ${req.url?.slice(0, 200)}`, error);
  if (!res.headersSent) sendHtml(res, 500, failurePage(reference));
  else res.end();
}

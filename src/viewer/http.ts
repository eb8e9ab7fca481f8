import type { ServerResponse } from 'node:http';

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

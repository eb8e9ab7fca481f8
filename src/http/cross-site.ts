import { z } from 'zod';

/**
 * What keeps a page on another site from changing a chat through a visitor's browser (and the
 * visitor's cookies): a state-changing request (`POST`: a message, approval answers, a cancel)
 * whose `Origin` is neither this host nor an allowed origin is refused, and a body that is not
 * `application/json` is refused, so a form or a `text/plain` fetch (the "simple" requests a
 * browser sends cross-site without asking first) cannot start a run.
 */

/** An origin as a browser sends it: `https://app.example.com` or `http://localhost:3000`, nothing after the port. */
export const AllowedOriginSchema = z
  .string()
  .max(2048)
  .refine((text) => {
    try {
      const url = new URL(text);
      return /^https?:$/.test(url.protocol) && [url.origin, `${url.origin}/`].includes(text.toLowerCase());
    } catch {
      return false;
    }
  }, 'an allowed origin is http(s)://host[:port] as a browser sends it (no path, no default port)')
  .transform((text) => new URL(text).origin);

/**
 * Why a state-changing request from `origin` is refused, or null. No `Origin` (curl, a server, an
 * app: not a browser, which sends one with every POST) passes; an origin passes when it is in
 * `allowed` or names the host the request was sent to (its `Host` header: the page was served
 * by this host). `Origin: null` (a sandboxed frame, a redirect from elsewhere) is refused.
 */
export function crossSiteProblem(request: Request, allowed: ReadonlySet<string>): string | null {
  const origin = request.headers.get('origin');
  if (origin === null) return null;
  let parsed: URL | null = null;
  try {
    parsed = new URL(origin);
  } catch {
    // An origin that is not a URL is refused like a foreign one.
  }
  if (parsed && /^https?:$/.test(parsed.protocol)) {
    if (allowed.has(parsed.origin)) return null;
    const host = request.headers.get('host')?.toLowerCase();
    if (host !== undefined && hostOf(host, parsed.protocol) === parsed.host) return null;
  }
  return `requests from origin '${origin.slice(0, 200)}' are refused: it is not this host, nor in allowedOrigins`;
}

/** A Host header as `URL.host` writes it for `protocol` (a default port dropped), or null when it is none. */
function hostOf(host: string, protocol: string): string | null {
  try {
    return new URL(`${protocol}//${host}`).host;
  } catch {
    return null;
  }
}

/** `application/json`, with a UTF-8 charset at most: what `DefaultChatTransport` sends. */
const JSON_TYPE = /^application\/json\s*(?:;\s*charset\s*=\s*"?utf-8"?\s*)?$/i;

/**
 * Why the body's declared type is refused (a 415), or null. A chat request must say
 * `application/json`; a request without a body (a cancel) may say nothing.
 */
export function contentTypeProblem(request: Request, bodyRequired: boolean): string | null {
  const type = request.headers.get('content-type');
  if (type === null) return bodyRequired ? 'the body must be sent as application/json (no Content-Type was given)' : null;
  if (JSON_TYPE.test(type.trim())) return null;
  return `the body must be sent as application/json, not '${type.slice(0, 100)}'`;
}

import type { IncomingMessage } from 'node:http';
import { z } from 'zod';
import { askAuthorization, AuthorizationSchema, type AuthorizationRefusal } from '../authorization.js';
import { messagePage } from './page.js';

/**
 * Who may read what on the viewer and the inspector: their `authorize` option, asked for every
 * request before anything is read for it, and for every session a list would show. Both listen on
 * 127.0.0.1 only, which keeps other machines out but not the other users and programs of this
 * one; a viewer on a shared machine, or behind a tunnel, asks the hook who the caller is.
 */

/**
 * What the viewer's (or the inspector's) `authorize` is asked: the request (its headers and path;
 * its URL is always on 127.0.0.1, never the Host the client sent), and the session it reads, or
 * null for a list (the sessions page, the schedules page). A list then shows only the sessions
 * (and the schedules of the sessions) the hook allows, each asked with its own id. On the
 * inspector, `sessionId` is the inspected actor's id.
 *
 * @example
 * ```ts
 * import type { ViewerAccessRequest } from 'loopchart/viewer';
 * const ownOnly = ({ request, sessionId }: ViewerAccessRequest) =>
 *   sessionId === null || sessionId.startsWith(`${request.headers.get('x-user')}:`);
 * ```
 */
export interface ViewerAccessRequest {
  request: Request;
  sessionId: string | null;
}

/**
 * The `authorize` option of `startViewer` and `viewerInspector`: may this request read this
 * session (or see a list, when `sessionId` is null)? `true` / `{ allow: true }` lets it through;
 * `false` is a 403; `{ allow: false, status: 401 | 403 | 404, reason }` refuses with that status.
 * Sync or async, within `authorizeTimeoutMs` (5 s by default); a throw, a timeout or any other
 * answer refuses (403), and a session a list is refused is left out of it.
 *
 * @example
 * ```ts
 * import type { ViewerAuthorizer } from 'loopchart/viewer';
 * const withToken: ViewerAuthorizer = ({ request }) =>
 *   request.headers.get('cookie')?.includes(`viewer=${process.env.VIEWER_TOKEN}`) === true || { allow: false, status: 401, reason: 'no viewer token' };
 * ```
 */
export type ViewerAuthorizer = (access: ViewerAccessRequest) => z.input<typeof AuthorizationSchema> | PromiseLike<z.input<typeof AuthorizationSchema>>;

/** What a listener takes to ask about its requests. */
export const ViewerAccessOptionsSchema = z.object({
  authorize: z.custom<ViewerAuthorizer>((value) => typeof value === 'function', { error: 'authorize must be a function' }).optional(),
  /** How long `authorize` may take to answer, in ms (default 5 s); then the request is refused. */
  authorizeTimeoutMs: z.number().int().positive().max(60_000).optional(),
});

const DEFAULT_TIMEOUT_MS = 5_000;

/** One listener's hook: asks it of each request, and filters the lists it serves. */
export class ViewerAccess {
  readonly #authorize: ViewerAuthorizer | undefined;
  readonly #timeoutMs: number;

  constructor(options: z.input<typeof ViewerAccessOptionsSchema>) {
    this.#authorize = options.authorize;
    this.#timeoutMs = options.authorizeTimeoutMs ?? DEFAULT_TIMEOUT_MS;
  }

  /**
   * The request as the hook sees it (see `webRequest`), built only when there is a hook: a header
   * Node reads but a `Request` refuses is then a 400, and without a hook it changes nothing.
   * Undefined without a hook, null for such a request.
   */
  requestOf(req: IncomingMessage, origin: string): Request | null | undefined {
    return this.#authorize ? webRequest(req, origin, req.url ?? '/') : undefined;
  }

  /** Null when `request` may read `sessionId` (a list, when null), else the refusal; null without a hook. */
  async check(request: Request | undefined, sessionId: string | null): Promise<AuthorizationRefusal | null> {
    const authorize = this.#authorize;
    if (!authorize || !request) return null;
    return askAuthorization('authorize', () => authorize({ request, sessionId }), this.#timeoutMs);
  }

  /** The items of a list whose session `request` may read, in their order; every session asked once, all at once. */
  async visible<T>(request: Request | undefined, items: readonly T[], sessionOf: (item: T) => string): Promise<T[]> {
    if (!this.#authorize || !request) return [...items];
    const ids = [...new Set(items.map(sessionOf))];
    const refusals = await Promise.all(ids.map((id) => this.check(request, id)));
    const allowed = new Set(ids.filter((_, i) => refusals[i] === null));
    return items.filter((item) => allowed.has(sessionOf(item)));
  }
}

/**
 * A refusal as the page a listener sends: a 404 is the very page a missing thing gets (`missing`,
 * so a caller cannot tell refused from absent); a 401 or a 403 says the hook's reason.
 */
export function refusalPage(refusal: AuthorizationRefusal, missing: { title: string; text: string }): { status: number; html: string } {
  if (refusal.status === 404) return { status: 404, html: messagePage(missing.title, missing.text) };
  return { status: refusal.status, html: messagePage(refusal.status === 401 ? 'Sign in needed' : 'Not allowed', refusal.message) };
}

/**
 * A request as the hook sees it: a `Request` on the listener's own `origin` (`http://127.0.0.1:PORT`,
 * never the Host the client sent) with the path and query asked for, and the headers as the
 * client sent them. Null when a header cannot be a `Request`'s (a 400).
 */
function webRequest(req: IncomingMessage, origin: string, target: string): Request | null {
  try {
    const headers = new Headers();
    for (let i = 0; i + 1 < req.rawHeaders.length; i += 2) headers.append(req.rawHeaders[i]!, req.rawHeaders[i + 1]!);
    return new Request(`${origin}${target}`, { method: req.method ?? 'GET', headers });
  } catch {
    return null;
  }
}

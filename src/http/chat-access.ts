import { z } from 'zod';
import { askAuthorization, AuthorizationSchema, forbidden as forbid, timed, type AuthorizationRefusal } from '../authorization.js';
import { sessionIdProblem } from '../stores/step.js';
import { otherSurfaceProblem, type ChatAction } from './route.js';
import { ScopeSchema } from '../agent/protocol/scope.js';

/**
 * Who may do what with which chat: the handler's `authorize`, `chatKey` and `chatScope` callbacks, called
 * before any store read or write, each with a timeout, their answers checked with zod. Every
 * failure is a refusal: an answer that is neither allow nor deny, a throw (a getter that throws
 * included) and a timeout all deny.
 */

/**
 * What `authorize` is asked: the request (its headers and URL; a POST's body has been read), the
 * chat id as the page sent it, and the action.
 *
 * @example
 * ```ts
 * import type { ChatAccessRequest } from 'loopchart/http';
 * const onlyReads = ({ action }: ChatAccessRequest) => action === 'read';
 * ```
 */
export interface ChatAccessRequest {
  request: Request;
  chatId: string;
  action: ChatAction;
}

/**
 * `authorize`'s answer: `true` / `{ allow: true }` lets the request through; `false` is a 403;
 * `{ allow: false, status, reason }` refuses with 401 (not signed in), 403 or 404 (to not say the
 * chat exists), the reason in the JSON error. Anything else is a 403.
 */
export const ChatAuthorizationSchema = AuthorizationSchema;

/**
 * What `authorize` returns (or resolves to): see `ChatAuthorizationSchema`.
 *
 * @example
 * ```ts
 * import type { ChatAuthorization } from 'loopchart/http';
 * const signIn: ChatAuthorization = { allow: false, status: 401, reason: 'sign in first' };
 * ```
 */
export type ChatAuthorization = z.input<typeof ChatAuthorizationSchema>;

/**
 * The `authorize` option of `createChatHandler`: may this request do `action` on `chatId`?
 * Sync or async; it has `authorizeTimeoutMs` (5 s by default) to answer, then the request is refused.
 *
 * @example
 * ```ts
 * import type { ChatAuthorizer } from 'loopchart/http';
 * const signedIn: ChatAuthorizer = ({ request }) =>
 *   request.headers.get('authorization') === 'Bearer let-me-in' || { allow: false, status: 401, reason: 'no valid token' };
 * ```
 */
export type ChatAuthorizer = (access: ChatAccessRequest) => ChatAuthorization | PromiseLike<ChatAuthorization>;

/**
 * The `chatKey` option of `createChatHandler`: the stored session id of the chat id a page sent,
 * for this caller, so one user's chat id never reaches another user's session. No two pairs of
 * user and chat id may give one key: `${userId}.${chatId}` would make user `al`'s chat `ice.trip`
 * and user `al.ice`'s chat `trip` one session, so join them so that they can be told apart
 * (`JSON.stringify([userId, chatId])`, or a user id that holds no separator). It must return a
 * valid session id that is not a subagent's (none with `/run-<n>:turn-<n>:<call>` at its end);
 * sync or async, within `authorizeTimeoutMs`.
 *
 * @example
 * ```ts
 * import type { ChatKeyMapper } from 'loopchart/http';
 * const perUser: ChatKeyMapper = (request, chatId) => JSON.stringify([request.headers.get('x-user-id'), chatId]);
 * ```
 */
export type ChatKeyMapper = (request: Request, chatId: string) => string | PromiseLike<string>;

/**
 * The `chatScope` option of `createChatHandler`: the memory scope of the caller (the user the chat
 * belongs to, see `agentMemory` in `loopchart/memory`), for example the signed-in user's id. A new
 * chat's session is stored with it; every later request's is checked against the chat's, and a
 * chat of another scope answers as one that does not exist (404). It must return a scope (1 to 200
 * characters, no control characters, no lone surrogate); sync or async, within `authorizeTimeoutMs`.
 *
 * @example
 * ```ts
 * import type { ChatScopeMapper } from 'loopchart/http';
 * const byUser: ChatScopeMapper = (request) => `user:${request.headers.get('x-user-id')}`;
 * ```
 */
export type ChatScopeMapper = (request: Request, chatId: string) => string | PromiseLike<string>;

/** Who is admitted to which chat: its stored session id, and the caller's scope when the handler maps one. */
export interface Admission {
  key: string;
  scope?: string | undefined;
}

/** A refusal as the handler answers it. */
export interface AccessRefusal {
  status: 401 | 403 | 404;
  code: 'Unauthorized' | 'Forbidden' | 'ChatNotFound';
  message: string;
}

const CODES = { 401: 'Unauthorized', 403: 'Forbidden', 404: 'ChatNotFound' } as const;

/** The callbacks of one handler, and how long each may take. */
export class ChatAccess {
  readonly #authorize: ChatAuthorizer | undefined;
  readonly #chatKey: ChatKeyMapper | undefined;
  readonly #chatScope: ChatScopeMapper | undefined;
  readonly #timeoutMs: number;

  constructor(authorize: ChatAuthorizer | undefined, chatKey: ChatKeyMapper | undefined, chatScope: ChatScopeMapper | undefined, timeoutMs: number) {
    this.#authorize = authorize;
    this.#chatKey = chatKey;
    this.#chatScope = chatScope;
    this.#timeoutMs = timeoutMs;
  }

  /** The stored session id for `chatId` (and the caller's scope), once `authorize` allowed the action; or the refusal. */
  async admit(request: Request, chatId: string, action: ChatAction): Promise<Admission | { refusal: AccessRefusal }> {
    const keyed = await this.#key(request, chatId, action);
    if ('refusal' in keyed || !this.#chatScope) return keyed;
    const chatScope = this.#chatScope;
    const answer = await timed('chatScope', () => chatScope(request, chatId), this.#timeoutMs);
    if ('problem' in answer) return { refusal: forbidden(answer.problem) };
    const scope = scopeOf(answer.value);
    return scope === null ? { refusal: forbidden('chatScope returned no usable scope') } : { key: keyed.key, scope };
  }

  async #key(request: Request, chatId: string, action: ChatAction): Promise<{ key: string } | { refusal: AccessRefusal }> {
    if (this.#authorize) {
      const authorize = this.#authorize;
      const refusal = await askAuthorization('authorize', () => authorize({ request, chatId, action }), this.#timeoutMs);
      if (refusal) return { refusal: withCode(refusal) };
    }
    if (!this.#chatKey) return { key: chatId };
    const chatKey = this.#chatKey;
    const answer = await timed('chatKey', () => chatKey(request, chatId), this.#timeoutMs);
    if ('problem' in answer) return { refusal: forbidden(answer.problem) };
    const problem = keyProblem(answer.value);
    return problem ? { refusal: forbidden(`chatKey returned no usable session id (${problem})`) } : { key: answer.value as string };
  }
}

/** The handler's refusal: the status a refusal has, with its code. */
const withCode = ({ status, message }: AuthorizationRefusal): AccessRefusal => ({ status, code: CODES[status], message });
const forbidden = (message: string): AccessRefusal => withCode(forbid(message));

/** A scope from `chatScope`, or null when it is none (read inside a try: it may be anything). */
function scopeOf(value: unknown): string | null {
  try {
    const parsed = ScopeSchema.safeParse(value);
    return parsed.success ? parsed.data : null;
  } catch {
    return null;
  }
}

/** Why a key from `chatKey` is not a chat's session id, or null. */
function keyProblem(key: unknown): string | null {
  try {
    return sessionIdProblem(key) ?? otherSurfaceProblem(key as string);
  } catch {
    return 'it cannot be read';
  }
}

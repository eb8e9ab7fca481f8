import { isChildSessionId } from '../agent/subagents/subagents.js';
import { isMcpServerSessionId } from '../sessions/surface-ids.js';
import { sessionIdProblem } from '../stores/step.js';

/**
 * What a request does to a chat: `read` its `/messages`, reattach to its `/stream`, `post` a
 * message, `cancel` its run, `approve` (answer approvals, approved or denied), `resume` an
 * operation the run waits on (its `/resume`).
 *
 * @example
 * ```ts
 * import type { ChatAction } from 'loopchart/http';
 * const changes = (action: ChatAction) => action !== 'read' && action !== 'stream';
 * ```
 */
export type ChatAction = 'read' | 'stream' | 'post' | 'cancel' | 'approve' | 'resume';

/**
 * Which chat a request is for and what it does, from the method and the URL's path alone (never
 * its host): `POST <api>` carries the chat id in its body; `GET <api>/<id>/messages`,
 * `GET <api>/<id>/stream`, `POST <api>/<id>/cancel` and `POST <api>/<id>/resume` name it in the
 * path, percent-encoded.
 * The handler is mounted anywhere: only the last two segments are read.
 */

/** What the path asks for, or why it cannot be served (a 400, 404 or 405 with the reason). */
export type ChatRoute =
  | { action: 'post' }
  | { action: Exclude<ChatAction, 'post' | 'approve'>; chatId: string }
  | { refusal: { status: 400 | 404 | 405; code: string; message: string; allow?: string | undefined } };

const SUFFIXES = new Map<string, { action: 'read' | 'stream' | 'cancel' | 'resume'; method: 'GET' | 'POST' }>([
  ['messages', { action: 'read', method: 'GET' }],
  ['stream', { action: 'stream', method: 'GET' }],
  ['cancel', { action: 'cancel', method: 'POST' }],
  ['resume', { action: 'resume', method: 'POST' }],
]);

/**
 * Why `id` names another surface's session rather than a chat, or null. A subagent's session is
 * driven by its parent's tool call: a message posted to it would run the chat's agent inside the
 * child's session, a cancel would end the child under its parent; its progress and approvals
 * reach the page through the parent's chat. The MCP server's sessions (`mcp/...`) are a served
 * tool's conversations with its callers: a chat made there would be continued by that tool's agent.
 */
export function otherSurfaceProblem(id: string): string | null {
  if (isChildSessionId(id)) return "it is a subagent's session, reached through its parent's chat";
  if (isMcpServerSessionId(id)) return "it is in the MCP server's namespace (mcp/), a served tool's session";
  return null;
}

/**
 * Why `id` cannot be a chat id, or null: a valid session id that a path can name (`.` and `..`
 * are taken out of a URL's path before anything reads it).
 */
export function chatIdProblem(id: string): string | null {
  const problem = sessionIdProblem(id);
  if (problem) return `the chat id is not a valid session id: ${problem}`;
  if (id === '.' || id === '..') return `the chat id '${id}' cannot be named in a path`;
  return null;
}

export function chatRoute(method: string, url: string): ChatRoute {
  let pathname: string;
  try {
    pathname = new URL(url).pathname;
  } catch {
    return { refusal: { status: 400, code: 'InvalidChatRequest', message: 'the request URL cannot be read' } };
  }
  const segments = pathname.split('/');
  const suffix = SUFFIXES.get(segments.at(-1)!);
  if (!suffix) {
    if (method === 'POST') return { action: 'post' };
    return { refusal: { status: 405, code: 'MethodNotAllowed', message: 'POST a chat request, <chat id>/cancel or <chat id>/resume, or GET <chat id>/stream or <chat id>/messages', allow: 'POST' } };
  }
  if (method !== suffix.method) {
    return { refusal: { status: 405, code: 'MethodNotAllowed', message: `${segments.at(-1)} takes ${suffix.method} only`, allow: suffix.method } };
  }
  const encoded = segments.length >= 3 ? segments.at(-2)! : '';
  if (encoded === '') return { refusal: { status: 400, code: 'InvalidChatRequest', message: `no chat id before /${segments.at(-1)} in the path` } };
  let chatId: string;
  try {
    chatId = decodeURIComponent(encoded);
  } catch {
    return { refusal: { status: 400, code: 'InvalidChatRequest', message: 'the chat id in the path is not valid percent-encoding' } };
  }
  const problem = chatIdProblem(chatId);
  if (problem) return { refusal: { status: 400, code: 'InvalidChatRequest', message: problem } };
  const other = otherSurfaceProblem(chatId);
  if (other) return { refusal: { status: 404, code: 'ChatNotFound', message: `no chat '${chatId.slice(0, 100)}': ${other}` } };
  return { action: suffix.action, chatId };
}

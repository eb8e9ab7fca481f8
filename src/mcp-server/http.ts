import { randomUUID } from 'node:crypto';
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import { z } from 'zod';
import { readAnswer } from '../read-answer.js';
import { McpServerOptionsError } from './agents.js';
import { CallerSchema } from './caller-sessions.js';
import { createMcpServer, MCP_SERVER_KEYS, type AgentMcpServer, type McpServerOptions } from './server.js';
import { checkKnownKeys, parseOptions } from '../known-keys.js';
import { MAX_TIMER_MS } from '../timer-bound.js';
import { DEFAULT_BODY_TIMEOUT_MS, MAX_BODY_TIMEOUT_MS, readBody } from '../read-body.js';

/**
 * What `authorize` answers for one request: `{ caller }` lets it through as that caller (who the
 * token says is calling: see `McpConnectOptions`); `true` lets it through with no caller; `false`
 * is a 401; `{ status, reason }` refuses with that status (401 or 403) and reason. A throw, a
 * timeout or any other answer (a `caller` that is not 1 to 200 characters without control
 * characters included) is a 403: the hook fails closed.
 *
 * An MCP session belongs to the caller of its initialize request: a later request on it from
 * another caller (or with none) is a 404, as for a session that does not exist. Calls continue
 * and repeat only their own caller's agent sessions; with `true` (or no `authorize`) each MCP
 * session is its own caller, so nothing it makes reaches another MCP session.
 *
 * @example
 * ```ts
 * import type { McpAuthorize } from 'loopchart/mcp-server';
 *
 * // Your sign-in: the user a bearer token belongs to, or null.
 * const users = new Map([['token-of-ada', { id: 'ada' }]]);
 * const authorize: McpAuthorize = async (request) => {
 *   const user = users.get(request.headers.get('authorization')?.replace(/^Bearer /, '') ?? '');
 *   return user ? { caller: `user:${user.id}` } : { status: 401, reason: 'a bearer token is needed' };
 * };
 * ```
 */
export type McpAuthorize = (request: Request, options: { signal: AbortSignal }) => McpAuthorization | Promise<McpAuthorization>;
export type McpAuthorization = z.input<typeof AuthorizationSchema>;

const AuthorizationSchema = z.union([
  z.boolean(),
  z.strictObject({ caller: CallerSchema }),
  z.strictObject({ status: z.union([z.literal(401), z.literal(403)]), reason: z.string().max(500).optional() }),
]);

const HttpSettingsSchema = z.strictObject({
  /** The one path the server answers on (default `/mcp`); any other path is a 404. The `Host` header is never read. */
  path: z.string().regex(/^\/[^?#]*$/, 'must start with / and hold no query').default('/mcp'),
  /** Checks every request before anything else reads it (see `McpAuthorize`); none lets every request through. */
  authorize: z.custom<McpAuthorize>((value) => typeof value === 'function', { error: 'authorize must be a function' }).optional(),
  /** Longest `authorize` may take, in ms; then the request is refused (403). Default 10 s. */
  authorizeTimeoutMs: z.number().int().positive().max(600_000).default(10_000),
  /**
   * Browser origins allowed to call (`https://app.example.com`): a request with an `Origin` header
   * not listed, or that the browser marks cross-site, is a 403. Clients that are not browsers send
   * neither. Default none.
   */
  allowedOrigins: z.array(z.string().regex(/^https?:\/\/[^/]+$/, 'must be an origin: scheme://host[:port]')).default([]),
  /** Largest request body, in bytes; a larger one is a 413. Default 4 MiB. */
  maxBodyBytes: z.number().int().min(1024).max(2 ** 30).default(4 << 20),
  /** How long a POST's body may take to arrive once its headers have, in ms; then a 408. Default 30 s. */
  bodyTimeoutMs: z.number().int().min(1).max(MAX_BODY_TIMEOUT_MS).default(DEFAULT_BODY_TIMEOUT_MS),
  /** MCP sessions (connections) held at once; a new one past it is a 503. Default 100. */
  maxSessions: z.number().int().min(1).max(100_000).default(100),
  /** A session with no request for this long is closed, in ms. Default 30 minutes. */
  sessionIdleMs: z.number().int().positive().max(MAX_TIMER_MS).default(30 * 60_000),
});

/**
 * What `createMcpHandler` takes: the server's options and the HTTP ones (path, `authorize`,
 * allowed origins, body and session limits).
 *
 * @example
 * ```ts
 * import type { McpHandlerOptions } from 'loopchart/mcp-server';
 *
 * const options: McpHandlerOptions = { agents: [{ agent: machine, name: 'helper', description: 'Helps.' }], store, path: '/mcp' };
 * ```
 */
export interface McpHandlerOptions extends McpServerOptions, z.input<typeof HttpSettingsSchema> {}

/**
 * A Fetch API handler serving MCP's Streamable HTTP transport, and what its owner needs to stop it.
 *
 * @example
 * ```ts
 * import { createMcpHandler, type McpHandler } from 'loopchart/mcp-server';
 *
 * const mcp: McpHandler = createMcpHandler({ agents: [{ agent: machine, name: 'helper', description: 'Helps.' }] });
 * await mcp.close();
 * ```
 */
export interface McpHandler {
  (request: Request): Promise<Response>;
  server: AgentMcpServer;
  /** MCP sessions open now. */
  sessions(): number;
  /** Closes every session (their runs are cancelled or kept as `onDisconnect` says). */
  close(): Promise<void>;
}

const refusal = (status: number, message: string, headers: Record<string, string> = {}): Response =>
  new Response(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32_000, message } }), {
    status,
    headers: { 'content-type': 'application/json', 'cache-control': 'no-store', ...headers },
  });

interface HttpSession {
  transport: WebStandardStreamableHTTPServerTransport;
  /** Who initialized it: the only caller its later requests may come from. */
  caller: string | undefined;
  idle: NodeJS.Timeout | undefined;
}

/**
 * Serves agents over MCP's Streamable HTTP transport as a Fetch API handler (mount it on
 * `node:http` with `toNodeListener` from `loopchart/http`, or in Hono, Bun, Deno, a Next.js route).
 * A request goes through, in order: its path (only `path`, never the `Host` header, decides), its
 * `Origin` (a browser request from an origin not in `allowedOrigins` is a 403), `authorize`
 * (timed; it fails closed; its `{ caller }` says who calls), a POST's body (within
 * `bodyTimeoutMs`, else a 408, and `maxBodyBytes`, else a 413), then the MCP session it names
 * (`mcp-session-id`; an unknown one, or one of another caller, is a 404, a new one past
 * `maxSessions` a 503). Each session is a connection of one `createMcpServer` server for its
 * caller, so the call limit holds across them; an idle one is closed after `sessionIdleMs`.
 *
 * @example
 * ```ts
 * import { createServer } from 'node:http';
 * import { createAgentMachine, openSessionStore } from 'loopchart';
 * import { toNodeListener } from 'loopchart/http';
 * import { createMcpHandler } from 'loopchart/mcp-server';
 * import { scriptedModel } from 'loopchart/testing';
 *
 * const store = await openSessionStore('.loopchart/mcp.db');
 * const helper = createAgentMachine({ model: scriptedModel([{ text: 'Done.' }]) });
 * const mcp = createMcpHandler({
 *   agents: [{ agent: helper, name: 'helper', description: 'Does one task.' }],
 *   store,
 *   // One user here; with several, answer each token's user: { caller: `user:${id}` }.
 *   authorize: (request) => request.headers.get('authorization') === 'Bearer s3cret' && { caller: 'user:me' },
 * });
 * createServer(toNodeListener(mcp)).listen(3001, '127.0.0.1');
 * ```
 */
export function createMcpHandler(options: McpHandlerOptions): McpHandler {
  if (typeof options !== 'object' || options === null) throw new McpServerOptionsError('options must be an object');
  const refuse = (message: string) => new McpServerOptionsError(message);
  checkKnownKeys(options, [...Object.keys(HttpSettingsSchema.shape), ...MCP_SERVER_KEYS], '', refuse);
  const { path, authorize, authorizeTimeoutMs, allowedOrigins, maxBodyBytes, bodyTimeoutMs, maxSessions, sessionIdleMs, ...serverOptions } = options;
  const settings = parseOptions(HttpSettingsSchema, { path, authorize, authorizeTimeoutMs, allowedOrigins, maxBodyBytes, bodyTimeoutMs, maxSessions, sessionIdleMs }, '', refuse);
  const origins = new Set(settings.allowedOrigins.map((origin) => origin.toLowerCase()));
  const server = createMcpServer(serverOptions);
  const sessions = new Map<string, HttpSession>();
  let closing = false;

  const touch = (id: string, session: HttpSession) => {
    clearTimeout(session.idle);
    session.idle = setTimeout(() => void session.transport.close(), settings.sessionIdleMs);
    session.idle.unref();
    sessions.set(id, session);
  };

  const open = async (request: Request, caller: string | undefined): Promise<Response> => {
    if (sessions.size >= settings.maxSessions) return refusal(503, `the server holds ${settings.maxSessions} MCP sessions (maxSessions); try again later`);
    const transport: WebStandardStreamableHTTPServerTransport = new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      maxRequestBodySize: settings.maxBodyBytes,
      onsessioninitialized: (id) => touch(id, { transport, caller, idle: undefined }),
    });
    transport.onclose = () => {
      const id = transport.sessionId;
      if (id === undefined) return;
      clearTimeout(sessions.get(id)?.idle);
      sessions.delete(id);
    };
    await server.connect(transport, { caller });
    const response = await transport.handleRequest(request);
    // Not an initialize request (the transport refused it): nothing to keep.
    if (transport.sessionId === undefined) await transport.close();
    return response;
  };

  const handler = async (request: Request): Promise<Response> => {
    if (closing) return refusal(503, 'the server is closing');
    let pathname: string;
    try {
      pathname = new URL(request.url).pathname;
    } catch {
      return refusal(400, 'the request URL cannot be read');
    }
    if (pathname !== settings.path) return refusal(404, `nothing here: the MCP endpoint is ${settings.path}`);
    const originProblem = crossOrigin(request, origins);
    if (originProblem) return refusal(403, originProblem);
    const admitted = await authorized(request, settings.authorize, settings.authorizeTimeoutMs);
    if ('refusal' in admitted) return admitted.refusal;
    const id = request.headers.get('mcp-session-id');
    if (id === null && request.method !== 'POST') return refusal(400, 'a request without an mcp-session-id header must be an initialize POST');
    const read = request.method === 'POST' ? await withBody(request, settings.maxBodyBytes, settings.bodyTimeoutMs) : request;
    if (read instanceof Response) return read;
    // Looked at again once the body is in: the server may have begun closing, the session ended, meanwhile.
    if (closing) return refusal(503, 'the server is closing');
    if (id === null) return open(read, admitted.caller);
    const session = sessions.get(id);
    // Another caller's session answers as one that does not exist: its id is no key to it.
    if (!session || session.caller !== admitted.caller) return refusal(404, 'no such MCP session (it ended, or the server restarted): initialize a new one');
    touch(id, session);
    return session.transport.handleRequest(read);
  };

  return Object.assign(handler, {
    server,
    sessions: () => sessions.size,
    async close() {
      closing = true;
      for (const session of sessions.values()) clearTimeout(session.idle);
      await server.close();
      sessions.clear();
    },
  });
}

/**
 * A POST with its body read within `timeoutMs` and `maxBytes`, as a request whose body the
 * transport then reads at once; or the refusal (408, 413, 400). Before, the transport waited on
 * the body for as long as the runtime let the socket live: a client that sent its headers and then
 * nothing held the request open for Node's 300 s `requestTimeout`, for ever under a framework
 * with none. Read after `authorize`: a caller it refuses never has its body read.
 */
async function withBody(request: Request, maxBytes: number, timeoutMs: number): Promise<Request | Response> {
  const read = await readBody(request, maxBytes, timeoutMs);
  if ('problem' in read) return refusal(read.status, read.problem);
  return request.body ? new Request(request, { body: read.bytes }) : request;
}

/** Why a browser request from another origin is refused, or null. Non-browser clients send no `Origin`. */
function crossOrigin(request: Request, allowed: ReadonlySet<string>): string | null {
  const origin = request.headers.get('origin');
  if (origin !== null) return allowed.has(origin.toLowerCase()) ? null : `requests from the origin ${origin.slice(0, 200)} are refused (allowedOrigins)`;
  // A browser that sends no Origin still says where the request comes from.
  if (request.headers.get('sec-fetch-site') === 'cross-site') return 'cross-site requests are refused';
  return null;
}

/** Who a request comes from, as `authorize` says; or the refusal of a request it does not let through. */
async function authorized(request: Request, authorize: McpAuthorize | undefined, timeoutMs: number): Promise<{ caller: string | undefined } | { refusal: Response }> {
  if (!authorize) return { caller: undefined };
  const controller = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const error = new Error(`authorize gave no answer within ${timeoutMs} ms`);
      controller.abort(error);
      reject(error);
    }, timeoutMs);
  });
  let answer: unknown;
  try {
    answer = await Promise.race([Promise.resolve().then(() => authorize(request, { signal: controller.signal })), timeout]);
  } catch {
    // What the hook threw stays on the server: it may say more than a refused client should read.
    return { refusal: refusal(403, 'the request could not be authorized') };
  } finally {
    clearTimeout(timer);
  }
  const parsed = readAnswer(AuthorizationSchema, answer);
  if (!parsed.ok) return { refusal: refusal(403, 'the request could not be authorized: authorize answered neither { caller }, true, false nor { status, reason }') };
  if (parsed.value === true) return { caller: undefined };
  if (parsed.value === false) return { refusal: refusal(401, 'unauthorized', { 'www-authenticate': 'Bearer' }) };
  if ('caller' in parsed.value) return { caller: parsed.value.caller };
  const { status, reason } = parsed.value;
  return { refusal: refusal(status, reason ?? (status === 401 ? 'unauthorized' : 'forbidden'), status === 401 ? { 'www-authenticate': 'Bearer' } : {}) };
}

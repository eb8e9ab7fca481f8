import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { ElicitResultSchema, ErrorCode, ListToolsRequestSchema, McpError, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { checkKnownKeys, parseOptions } from '../known-keys.js';
import type { ApprovalRequest } from '../agent/approvals/approval-binding.js';
import { thrownMessage } from '../read-answer.js';
import { MemorySessionStore } from '../stores/memory.js';
import type { SessionStore } from '../stores/session-store.js';
import { SessionScopeError } from '../sessions/durable-session.js';
import { decodeRow } from '../sessions/session-row.js';
import { McpServerOptionsError, servedAgents, type McpAgent, type ServedAgent } from './agents.js';
import { runCall, type ApprovalAnswer, type CallEnd, type CallPlan, type Question } from './call.js';
import { CallerSchema, CallerSessions, notThisCallers } from './caller-sessions.js';
import { HeldSessions, within, type Hold } from './held-sessions.js';
import { answeredError, internalError } from './internal-error.js';
import { callResult, stillRunningResult } from './result.js';
import { quoted, visibleText } from './shown.js';
import { MAX_TIMER_MS } from '../timer-bound.js';

/** The JSON-RPC error code of a call refused because the server runs as many calls as it may. */
export const SERVER_BUSY_CODE = -32_091;

/** The limits and policies of an agent MCP server, checked once when it is made. */
export const McpServerSettingsSchema = z.strictObject({
  /** The server's name and version in the MCP handshake. */
  name: z.string().min(1).max(200).default('loopchart'),
  version: z.string().min(1).max(100).default('1'),
  /** Calls run at once across every connection; one more is refused (`SERVER_BUSY_CODE`). Default 8. */
  maxConcurrentCalls: z.number().int().min(1).max(10_000).default(8),
  /** Longest a call's run may take, in ms; then it is cancelled and the call answers an error result. Default 10 minutes. */
  callTimeoutMs: z.number().int().positive().max(MAX_TIMER_MS).default(10 * 60_000),
  /** Longest the client may take to answer one approval (elicitation), in ms; then the call is denied. Default 10 minutes. */
  approveTimeoutMs: z.number().int().positive().max(MAX_TIMER_MS).default(10 * 60_000),
  /** Largest arguments of one call, in bytes of JSON. Default 1 MiB. */
  maxArgumentBytes: z.number().int().min(64).max(2 ** 30).default(1 << 20),
  /**
   * Longest text of a result the server sends, in characters (UTF-16 code units); a longer one is
   * cut there with a marker that says so, a longer structured answer is an error result. The
   * session keeps the whole answer. Default 100,000 (some 25,000 tokens).
   */
  maxResultChars: z.number().int().min(1_000).max(2 ** 30).default(100_000),
  /**
   * What a run does when its client's connection closes: `cancel` it, or `continue` it in the store
   * (a repeat of the call by the same caller under the same idempotency key attaches to it: see
   * `McpConnectOptions.caller`). Default `continue` with a store, `cancel` without one (nobody could
   * read the result).
   */
  onDisconnect: z.enum(['cancel', 'continue']).optional(),
});
export type McpServerSettings = z.input<typeof McpServerSettingsSchema>;

/**
 * What `createMcpServer` serves: the agents (each a tool), the store their calls run in as durable
 * sessions (without one, each call runs in a session of its own in memory), and the limits.
 *
 * @example
 * ```ts
 * import type { McpServerOptions } from 'loopchart/mcp-server';
 *
 * const options: McpServerOptions = {
 *   agents: [{ agent: machine, name: 'researcher', description: 'Researches one question.' }],
 *   store,
 *   maxConcurrentCalls: 4,
 * };
 * ```
 */
export interface McpServerOptions extends McpServerSettings {
  /** Each entry's own arguments type (its `input`'s output) types its `prompt`: any entry fits the list. */
  agents: readonly McpAgent<z.ZodType<any>>[];
  store?: SessionStore | undefined;
}

/**
 * Who is on the other end of one connection. Calls continue (by session id) and repeat (by
 * idempotency key) only sessions made for the same caller by the same tool; another caller's
 * session, another tool's or a chat's answers as one this caller cannot continue. Give `caller` from what authenticated the connection (a user id, never
 * something the client chose); it is also the memory scope of the sessions made for it (see
 * `agentMemory`). Without it, the connection is its own caller: what its calls make can be
 * continued and repeated on that connection only.
 *
 * @example
 * ```ts
 * import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
 * import { createAgentMachine } from 'loopchart';
 * import { createMcpServer, type McpConnectOptions } from 'loopchart/mcp-server';
 * import { scriptedModel } from 'loopchart/testing';
 *
 * const helper = createAgentMachine({ model: scriptedModel([{ text: 'Done.' }]) });
 * const server = createMcpServer({ agents: [{ agent: helper, name: 'helper', description: 'Helps.' }] });
 * const [, transport] = InMemoryTransport.createLinkedPair();
 * const options: McpConnectOptions = { caller: 'user:ada' }; // from what authenticated the connection
 * await server.connect(transport, options);
 * ```
 */
export interface McpConnectOptions {
  /** 1 to 200 characters, no control characters, no lone surrogate (the memory scope's rule). */
  caller?: string | undefined;
}

/** Calls in flight across the server's connections. */
export interface McpServerStats {
  running: number;
}

/**
 * Agents as an MCP server, ready for any number of connections (`connect` one SDK transport each);
 * `serveStdio` and `createMcpHandler` are built on it.
 *
 * @example
 * ```ts
 * import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
 * import { createMcpServer } from 'loopchart/mcp-server';
 *
 * const server = createMcpServer({ agents: [{ agent: machine, name: 'helper', description: 'Helps.' }] });
 * await server.connect(new StdioServerTransport());
 * ```
 */
export interface AgentMcpServer {
  /** Serves one connection over `transport`, for `caller` (see `McpConnectOptions`); resolves once it is started. Closing the transport ends it. */
  connect(transport: Transport, options?: McpConnectOptions): Promise<void>;
  stats(): McpServerStats;
  /** Closes every connection (their runs are cancelled or kept as `onDisconnect` says) and waits for their calls to end. */
  close(): Promise<void>;
}

/** Every key `createMcpServer` takes (the hosts add theirs to it). */
export const MCP_SERVER_KEYS: readonly string[] = [...Object.keys(McpServerSettingsSchema.shape), 'agents', 'store'];

/**
 * Serves agents as MCP tools, over any MCP transport. Each agent is a tool whose input schema is
 * its arguments' schema; a call runs the agent as a durable session on `store` (resumed after a
 * crash; its id in the result's `_meta['loopchart/sessionId']`, which a later call of the same
 * caller may pass back in its own `_meta` to continue the conversation; see `McpConnectOptions`
 * for who a caller is) and answers with the run's final text, or its
 * answer as `structuredContent` where the tool has an output schema. The client hears a progress
 * notification per turn (when it sent a `progressToken`); its cancel ends the run `Cancelled`; a
 * tool call that needs approval is asked of the client through MCP elicitation, and denied with
 * the reason when the client cannot answer (no elicitation support, no answer in time): never run
 * without a decision. Arguments that fail the input schema are an `InvalidParams` error; a call
 * over `maxConcurrentCalls` is refused with `SERVER_BUSY_CODE`. Needs `@modelcontextprotocol/sdk`.
 *
 * @example
 * ```ts
 * import { createAgentMachine } from 'loopchart';
 * import { createMcpServer } from 'loopchart/mcp-server';
 * import { scriptedModel } from 'loopchart/testing';
 *
 * const helper = createAgentMachine({ model: scriptedModel([{ text: 'Done.' }]) });
 * const server = createMcpServer({ agents: [{ agent: helper, name: 'helper', description: 'Does one task.' }], store });
 * console.log(server.stats().running); // 0
 * ```
 */
export function createMcpServer(options: McpServerOptions): AgentMcpServer {
  if (typeof options !== 'object' || options === null) throw new McpServerOptionsError('options must be an object');
  const refuse = (message: string) => new McpServerOptionsError(message);
  // Strict over every key it takes (a misspelt one names the closest), then the settings' own checks.
  checkKnownKeys(options, MCP_SERVER_KEYS, '', refuse);
  const { agents, store, ...rest } = options;
  const settings = parseOptions(McpServerSettingsSchema, rest, '', refuse);
  if (store !== undefined && (typeof store !== 'object' || store === null || typeof (store as SessionStore).apply !== 'function')) {
    throw new McpServerOptionsError('store must be a SessionStore');
  }
  return new AgentServer(servedAgents(agents), store, settings);
}

type Settings = z.output<typeof McpServerSettingsSchema>;

class AgentServer implements AgentMcpServer {
  readonly #agents: Map<string, ServedAgent>;
  readonly #store: SessionStore | undefined;
  readonly #settings: Settings;
  readonly #keep: boolean;
  readonly #connections = new Set<Server>();
  readonly #held = new HeldSessions();
  readonly #calls = new Set<Promise<unknown>>();

  constructor(agents: Map<string, ServedAgent>, store: SessionStore | undefined, settings: Settings) {
    this.#agents = agents;
    this.#store = store;
    this.#settings = settings;
    this.#keep = (settings.onDisconnect ?? (store ? 'continue' : 'cancel')) === 'continue';
  }

  stats(): McpServerStats {
    return { running: this.#calls.size };
  }

  async connect(transport: Transport, options: McpConnectOptions = {}): Promise<void> {
    const caller = options.caller === undefined ? undefined : CallerSchema.safeParse(options.caller);
    if (caller && !caller.success) throw new McpServerOptionsError(`caller: ${z.prettifyError(caller.error)}`);
    const sessions = new CallerSessions(caller?.data);
    const server = new Server({ name: this.#settings.name, version: this.#settings.version }, { capabilities: { tools: {} } });
    let closed = false;
    server.onclose = () => {
      closed = true;
      this.#connections.delete(server);
    };
    server.setRequestHandler(ListToolsRequestSchema, () => ({
      tools: [...this.#agents.values()].map((served) => ({
        name: served.name,
        description: served.description,
        inputSchema: served.inputSchema as { type: 'object' },
        ...(served.outputSchema && { outputSchema: served.outputSchema as { type: 'object' } }),
      })),
    }));
    server.setRequestHandler(ToolsCallRequest, (request, extra) => {
      const call = this.#call(server, sessions, request.params, {
        signal: extra.signal,
        disconnected: () => closed,
        progressToken: extra._meta?.progressToken,
        requestId: extra.requestId,
        notify: (notification) => extra.sendNotification(notification as never),
      }).catch((error: unknown) => {
        // The SDK answers a thrown error with its message: a store's or a hook's stays on the server.
        throw answeredError(`tools/call of ${toolNameOf(request.params)}`, error);
      });
      this.#calls.add(call);
      void call.then(
        () => this.#calls.delete(call),
        () => this.#calls.delete(call),
      );
      return call;
    });
    this.#connections.add(server);
    await server.connect(transport);
  }

  async close(): Promise<void> {
    await Promise.allSettled([...this.#connections].map((server) => server.close()));
    await Promise.allSettled([...this.#calls]);
  }

  async #call(
    server: Server,
    sessions: CallerSessions,
    given: unknown,
    extra: {
      signal: AbortSignal;
      disconnected: () => boolean;
      progressToken: string | number | undefined;
      requestId: string | number;
      notify: (notification: { method: string; params: Record<string, unknown> }) => Promise<void>;
    },
  ): Promise<CallToolResult> {
    // The monotonic clock: a wall clock that steps (NTP, a VM resumed) must not cut the call's time short or stretch it.
    const started = performance.now();
    const params = parseParams(given);
    const served = this.#agents.get(params.name);
    if (!served) throw new McpError(ErrorCode.InvalidParams, `unknown tool ${quoted(params.name, 100)}: this server has ${[...this.#agents.keys()].join(', ')}`);
    const args = params.arguments ?? {};
    const bytes = Buffer.byteLength(JSON.stringify(args));
    if (bytes > this.#settings.maxArgumentBytes) throw new McpError(ErrorCode.InvalidParams, `the arguments are ${bytes} bytes of JSON, over the limit of ${this.#settings.maxArgumentBytes}`);
    const checked = served.input.safeParse(args);
    if (!checked.success) throw new McpError(ErrorCode.InvalidParams, `the arguments do not match the input schema of '${served.name}': ${visibleText(z.prettifyError(checked.error), 2_000)}`);
    const prompt = promptOf(served, checked.data);
    const { sessionId, repeat, named, chosen } = sessions.sessionOf(served.name, params._meta);
    // Before any wait: this call is already counted in #calls once it waits.
    if (this.#calls.size >= this.#settings.maxConcurrentCalls) {
      throw new McpError(SERVER_BUSY_CODE, `the server runs ${this.#settings.maxConcurrentCalls} calls already (maxConcurrentCalls); try again later`);
    }
    const store = this.#store ?? new MemorySessionStore();
    // Before the session is waited for or opened: another caller's session is not even said to be busy.
    if (named && !(await ownedBy(store, sessionId, sessions.scope, chosen))) throw notThisCallers(served.name);
    const timeoutMs = this.#settings.callTimeoutMs;
    const remaining = () => started + timeoutMs - performance.now();
    const taken = await this.#take(served, sessionId, sessions.scope, repeat, remaining, extra.signal);
    if ('answer' in taken) return taken.answer;
    let progress = 0;
    // Notifications in the order sent, all written before the result: a client drops progress that arrives after it.
    let notified: Promise<unknown> = Promise.resolve();
    const plan: CallPlan = { served, prompt, store, sessionId, scope: sessions.scope, repeat };
    let end: CallEnd | null = null;
    try {
      end = await runCall(plan, {
        signal: extra.signal,
        disconnected: extra.disconnected,
        keepOnDisconnect: this.#keep && this.#store !== undefined,
        timeoutMs: Math.max(1, remaining()),
        progress: (turn) => {
          if (extra.progressToken === undefined || extra.disconnected()) return;
          const params = { progressToken: extra.progressToken, progress: ++progress, message: `turn ${turn} finished` };
          notified = notified.then(() => extra.notify({ method: 'notifications/progress', params })).catch(() => {});
        },
        approve: (request, signal, question) => this.#approve(server, request, signal, question, extra),
      });
    } catch (error) {
      // Made by another caller after this call's ownership check (here, or in another process on the store): nothing was opened.
      if (SessionScopeError.isInstance(error)) throw notThisCallers(served.name);
      throw error;
    } finally {
      taken.hold.release(end);
    }
    await Promise.race([notified, delay(PROGRESS_FLUSH_MS)]);
    return callResult(served, sessionId, end, this.#settings);
  }

  /**
   * The session for this call to drive; or, for a repeat of a call this process runs on it (from
   * any connection of the same caller), that call's end as its answer, waited for within the
   * call's timeout. A call that left its run (nobody to approve) or failed hands the session on to
   * the repeat, which drives it. Any other call on a held session is refused.
   */
  async #take(served: ServedAgent, sessionId: string, scope: string, repeat: boolean, remaining: () => number, signal: AbortSignal): Promise<{ hold: Hold } | { answer: CallToolResult }> {
    for (;;) {
      const taken = this.#held.take(sessionId, scope);
      // Another caller's call made it after this call's ownership check: answered as any session of another caller.
      if (taken === 'foreign') throw notThisCallers(served.name);
      if (!(taken instanceof Promise)) return { hold: taken };
      if (!repeat) throw new McpError(ErrorCode.InvalidRequest, `session '${sessionId}' is running another call; wait for it to end`);
      const end = await within(taken, remaining(), signal);
      if (end === 'gave-up') return { answer: stillRunningResult(sessionId, this.#settings.callTimeoutMs) };
      if (end && end.type !== 'left') return { answer: callResult(served, sessionId, end, this.#settings) };
    }
  }

  /**
   * Asks the client, through a form elicitation, whether the call may run (an approval) or run
   * again (a call in doubt); the same yes/no form for both.
   */
  async #approve(server: Server, request: ApprovalRequest, signal: AbortSignal, question: Question, extra: { disconnected: () => boolean; requestId: string | number }): Promise<ApprovalAnswer> {
    if (extra.disconnected()) return 'gone';
    const elicitation = server.getClientCapabilities()?.elicitation as { form?: object | undefined; url?: object | undefined } | undefined;
    if (!elicitation || (elicitation.url && !elicitation.form)) {
      const asked = question === 'approval' ? 'needs approval' : 'was cut off by a restart of the server (its effect is unknown)';
      const answer = question === 'approval' ? 'denied' : 'not run again';
      return { approved: false, reason: `the tool call '${request.toolName}' ${asked}, and the MCP client cannot be asked (it does not support form elicitation): ${answer}` };
    }
    const args = truncate(JSON.stringify(request.args) ?? '', 2_000);
    const params = {
      mode: 'form' as const,
      message:
        question === 'approval'
          ? `Allow the agent to call ${request.toolName} with ${args}?`
          : `The server stopped while the agent's call of ${request.toolName} with ${args} ran: it may or may not have taken effect. Run it again?`,
      requestedSchema: {
        type: 'object' as const,
        properties: {
          approve: { type: 'boolean' as const, title: 'Approve', description: question === 'approval' ? `Run ${request.toolName}` : `Run ${request.toolName} again` },
          reason: { type: 'string' as const, title: 'Reason', description: 'Why (the agent reads it when denied)' },
        },
        required: ['approve'],
      },
    };
    try {
      const answer = await server.request({ method: 'elicitation/create', params }, ElicitResultSchema, {
        relatedRequestId: extra.requestId,
        signal,
        timeout: this.#settings.approveTimeoutMs,
      });
      const what = question === 'approval' ? 'the approval' : 'running it again';
      if (answer.action !== 'accept') return { approved: false, reason: `the user ${answer.action === 'decline' ? 'declined' : 'dismissed'} ${what}`, by: 'mcp-client' };
      const content = ElicitedApproval.safeParse(answer.content);
      if (!content.success) return { approved: false, reason: 'the client answered the approval without a yes or no', by: 'mcp-client' };
      return { approved: content.data.approve, ...(content.data.reason && { reason: content.data.reason }), by: 'mcp-client' };
    } catch (error) {
      if (extra.disconnected()) return 'gone';
      return { approved: false, reason: `no decision from the MCP client: ${thrownMessage(error)}` };
    }
  }
}

/** How long a result waits for its progress notifications to be written (a transport that hangs must not hold it). */
const PROGRESS_FLUSH_MS = 1_000;
const delay = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms).unref());

/**
 * Whether a call of the caller with `scope` may run in `sessionId`: it has that scope, or it does
 * not exist yet (the call makes it, with that scope) and the name the client `chosen` for it is
 * no session either. A session stored under that name was made by another surface (a chat, the
 * CLI) or by a version that stored names as given, which nothing tells apart from a chat's.
 */
async function ownedBy(store: SessionStore, sessionId: string, scope: string, chosen: string | undefined): Promise<boolean> {
  const stored = await store.load(sessionId);
  if (stored) return decodeRow(sessionId, stored.state, stored.messages).scope === scope;
  return chosen === undefined || (await store.load(chosen)) === undefined;
}

/**
 * tools/call as the SDK first parses it, by method alone. With the SDK's own CallToolRequestSchema
 * here, params it refuses (arguments that are not an object) would throw a bare zod error, which
 * the SDK answers InternalError (-32603) with the raw issues; past this, its Server checks the
 * request itself and answers InvalidParams (-32602).
 */
const ToolsCallRequest = z.looseObject({ method: z.literal('tools/call'), params: z.unknown() });

/** The params of a call, as loopchart reads them (the SDK has checked them against MCP's schema by now). */
const CallParamsSchema = z.looseObject({
  name: z.string(),
  arguments: z.record(z.string(), z.unknown()).optional(),
  _meta: z.record(z.string(), z.unknown()).optional(),
});

/** The tool a call names, as the server's log shows it (cut short, its controls escaped: it is the client's text). */
function toolNameOf(given: unknown): string {
  const name = typeof given === 'object' && given !== null ? (given as { name?: unknown }).name : undefined;
  return typeof name === 'string' ? quoted(name, 100) : 'a tool';
}

function parseParams(given: unknown): z.output<typeof CallParamsSchema> {
  const parsed = CallParamsSchema.safeParse(given);
  if (!parsed.success) throw new McpError(ErrorCode.InvalidParams, `the tools/call params are malformed: ${z.prettifyError(parsed.error)}`);
  return parsed.data;
}

/** A client's yes or no decides; its reason (what the model reads with a no) is cut short, or left out when it is no text, never the reason to refuse the answer. */
const ElicitedApproval = z.object({
  approve: z.boolean(),
  reason: z
    .string()
    .transform((reason) => truncate(reason, 2_000))
    .optional()
    .catch(undefined),
});

function promptOf(served: ServedAgent, args: unknown): string {
  let prompt: unknown;
  try {
    prompt = served.prompt(args);
  } catch (error) {
    throw internalError(`the prompt function of '${served.name}'`, error);
  }
  if (typeof prompt !== 'string' || prompt.length === 0) throw new McpError(ErrorCode.InternalError, `the prompt function of '${served.name}' returned no text`);
  return prompt;
}

const truncate = (text: string, max: number): string => (text.length > max ? `${text.slice(0, max)}…` : text);

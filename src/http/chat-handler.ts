import { z } from 'zod';
import { type AgentActor, type AgentMachine } from '../../machines/agent.machine.js';
import { runInFlight, type AgentEmitted } from '../agent/protocol/actor-types.js';
import { type AgentContext } from '../agent/core/context.js';
import { batchResults } from '../agent/core/run-rules.js';
import { LoopchartError } from '../errors.js';
import { DurableSession, SessionScopeError } from '../sessions/durable-session.js';
import { ApprovalRefusedError, decideStored } from '../sessions/stored-decision.js';
import { decideDoubtStored, type DoubtVerdict } from '../sessions/stored-doubt.js';
import { decodeRow } from '../sessions/session-row.js';
import { SessionBusyError } from '../stores/errors.js';
import { isSessionStore, type SessionStore } from '../stores/session-store.js';
import { isRewirableMachine } from '../agent/protocol/executor.js';
import { LiveLimitsSchema, type LiveStats, type SseStream } from '../viewer/sse.js';
import { checkAnswers, childWaitProblem, type ContextOf, type ReadAnswer } from './answers.js';
import { ChatAccess, type Admission, type ChatAuthorizer, type ChatKeyMapper, type ChatScopeMapper } from './chat-access.js';
import type { ChatAction } from './route.js';
import { ChatRun } from './chat-run.js';
import { AllowedOriginSchema, contentTypeProblem, crossSiteProblem } from './cross-site.js';
import { FetchSink } from './fetch-sink.js';
import { chatAsk, readJsonBody, type ApprovalAnswer } from './request.js';
import { DEFAULT_BODY_TIMEOUT_MS, MAX_BODY_TIMEOUT_MS, type BodyProblem } from '../read-body.js';
import { chatRoute, otherSurfaceProblem } from './route.js';
import { SubagentTree } from '../agent/hosts/subagent-tree.js';
import { RESERVED_OPERATIONS, RunChunker, type Audience } from './ui-chunks.js';
import { toUIMessages } from './ui-messages.js';
import { NOT_RUN_AGAIN, type Answer, type Answers } from './denials.js';
import { readTraceFacts, StoredSubagents, type ChildrenOf } from './stored-subagents.js';
import { checkKnownKeys, parseOptions } from '../known-keys.js';

/** The options of `createChatHandler`, checked once when the handler is made. */
export const ChatHandlerOptionsSchema = z.strictObject({
  /** The AI SDK major version of the pages (`useChat` of `@ai-sdk/react` 2 is 5, 3 is 6). Default 6. */
  aiSdk: z.union([z.literal(5), z.literal(6), z.literal(7)]).default(6),
  /** The largest request body taken (bytes); a larger one is a 413. Default 1 MiB. */
  maxBodyBytes: z.number().int().min(1024).max(2 ** 30).default(1 << 20),
  /** How far a reader may fall behind before its response is dropped (the viewer's live limits). */
  live: LiveLimitsSchema.default(LiveLimitsSchema.parse({})),
  /**
   * Origins besides the request's own host whose pages may POST (messages, approvals, cancel):
   * `https://app.example.com`. A POST whose `Origin` is neither is a 403. Default none.
   */
  allowedOrigins: z.array(AllowedOriginSchema).max(1000).default([]),
  /** How long `authorize` and `chatKey` each may take before the request is refused (ms). Default 5 s. */
  authorizeTimeoutMs: z.number().int().min(1).max(120_000).default(5000),
  /** How long a request body may take to arrive once its headers have (ms); then a 408. Default 30 s. */
  bodyTimeoutMs: z.number().int().min(1).max(MAX_BODY_TIMEOUT_MS).default(DEFAULT_BODY_TIMEOUT_MS),
});
export type ChatHandlerSettings = z.input<typeof ChatHandlerOptionsSchema>;

const CHAT_HANDLER_KEYS = [...Object.keys(ChatHandlerOptionsSchema.shape), 'machine', 'store', 'authorize', 'chatKey', 'chatScope', 'onError'];

export interface ChatHandlerOptions extends ChatHandlerSettings {
  machine: AgentMachine;
  store: SessionStore;
  /**
   * May this request do this to this chat? Called before any store read or write of every
   * request; a false, a throw, a timeout or an answer of another shape refuse it (see
   * `ChatAuthorizer`). Without it, anyone who knows a chat id may read and drive the chat.
   */
  authorize?: ChatAuthorizer | undefined;
  /** The stored session id of a page's chat id for this caller (see `ChatKeyMapper`). Default: the chat id itself. */
  chatKey?: ChatKeyMapper | undefined;
  /**
   * The caller's memory scope (see `ChatScopeMapper`): a new chat's session is stored with it, so
   * `agentMemory` remembers per user; a chat of another scope is a 404. Default: none.
   */
  chatScope?: ChatScopeMapper | undefined;
  /**
   * Told of every error that made a request a 500 (a store that cannot be reached, a bug): the
   * page gets only the error's code, never its message, which may hold a connection string or a
   * user's data. Default: `console.error`. What it throws is ignored.
   */
  onError?: ChatErrorReporter | undefined;
}

/**
 * The `onError` option of `createChatHandler`: where a request's unexpected error goes (your
 * logger), with the request it failed (its method and URL; a POST's body has been read).
 *
 * @example
 * ```ts
 * import type { ChatErrorReporter } from 'loopchart/http';
 * const report: ChatErrorReporter = (error, request) => console.error(`chat ${request.method} ${new URL(request.url).pathname}`, error);
 * ```
 */
export type ChatErrorReporter = (error: unknown, request: Request) => void;

/** A body that cannot be taken, as its answer. */
const bodyRefusal = ({ problem, status }: BodyProblem): Response =>
  json(status, status === 413 ? 'BodyTooLarge' : status === 408 ? 'BodyTimeout' : 'InvalidChatRequest', problem);

/** What the page reads of a 500: a fixed sentence (the error's own message stays on the server). */
const INTERNAL_MESSAGE = 'the chat handler failed; the server reported the error';

/**
 * `createChatHandler` was given options out of range (an unknown AI SDK version, a body limit
 * of 0).
 *
 * @example
 * ```ts
 * import { ChatHandlerOptionsError, createChatHandler } from 'loopchart/http';
 * try { createChatHandler({ machine, store, aiSdk: 4 as never }); } catch (e) { if (ChatHandlerOptionsError.isInstance(e)) console.error(e.message); }
 * ```
 */
export class ChatHandlerOptionsError extends LoopchartError {
  constructor(problem: string) {
    super('InvalidChatHandlerOptions', `invalid chat handler options: ${problem}`);
  }
}

/** A Fetch API handler with what its owner needs to watch and stop it. */
export interface ChatHandler {
  (request: Request): Promise<Response>;
  /** The responses following runs now, and how many were dropped for falling behind. */
  stats(): LiveStats;
  /** Ends every response and closes the sessions this handler holds (a run in flight continues on the next request). */
  close(): Promise<void>;
}

/** A session this process drives while one of its runs streams. */
interface LiveChat {
  session: DurableSession;
  /** The run in flight (or the last one, ended). */
  run: ChatRun | null;
  /** A check of whether the session can be let go is queued. */
  settling: boolean;
  /** The session's subagents, running in this process. */
  tree: SubagentTree | null;
}

const json = (status: number, code: string, message: string, extra: Record<string, string> = {}): Response => {
  const text = JSON.stringify({ error: { code, message } });
  // A length: a client that reads the answer before it sent all its body (a 413) knows where it ends.
  return new Response(text, {
    status,
    headers: { 'content-type': 'application/json; charset=utf-8', 'content-length': String(Buffer.byteLength(text)), 'cache-control': 'no-store', ...extra },
  });
};

/**
 * A page's answer to "run it again?" on a call in doubt: yes runs it again (with the same
 * idempotency key), no fails it with the page's reason (or says the user did not run it again).
 */
const doubtVerdict = ({ approved, reason }: Pick<ApprovalAnswer, 'approved' | 'reason'>): DoubtVerdict & { by: string } =>
  approved ? { action: 'rerun', by: 'chat' } : { action: 'fail', reason: reason ?? NOT_RUN_AGAIN, by: 'chat' };

/** A page's answer as the session takes it (and its trace records it), for the chunker to show its call with. */
function answerOf({ kind, run, digest, approved, reason }: ReadAnswer): Answer {
  if (kind === 'approval') return { kind, run, digest, approved, reason };
  const verdict = doubtVerdict({ approved, reason });
  return { kind, run, digest, approved, reason: verdict.reason, by: verdict.by };
}

/**
 * A chat as this handler works on it: its stored session id (`key`) and the id its page sent
 * (`name`, the only one an answer shows); `report` tells `onError` of an error the request
 * survives (a subagent's session that could not be read: the page shows it could not).
 */
interface ChatRef {
  key: string;
  name: string;
  /** The caller's scope, when the handler maps one: the chat read must be of it (see `#read`). */
  scope?: string | undefined;
  report: (error: unknown) => void;
}

/**
 * What the store says of a chat's run in flight, for its stream to show the run as its pages saw
 * it: the answers its trace records, and its subagents' stored steps (by call ordinal).
 */
interface StoredRun {
  answers: Answers;
  children: ChildrenOf;
}

/** A chat id as an answer quotes it (at most 100 characters). */
const shown = (name: string): string => name.slice(0, 100);
const notFound = (name: string): Response => json(404, 'ChatNotFound', `no chat '${shown(name)}'`);

/**
 * What a page sends to resume an operation: its name and the payload its resume schema checks;
 * `target` for a subagent's, as its `data-operation-yielded` part named it (the path of calls down to it).
 */
const ResumeRequestSchema = z.strictObject({ operation: z.string().min(1).max(200), payload: z.unknown(), target: z.string().min(1).max(1000).optional() });

/** How long a resume for a subagent waits for the child, opened again from the store, to be back at its wait. */
const CHILD_BACK_MS = 10_000;

/** What `#scopeOf` says of a chat that does not exist yet (a POST makes it with the caller's scope). */
const NO_CHAT = Symbol('no chat');

const STREAM_HEADERS = {
  'content-type': 'text/event-stream',
  'cache-control': 'no-cache',
  connection: 'keep-alive',
  'x-vercel-ai-ui-message-stream': 'v1',
  'x-accel-buffering': 'no',
};

/**
 * Serves loopchart sessions to AI SDK chat pages (`useChat` with `DefaultChatTransport`):
 * POST runs a turn of the durable session named by the chat id and answers with a UI message
 * stream; `GET <api>/<id>/stream` reattaches to the run in flight (204 when there is none);
 * `POST <api>/<id>/cancel` cancels it (202; 409 when none is in flight: the page's stop button);
 * `GET <api>/<id>/messages` gives the stored conversation as UI messages. Approvals, reloads,
 * a second tab and a restarted server all go through the stored session. Fetch API: mount it in
 * a Next.js route handler, Hono, Bun or Deno, or on `node:http` with `toNodeListener`.
 *
 * @example
 * ```ts
 * import { createServer } from 'node:http';
 * import { createAgentMachine, openSessionStore } from 'loopchart';
 * import { createChatHandler, toNodeListener } from 'loopchart/http';
 * import { scriptedModel } from 'loopchart/testing';
 *
 * const store = await openSessionStore('.loopchart/chat.db');
 * const machine = createAgentMachine({ model: scriptedModel([{ text: 'Hello from loopchart.' }]) });
 * const chat = createChatHandler({ machine, store });
 * createServer(toNodeListener(chat)).listen(3000, '127.0.0.1');
 * ```
 */
export function createChatHandler(options: ChatHandlerOptions): ChatHandler {
  const refuse = (message: string) => new ChatHandlerOptionsError(message);
  // Strict: a misspelt key (`allowedOrigin`) is named with the closest known one.
  checkKnownKeys(options, CHAT_HANDLER_KEYS, '', refuse);
  const { machine, store, authorize, chatKey, chatScope, onError, ...settings } = options;
  const checked = parseOptions(ChatHandlerOptionsSchema, settings, '', refuse);
  for (const [name, value] of [['authorize', authorize], ['chatKey', chatKey], ['chatScope', chatScope], ['onError', onError]] as const) {
    if (value !== undefined && typeof value !== 'function') throw new ChatHandlerOptionsError(`${name} must be a function, not ${typeof value}`);
  }
  // Checked here: either of the wrong type was accepted, and the mistake showed only when a message came.
  if (!isRewirableMachine(machine)) throw refuse('machine must be an agent (createAgentMachine)');
  if (!isSessionStore(store)) throw refuse('store must be a session store (openSessionStore)');
  const access = new ChatAccess(authorize, chatKey, chatScope, checked.authorizeTimeoutMs);
  const chats = new ChatSessions(machine, store, checked, access, onError ?? ((error) => console.error('loopchart chat handler:', error)));
  const handler = (request: Request) => chats.handle(request);
  return Object.assign(handler, { stats: () => chats.stats(), close: () => chats.close() });
}

class ChatSessions {
  readonly #machine: AgentMachine;
  readonly #store: SessionStore;
  readonly #settings: z.output<typeof ChatHandlerOptionsSchema>;
  readonly #live = new Map<string, LiveChat>();
  /** Per chat, the work that opens, drives or lets go of its session, one at a time. */
  readonly #queues = new Map<string, Promise<unknown>>();
  #dropped = 0;
  readonly #access: ChatAccess;
  readonly #origins: ReadonlySet<string>;
  readonly #onError: ChatErrorReporter;

  constructor(machine: AgentMachine, store: SessionStore, settings: z.output<typeof ChatHandlerOptionsSchema>, access: ChatAccess, onError: ChatErrorReporter) {
    this.#machine = machine;
    this.#store = store;
    this.#settings = settings;
    this.#access = access;
    this.#origins = new Set(settings.allowedOrigins);
    this.#onError = onError;
  }

  /**
   * Routes on the URL's path alone, refuses cross-site state changes, then asks `authorize` and
   * `chatKey`; only then is the store read. Past this point `key` is the stored session id and
   * `name` the chat id the page sent: an answer names the chat by `name` only, since the stored id
   * is the product's own (it may hold a tenant or a user id).
   */
  async handle(request: Request): Promise<Response> {
    try {
      const route = chatRoute(request.method, request.url);
      if ('refusal' in route) {
        const { status, code, message, allow } = route.refusal;
        return json(status, code, message, allow ? { allow } : {});
      }
      if (request.method === 'POST') {
        const crossSite = crossSiteProblem(request, this.#origins);
        if (crossSite) return json(403, 'CrossSiteRequest', crossSite);
        const type = contentTypeProblem(request, route.action === 'post' || route.action === 'resume');
        if (type) return json(415, 'UnsupportedMediaType', type);
      }
      if (route.action === 'post') return await this.#post(request);
      const admitted = await this.#admit(request, route.chatId, route.action);
      if (admitted instanceof Response) return admitted;
      const chat: ChatRef = { key: admitted.key, name: route.chatId, scope: admitted.scope, report: this.#reporter(request) };
      if (route.action === 'cancel') return await this.#cancel(chat);
      if (route.action === 'resume') return await this.#resumeOperation(request, chat);
      return route.action === 'stream' ? await this.#resume(chat) : await this.#messages(chat);
    } catch (error) {
      this.#reporter(request)(error);
      return json(500, LoopchartError.isInstance(error) ? error.code : 'Internal', INTERNAL_MESSAGE);
    }
  }

  /**
   * The stored session id of the page's chat id (and the caller's scope), or the refusal of
   * `authorize`, `chatKey` or `chatScope`; a chat stored with another scope is not found.
   */
  async #admit(request: Request, chatId: string, action: ChatAction): Promise<Admission | Response> {
    const admitted = await this.#access.admit(request, chatId, action);
    if ('refusal' in admitted) {
      const { status, code, message } = admitted.refusal;
      return json(status, code, message);
    }
    if (admitted.scope === undefined) return admitted;
    // A chat made without a scope is nobody's in particular: not this caller's either.
    const scope = await this.#scopeOf(admitted.key);
    return scope === NO_CHAT || scope === admitted.scope ? admitted : notFound(chatId);
  }

  /** The scope of a chat: its live session's, or its stored one's; `NO_CHAT` when there is no chat yet. */
  async #scopeOf(chatId: string): Promise<string | undefined | typeof NO_CHAT> {
    const live = this.#live.get(chatId);
    if (live) return live.session.actor.getSnapshot().context.scope;
    const stored = await this.#stored(chatId);
    return stored ? stored.scope : NO_CHAT;
  }

  stats(): LiveStats {
    let clients = 0;
    let bufferedBytes = 0;
    for (const chat of this.#live.values()) {
      for (const stream of chat.run?.responses ?? []) {
        clients++;
        bufferedBytes += stream.buffered;
      }
    }
    return { clients, dropping: 0, bufferedBytes, dropped: this.#dropped };
  }

  async close(): Promise<void> {
    const chats = [...this.#live.entries()];
    await Promise.all(chats.map(([chatId, chat]) => this.#serial(chatId, () => this.#letGo(chatId, chat, true))));
  }

  async #post(request: Request): Promise<Response> {
    const read = await readJsonBody(request, this.#settings.maxBodyBytes, this.#settings.bodyTimeoutMs);
    if ('problem' in read) return bodyRefusal(read);
    const asked = chatAsk(read.body);
    if ('problem' in asked) return json(400, 'InvalidChatRequest', asked.problem);
    const other = otherSurfaceProblem(asked.ask.chatId);
    if (other) return json(404, 'ChatNotFound', `no chat '${shown(asked.ask.chatId)}': ${other}`);
    const admitted = await this.#admit(request, asked.ask.chatId, asked.ask.type === 'approvals' ? 'approve' : 'post');
    if (admitted instanceof Response) return admitted;
    const ask = { ...asked.ask, chatId: admitted.key };
    const name = asked.ask.chatId;
    return this.#serial(ask.chatId, async () => {
      if (ask.type === 'approvals') return this.#answer({ key: ask.chatId, name, scope: admitted.scope, report: this.#reporter(request) }, ask.answers);
      let chat: LiveChat;
      try {
        // A new chat's session is made with the caller's scope; a stored one must have it.
        chat = await this.#open(ask.chatId, admitted.scope);
      } catch (error) {
        if (SessionScopeError.isInstance(error)) return notFound(name);
        // Another writer (a second process on the store) made or moved the chat between this
        // open's read and its first write: nothing of this message was stored. Not a fault of ours.
        if (SessionBusyError.isInstance(error)) return json(409, 'ChatBusy', `chat '${shown(name)}' was changed by another writer meanwhile: load it and send again`);
        throw error;
      }
      if (chat.run && !chat.run.ended) {
        this.#settle(ask.chatId, chat);
        return json(409, 'RunInFlight', `chat '${shown(name)}' has a run in flight: GET its stream to follow it`);
      }
      chat.session.send({ type: 'input', message: ask.text });
      const run = chat.run as ChatRun | null;
      if (!run || run.ended) return json(409, 'RunInFlight', 'the message did not start a run');
      return this.#stream(run, 0, 'replaying');
    });
  }

  /**
   * Sends the page's decisions, once each is checked against the session: a forged or stale one
   * changes nothing. A subagent's call (`c1/p1`) is decided through its parent while this process
   * runs the child; at rest, in the child's stored session (decideStored walks down the tree), and
   * the parent, opened again, resumes the child with it.
   */
  async #answer(ref: ChatRef, answers: ApprovalAnswer[]): Promise<Response> {
    const { key: chatId, name } = ref;
    const read = await this.#read(ref);
    if (!read) return notFound(name);
    const { live, context } = read;
    const checked = await checkAnswers(chatId, context, answers, this.#contextOf(live));
    if ('problem' in checked) return json(409, 'ApprovalNotFound', checked.problem);
    let toSend = checked.answers;
    if (!live) {
      for (const answer of checked.answers.filter((a) => a.ofChild)) {
        try {
          if (answer.kind === 'doubt') await decideDoubtStored(this.#store, chatId, answer, doubtVerdict(answer));
          else await decideStored(this.#store, chatId, answer, { approved: answer.approved, ...(answer.reason !== undefined && { reason: answer.reason }) });
        } catch (error) {
          if (ApprovalRefusedError.isInstance(error)) return json(409, 'ApprovalNotFound', error.message);
          throw error;
        }
      }
      toSend = checked.answers.filter((a) => !a.ofChild);
    }
    const chat = live ?? (await this.#open(chatId, undefined, await this.#storedRun(ref, context)));
    const again = toSend.length > 0 ? await checkAnswers(chatId, chat.session.actor.getSnapshot().context, toSend, this.#contextOf(chat)) : null;
    if ((again && 'problem' in again) || !chat.run) {
      this.#settle(chatId, chat);
      return json(409, 'ApprovalNotFound', again && 'problem' in again ? again.problem : 'the run waits for nothing');
    }
    const run = chat.run;
    // The page has the message up to here: this response continues it.
    const from = run.length;
    for (const answer of checked.answers) run.answer(answer.toolCallId, answerOf(answer));
    for (const { toolCallId, digest, run: runIndex, approved, reason, kind } of toSend) {
      // Bound to the call as the page showed it: the session refuses it for any other.
      if (kind === 'doubt') {
        chat.session.send({ type: 'doubt.decide', toolCallId, digest, run: runIndex, ...doubtVerdict({ approved, reason }) });
      } else {
        chat.session.send({ type: approved ? 'approve' : 'deny', toolCallId, digest, run: runIndex, ...(reason !== undefined && { reason }) });
      }
    }
    return this.#stream(run, from, 'continuing');
  }

  /** Where answers find a subagent's context: the live child while this process holds the chat, else the store. */
  #contextOf(live: LiveChat | undefined): ContextOf {
    if (live) return async (_sessionId, via) => live.tree?.contextOf(via);
    return async (sessionId) => this.#stored(sessionId);
  }

  async #resume(ref: ChatRef): Promise<Response> {
    const { key: chatId, name } = ref;
    return this.#serial(chatId, async () => {
      const read = await this.#read(ref);
      if (!read) return notFound(name);
      let stored: StoredRun | undefined;
      if (!read.live) {
        if (!runInFlight(read.context.brain)) return new Response(null, { status: 204 });
        stored = await this.#storedRun(ref, read.context);
      }
      const chat = await this.#open(chatId, undefined, stored);
      if (!chat.run || chat.run.ended) {
        this.#settle(chatId, chat);
        return new Response(null, { status: 204 });
      }
      return this.#stream(chat.run, 0, 'replaying');
    });
  }

  /**
   * The page's stop button: cancels the run in flight (the driver's `cancel`, no grace: the run
   * keeps what arrived and ends Cancelled, its streams end with that outcome). A dropped fetch
   * cannot mean this, since a reload drops it too and the run must go on.
   */
  /**
   * The page's answer to an operation the run waits on (`operation.yielded`, shown as a
   * `data-operation-yielded` part): `POST <api>/<id>/resume` with `{ operation, payload }`, and
   * `target` for a subagent's (see `#resumeChild`). The session checks the payload against the
   * operation's resume schema; a refused one changes nothing (409 with the reason). Approvals and
   * budgets are not resumed here: approvals have their own answers, bound to the calls shown,
   * and a page does not raise its own budget.
   */
  async #resumeOperation(request: Request, ref: ChatRef): Promise<Response> {
    const { key: chatId, name } = ref;
    const read = await readJsonBody(request, this.#settings.maxBodyBytes, this.#settings.bodyTimeoutMs);
    if ('problem' in read) return bodyRefusal(read);
    const asked = ResumeRequestSchema.safeParse(read.body);
    if (!asked.success) return json(400, 'InvalidChatRequest', `a resume is { operation, payload, target? }: ${z.prettifyError(asked.error).slice(0, 300)}`);
    const { operation, payload, target } = asked.data;
    if (RESERVED_OPERATIONS.has(operation)) return json(400, 'InvalidChatRequest', `'${operation}' is not resumed through this route`);
    return this.#serial(chatId, async () => {
      const read = await this.#read(ref);
      if (!read) return notFound(name);
      const { live, context } = read;
      if (target !== undefined) return this.#resumeChild(ref, live, context, { operation, payload, target });
      const waiting = context.operations.waiting?.operation;
      if (waiting !== operation) {
        return json(409, 'NothingToResume', waiting ? `the run waits on operation '${waiting}', not '${operation.slice(0, 100)}'` : 'the run waits on no operation');
      }
      const chat = live ?? (await this.#open(chatId, undefined, await this.#storedRun(ref, context)));
      const run = chat.run;
      if (!run || run.ended) {
        this.#settle(chatId, chat);
        return json(409, 'NothingToResume', 'the run waits on no operation');
      }
      let refused: string | undefined;
      const listening = chat.session.actor.on('event.rejected', (event) => event.event === 'operation.resume' && (refused = event.reason));
      const from = run.length;
      try {
        chat.session.send({ type: 'operation.resume', operation, payload });
      } finally {
        listening.unsubscribe();
      }
      if (refused !== undefined) {
        this.#settle(chatId, chat);
        return json(409, 'ResumeRefused', refused);
      }
      return this.#stream(run, from, 'continuing');
    });
  }

  /**
   * A resume for a subagent's operation (`target`, the path of calls down to it): checked first
   * against the chat's run, walking down its calls in flight to the child (live here, else its
   * stored session), which must wait on that operation (a 409 otherwise, nothing sent). At rest,
   * the chat's session is opened again: its call runs again and opens the child from the store,
   * back at its wait, and the resume goes to it then (down through each level's call, as a steer
   * does). A payload the child's operation refuses is a 409 with its reason.
   */
  async #resumeChild(ref: ChatRef, live: LiveChat | undefined, context: AgentContext, resume: { operation: string; payload: unknown; target: string }): Promise<Response> {
    const chatId = ref.key;
    const { operation, payload, target } = resume;
    const problem = await childWaitProblem(chatId, context, target, operation, this.#contextOf(live));
    if (problem) return json(409, 'NothingToResume', problem);
    const chat = live ?? (await this.#open(chatId, undefined, await this.#storedRun(ref, context)));
    const run = chat.run;
    const tree = chat.tree;
    const gone = (why: string) => {
      this.#settle(chatId, chat);
      return json(409, 'NothingToResume', why);
    };
    if (!run || run.ended || !tree) return gone('the run waits on no operation');
    if (!(await tree.until(() => run.ended || tree.waitsOn(target, operation), CHILD_BACK_MS)) || run.ended) {
      return gone(`the subagent at '${target.slice(0, 200)}' is not back at its wait on operation '${operation.slice(0, 100)}'`);
    }
    let refused: string | undefined;
    // Refused by the parent (no call of its batch runs that child) or by the child (its operation's
    // schema), which takes it a moment later (it goes down through each level's call).
    const parent = chat.session.actor.on('event.rejected', (event) => event.event === 'operation.resume' && (refused = event.reason));
    const child = tree.listen((via, event) => via === target && event.type === 'event.rejected' && event.event === 'operation.resume' && (refused = event.reason));
    const from = run.length;
    try {
      chat.session.send({ type: 'operation.resume', operation, payload, target });
      await tree.until(() => refused !== undefined || run.ended || !tree.waitsOn(target, operation), CHILD_BACK_MS);
    } finally {
      parent.unsubscribe();
      child();
    }
    if (refused !== undefined) {
      this.#settle(chatId, chat);
      return json(409, 'ResumeRefused', refused);
    }
    return this.#stream(run, from, 'continuing');
  }

  async #cancel(ref: ChatRef): Promise<Response> {
    const { key: chatId, name } = ref;
    const noRun = () => json(409, 'NoRunInFlight', `chat '${shown(name)}' has no run in flight`);
    return this.#serial(chatId, async () => {
      const read = await this.#read(ref);
      if (!read) return notFound(name);
      let stored: StoredRun | undefined;
      if (!read.live) {
        if (!runInFlight(read.context.brain)) return noRun();
        stored = await this.#storedRun(ref, read.context);
      }
      const chat = await this.#open(chatId, undefined, stored);
      if (!chat.run || chat.run.ended) {
        this.#settle(chatId, chat);
        return noRun();
      }
      chat.session.send({ type: 'cancel', graceMs: 0 });
      return new Response(null, { status: 202 });
    });
  }

  async #messages(ref: ChatRef): Promise<Response> {
    const { key: chatId, name, report } = ref;
    const read = await this.#read(ref);
    if (!read) return notFound(name);
    const { live, context } = read;
    const { history, pending } = context.brain.context;
    // A live session's decisions reach the trace with its next stored step: stored first, so a
    // denial its history shows is read. A write that fails fails the run, whose streams say so.
    await live?.session.flush().catch(() => {});
    const facts = await readTraceFacts(this.#store, chatId);
    // The run in flight shows its user message; its reply (its subagents' steps too) is what its stream replays.
    const opened = runInFlight(context.brain) ? facts.opened.filter(({ run }) => run < context.runIndex) : facts.opened;
    const children = await new StoredSubagents(this.#store, context.scope, report).childrenOf(chatId, history, { ...facts, opened });
    const shownTo = { version: this.#settings.aiSdk, chat: chatId, answers: facts.answers, replies: facts.replies, asked: facts.asked, children };
    const messages = toUIMessages([...history, ...pending.slice(0, 1)], shownTo);
    return new Response(JSON.stringify({ messages }), { headers: { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' } });
  }

  /** A response that follows `run` from log position `from`, for a page that continues its message or builds it from this response (`audience`). */
  #stream(run: ChatRun, from: number, audience: Audience): Response {
    let stream: SseStream | undefined;
    const sink = new FetchSink(() => stream && run.detach(stream));
    stream = run.attach(sink, from, audience);
    return new Response(sink.body, { status: 200, headers: STREAM_HEADERS });
  }

  /** Tells `onError` of an error the request survives (what the reporter throws is ignored). */
  #reporter(request: Request): (error: unknown) => void {
    return (error) => {
      try {
        this.#onError(error, request);
      } catch {
        // A reporter that throws does not change the answer.
      }
    };
  }

  /**
   * What the store says of the chat's run in flight (`context`, stored), read before the chat is
   * opened from the store: the answers of the run's calls, the stored steps of their subagents.
   */
  async #storedRun({ key: chatId, report }: ChatRef, context: AgentContext): Promise<StoredRun> {
    const facts = await readTraceFacts(this.#store, chatId, { run: context.runIndex });
    const reader = new StoredSubagents(this.#store, context.scope, report);
    // The run's replies after its user message: what its stream seeds (`#follow`), call for call.
    const children = await reader.childrenOf(chatId, context.brain.context.pending.slice(1), facts, context);
    return { answers: facts.answers, children };
  }

  /**
   * The chat as this request reads it: its live session (when this process holds it) and its
   * context; undefined when there is no chat, or it is not of the caller's scope. `#admit` found
   * the chat of that scope or none at all, but the chat may have been made since (another
   * caller's POST of the same id while the admission's read was under way): the scope is
   * checked again on the very context the request reads or acts on.
   */
  async #read(ref: ChatRef): Promise<{ live: LiveChat | undefined; context: AgentContext } | undefined> {
    const live = this.#live.get(ref.key);
    const context = live ? live.session.actor.getSnapshot().context : await this.#stored(ref.key);
    if (!context || (ref.scope !== undefined && context.scope !== ref.scope)) return undefined;
    return { live, context };
  }

  /** The stored session's context, or undefined when there is none. */
  async #stored(chatId: string): Promise<AgentContext | undefined> {
    const stored = await this.#store.load(chatId);
    return stored && decodeRow(chatId, stored.state, stored.messages);
  }

  /**
   * The chat's live session, opened from the store (a run in flight there continues) when this
   * process has none; `stored`: what the store says of the run in flight (the answers of its
   * calls, its subagents' steps), for its stream to show it as its pages saw it.
   */
  async #open(chatId: string, scope?: string, stored?: StoredRun): Promise<LiveChat> {
    const existing = this.#live.get(chatId);
    if (existing) {
      if (scope !== undefined && existing.session.actor.getSnapshot().context.scope !== scope) throw new SessionScopeError(chatId);
      return existing;
    }
    const chat: LiveChat = { session: undefined as never, run: null, settling: false, tree: null };
    chat.session = await DurableSession.open({
      machine: this.#machine,
      store: this.#store,
      sessionId: chatId,
      ...(scope !== undefined && { scope }),
      attach: (actor) => this.#follow(chatId, chat, actor, stored),
    });
    this.#live.set(chatId, chat);
    return chat;
  }

  /**
   * Listens to the session's actor before it starts: a run picked up from the store shows what it
   * stored first, the results its batch in progress has (a tool policy's denial among them) too.
   */
  #follow(chatId: string, chat: LiveChat, actor: AgentActor, stored?: StoredRun): void {
    const context = actor.getSnapshot().context;
    const tree = new SubagentTree(chatId, actor, {
      event: (via, event) => chat.run?.childEvent(via, event),
      changed: () => {
        if (chat.run && !chat.run.ended && tree.waits()) this.#settle(chatId, chat);
      },
    });
    chat.tree = tree;
    if (runInFlight(context.brain)) {
      const run = this.#newRun(chatId, context.runIndex, stored?.answers);
      const { pending, turnsTaken } = context.brain.context;
      // The batch's limit on calls is the agent's: a call past it shows no result until the batch ends.
      const batch = batchResults(context, Number.MAX_SAFE_INTEGER).flatMap(({ result }) => (result ? [result] : []));
      run.seed(run.chunker.fromMessages([...pending.slice(1), ...batch], turnsTaken, stored?.children));
      chat.run = run;
    }
    actor.on('*', (event: AgentEmitted) => {
      if (event.type === 'run.started') chat.run = this.#newRun(chatId, event.run);
      tree.rootEvent(event);
      chat.run?.event(event);
      if (event.type === 'run.finished') {
        chat.run?.close(event.output);
        this.#settle(chatId, chat);
      }
    });
    actor.subscribe({
      next: () => {
        if (chat.run && !chat.run.ended && tree.waits()) this.#settle(chatId, chat);
      },
      error: (error) => this.#failed(chatId, chat, error),
      complete: () => this.#failed(chatId, chat, new Error('the session stopped')),
    });
  }

  #newRun(chatId: string, run: number, answers?: Answers): ChatRun {
    return new ChatRun(new RunChunker(this.#settings.aiSdk, run, chatId, answers), this.#settings.live, () => this.#dropped++);
  }

  /**
   * Queues a look at the chat once the work in hand is done: a run that waits for someone ends
   * its responses, and a session with nothing running is let go, so the next request (from any
   * tab or process) opens it from the store.
   */
  #settle(chatId: string, chat: LiveChat): void {
    if (chat.settling) return;
    chat.settling = true;
    void this.#serial(chatId, async () => {
      chat.settling = false;
      if (this.#live.get(chatId) !== chat) return;
      if (chat.run && !chat.run.ended) {
        if (!chat.tree?.waits()) return;
        chat.run.close(null, chat.tree.pausedChildren());
      }
      await this.#letGo(chatId, chat, false);
    });
  }

  async #letGo(chatId: string, chat: LiveChat, ending: boolean): Promise<void> {
    if (this.#live.get(chatId) !== chat) return;
    this.#live.delete(chatId);
    // A run that waits for someone ends its responses `waiting`; one that goes on is followed again by a reattach.
    if (ending && chat.run && !chat.run.ended) {
      if (chat.tree?.waits()) chat.run.close(null, chat.tree.pausedChildren());
      else chat.run.interrupt('the server closed this response; the run goes on');
    }
    await chat.session.close().catch(() => {});
    chat.tree?.stop();
  }

  /** The session stopped under a run (a write failed: another process took the session): its responses end with the error. */
  #failed(chatId: string, chat: LiveChat, error: unknown): void {
    if (chat.run && !chat.run.ended) chat.run.fail(`the session stopped: ${(error as Error).message}`);
    chat.tree?.stop();
    if (this.#live.get(chatId) === chat) this.#live.delete(chatId);
  }

  #serial<T>(chatId: string, work: () => Promise<T>): Promise<T> {
    const before = this.#queues.get(chatId) ?? Promise.resolve();
    const next = before.then(work, work);
    const settled = next.catch(() => {});
    this.#queues.set(chatId, settled);
    void settled.then(() => this.#queues.get(chatId) === settled && this.#queues.delete(chatId));
    return next;
  }
}

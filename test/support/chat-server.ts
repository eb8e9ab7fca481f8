import { createServer, type IncomingHttpHeaders, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { afterAll, afterEach, beforeAll, expect } from 'vitest';

/**
 * A real HTTP server on 127.0.0.1 that speaks the Chat Completions streaming protocol the way
 * OpenAI does (role chunk, content deltas, tool calls split across chunks with arguments in
 * pieces, a finish_reason chunk, a usage chunk with empty `choices`, `data: [DONE]`).
 * Each request takes the next scripted behaviour from a queue, and every request is recorded so a
 * test can check what was sent (see `checkChatRequest`).
 */

export interface ScriptedToolCall {
  /** Defaults to call_<n>. */
  id?: string;
  name: string;
  /** A JSON string is sent as is (so it may be deliberately broken); an object is stringified. */
  arguments: string | Record<string, unknown>;
}

export interface ReplyScript {
  /** Content deltas, in order. */
  text?: string[];
  toolCalls?: ScriptedToolCall[];
  /** Pieces each call's arguments are split into (default 3). */
  argumentPieces?: number;
  /** Interleave the argument pieces of parallel calls instead of sending one call after another. */
  interleave?: boolean;
  /** Default: tool_calls when there are calls, else stop. `null` sends no finish chunk. */
  finishReason?: string | null;
  /** `null` sends no usage chunk. Default: counts derived from the reply. */
  usage?: { prompt_tokens: number; completion_tokens: number } | null;
  /** Send `data: [DONE]` (default true). */
  done?: boolean;
}

export interface WriteOptions {
  /** Pause between SSE frames (a slow drip). */
  delayMs?: number;
  /** Re-cut the byte stream into writes of this size, splitting lines (and UTF-8 sequences) anywhere. */
  writeSize?: number;
  /** Send a `: keep-alive` comment before every frame. */
  keepAlive?: boolean;
}

export type Behaviour =
  | ({ type: 'reply' } & ReplyScript & WriteOptions)
  | { type: 'error'; status: number; body?: string | Record<string, unknown>; headers?: Record<string, string> }
  /** Sends the headers and the first `afterBytes` bytes of the reply, then nothing, never ending. */
  | { type: 'stall'; afterBytes?: number; reply?: ReplyScript }
  /** Sends `afterFrames` good frames, then `raw` (default: a data line with cut-off JSON), then the rest. */
  | { type: 'malformed'; afterFrames?: number; raw?: string; reply?: ReplyScript }
  /** Sends exactly these SSE frames (each should end with a blank line). */
  | ({ type: 'frames'; frames: string[] } & WriteOptions)
  /** Answers with a non-streamed JSON completion, like a server that ignores `stream: true`. */
  | { type: 'json'; body: Record<string, unknown> }
  /** Destroys the socket after `afterFrames` frames, mid-stream. */
  | { type: 'disconnect'; afterFrames?: number; reply?: ReplyScript };

export interface RecordedRequest {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  /** The parsed JSON body (or the raw text when it did not parse). */
  body: unknown;
  /** The behaviour that answered it. */
  behaviour: Behaviour['type'] | 'unscripted';
  /** Set when the client hung up before the response was complete. */
  clientClosedEarly: boolean;
}

export interface ChatServer {
  /** Base URL to give a client, ending in /v1. */
  readonly baseURL: string;
  readonly requests: RecordedRequest[];
  enqueue(...behaviours: Behaviour[]): void;
  /** Behaviours not consumed yet. */
  readonly queued: number;
  close(): Promise<void>;
}

export const TEST_MODEL = 'test-model';

let completionCounter = 0;

/** The SSE frames a real server would send for `script`. Exported for benches and byte-level tests. */
export function replyFrames(script: ReplyScript, model = TEST_MODEL): string[] {
  const id = `chatcmpl-${++completionCounter}`;
  const created = 1_700_000_000;
  const chunk = (choices: unknown[], usage: unknown = null): string =>
    `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model, system_fingerprint: 'fp_local', choices, usage })}\n\n`;
  const delta = (d: Record<string, unknown>, finish: string | null = null): string =>
    chunk([{ index: 0, delta: d, logprobs: null, finish_reason: finish }]);

  const text = script.text ?? [];
  const calls = script.toolCalls ?? [];
  const frames: string[] = [];
  // OpenAI opens with the role; content is "" for text replies and null when tools follow.
  frames.push(delta({ role: 'assistant', content: text.length === 0 && calls.length > 0 ? null : '', refusal: null }));
  for (const piece of text) frames.push(delta({ content: piece }));

  const pieces = calls.map((call) =>
    split(typeof call.arguments === 'string' ? call.arguments : JSON.stringify(call.arguments), script.argumentPieces ?? 3),
  );
  const opener = (i: number): string => {
    const call = calls[i]!;
    return delta({
      tool_calls: [{ index: i, id: call.id ?? `call_${i}`, type: 'function', function: { name: call.name, arguments: '' } }],
    });
  };
  const argFrame = (i: number, piece: string): string => delta({ tool_calls: [{ index: i, function: { arguments: piece } }] });
  if (script.interleave) {
    calls.forEach((_, i) => frames.push(opener(i)));
    const longest = Math.max(0, ...pieces.map((p) => p.length));
    for (let k = 0; k < longest; k++) {
      pieces.forEach((p, i) => {
        if (k < p.length) frames.push(argFrame(i, p[k]!));
      });
    }
  } else {
    calls.forEach((_, i) => {
      frames.push(opener(i));
      for (const piece of pieces[i]!) frames.push(argFrame(i, piece));
    });
  }

  const finish = script.finishReason === undefined ? (calls.length > 0 ? 'tool_calls' : 'stop') : script.finishReason;
  if (finish !== null) frames.push(delta({}, finish));
  if (script.usage !== null) {
    const usage = script.usage ?? {
      prompt_tokens: 12,
      completion_tokens: text.length + pieces.reduce((n, p) => n + p.length, 0),
    };
    frames.push(chunk([], { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens }));
  }
  if (script.done !== false) frames.push('data: [DONE]\n\n');
  return frames;
}

/** Splits `text` into `n` roughly equal pieces (fewer when it is shorter than n). */
function split(text: string, n: number): string[] {
  if (text.length === 0) return [''];
  const size = Math.max(1, Math.ceil(text.length / Math.max(1, n)));
  const out: string[] = [];
  for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size));
  return out;
}

/**
 * The server for the suite (or `describe` block) it is called in: started before it, closed after
 * it, and after each test every scripted behaviour consumed and, unless `checkRequests` is false
 * (suites that send broken requests on purpose), every request one a real provider accepts.
 * Returns the server itself once started; touching it before then throws.
 */
export function useChatServer({ checkRequests = true }: { checkRequests?: boolean } = {}): ChatServer {
  let started: ChatServer | undefined;
  beforeAll(async () => {
    started = await startChatServer();
  });
  afterAll(() => started?.close());
  afterEach(() => {
    const server = started!;
    if (checkRequests) for (const r of server.requests) expect(checkChatRequest(r.body), JSON.stringify(r.body)).toEqual([]);
    expect(server.queued, 'unconsumed scripted behaviours').toBe(0);
    server.requests.length = 0;
  });
  return new Proxy({} as ChatServer, {
    get(_, key) {
      if (!started) throw new Error('useChatServer: the server starts in beforeAll; use it inside a hook or a test');
      const value: unknown = Reflect.get(started, key);
      return typeof value === 'function' ? value.bind(started) : value;
    },
  });
}

export async function startChatServer(): Promise<ChatServer> {
  const queue: Behaviour[] = [];
  const requests: RecordedRequest[] = [];
  const sockets = new Set<Socket>();

  const server: Server = createServer((req, res) => {
    void handle(req, res).catch(() => res.destroy());
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const raw = await readBody(req);
    let body: unknown = raw;
    try {
      body = JSON.parse(raw);
    } catch {
      // recorded as text
    }
    const path = req.url ?? '';
    if (req.method !== 'POST' || !path.endsWith('/chat/completions')) {
      sendJson(res, 404, { error: { message: `Unknown request URL: ${req.method} ${path}`, type: 'invalid_request_error' } });
      return;
    }
    const behaviour = queue.shift();
    const record: RecordedRequest = {
      method: req.method,
      path,
      headers: req.headers,
      body,
      behaviour: behaviour?.type ?? 'unscripted',
      clientClosedEarly: false,
    };
    requests.push(record);
    res.on('close', () => {
      if (!res.writableFinished) record.clientClosedEarly = true;
    });
    await respond(res, behaviour);
  }

  const address = await new Promise<AddressInfo>((resolve) => {
    server.listen(0, '127.0.0.1', () => resolve(server.address() as AddressInfo));
  });

  return {
    baseURL: `http://127.0.0.1:${address.port}/v1`,
    requests,
    enqueue: (...behaviours) => void queue.push(...behaviours),
    get queued() {
      return queue.length;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

async function respond(res: ServerResponse, behaviour: Behaviour | undefined): Promise<void> {
  if (behaviour === undefined) {
    // 418 is not retryable, so a test that sends more requests than it scripted fails loudly.
    sendJson(res, 418, { error: { message: 'chat-server: no scripted behaviour left for this request' } });
    return;
  }
  switch (behaviour.type) {
    case 'reply':
      startStream(res);
      await writeFrames(res, replyFrames(behaviour), behaviour);
      res.end();
      return;
    case 'frames':
      startStream(res);
      await writeFrames(res, behaviour.frames, behaviour);
      res.end();
      return;
    case 'error': {
      const body = behaviour.body ?? { error: { message: `scripted error ${behaviour.status}` } };
      res.writeHead(behaviour.status, {
        'content-type': typeof body === 'string' ? 'text/plain' : 'application/json',
        ...behaviour.headers,
      });
      res.end(typeof body === 'string' ? body : JSON.stringify(body));
      return;
    }
    case 'json':
      sendJson(res, 200, behaviour.body);
      return;
    case 'stall': {
      startStream(res);
      const bytes = Buffer.from(replyFrames(behaviour.reply ?? { text: ['Hel', 'lo'] }).join(''));
      res.write(bytes.subarray(0, behaviour.afterBytes ?? 0));
      return; // never ends; `close()` destroys the socket
    }
    case 'malformed': {
      startStream(res);
      const frames = replyFrames(behaviour.reply ?? { text: ['Hel', 'lo', ' world'] });
      const at = Math.min(behaviour.afterFrames ?? 2, frames.length);
      frames.splice(at, 0, behaviour.raw ?? 'data: {"id":"chatcmpl-bad","choices":[{"index":0,"delta":{"content":"oo\n\n');
      await writeFrames(res, frames, {});
      res.end();
      return;
    }
    case 'disconnect': {
      startStream(res);
      const frames = replyFrames(behaviour.reply ?? { text: ['Hel', 'lo', ' world'] });
      await writeFrames(res, frames.slice(0, behaviour.afterFrames ?? 2), {});
      // Let the frames leave before the reset so the client sees a mid-stream cut.
      await new Promise((r) => setTimeout(r, 10));
      res.destroy();
      return;
    }
  }
}

function startStream(res: ServerResponse): void {
  res.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache',
    connection: 'keep-alive',
  });
  res.flushHeaders();
}

async function writeFrames(res: ServerResponse, frames: string[], options: WriteOptions): Promise<void> {
  const { delayMs = 0, writeSize, keepAlive = false } = options;
  if (writeSize !== undefined) {
    const bytes = Buffer.from(frames.map((f) => (keepAlive ? `: keep-alive\n\n${f}` : f)).join(''));
    for (let i = 0; i < bytes.length && !res.destroyed; i += writeSize) {
      await write(res, bytes.subarray(i, i + writeSize));
      // A macrotask between writes so they tend to leave as separate TCP segments.
      await new Promise((r) => (delayMs > 0 ? setTimeout(r, delayMs) : setImmediate(r)));
    }
    return;
  }
  for (const frame of frames) {
    if (res.destroyed) return;
    if (keepAlive) await write(res, ': keep-alive\n\n');
    await write(res, frame);
    if (delayMs > 0) await new Promise((r) => setTimeout(r, delayMs));
  }
}

/** Writes with back-pressure, so a 5,000-frame stream does not buffer unboundedly. */
function write(res: ServerResponse, data: string | Buffer): Promise<void> {
  if (res.write(data)) return Promise.resolve();
  return new Promise((resolve) => {
    const done = (): void => {
      res.off('drain', done);
      res.off('close', done);
      resolve();
    };
    res.on('drain', done);
    res.on('close', done);
  });
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    req.on('data', (part: Buffer) => parts.push(part));
    req.on('end', () => resolve(Buffer.concat(parts).toString('utf8')));
    req.on('error', reject);
  });
}

const TOOL_NAME = /^[a-zA-Z0-9_-]{1,64}$/;

/**
 * Problems that would make a real provider reject this Chat Completions request body; empty when
 * it is valid. Checks what OpenAI enforces: roles and content types, tool_calls shape with JSON
 * `arguments`, every tool call answered by a tool message before the next turn and every tool
 * message answering a call of the assistant message right before it, non-empty `tools`.
 */
export function checkChatRequest(body: unknown): string[] {
  const problems: string[] = [];
  if (body === null || typeof body !== 'object') return ['body is not a JSON object'];
  const b = body as Record<string, unknown>;
  if (typeof b.model !== 'string' || b.model === '') problems.push('model is missing');
  if (b.tools !== undefined) {
    if (!Array.isArray(b.tools) || b.tools.length === 0) problems.push('tools must be a non-empty array when present');
    else
      b.tools.forEach((t: unknown, i) => {
        const fn = (t as { type?: unknown; function?: { name?: unknown; parameters?: unknown } } | null)?.function;
        if ((t as { type?: unknown }).type !== 'function' || !fn) problems.push(`tools[${i}] is not a function tool`);
        else if (typeof fn.name !== 'string' || !TOOL_NAME.test(fn.name)) problems.push(`tools[${i}] has an invalid name`);
        else if (fn.parameters === null || typeof fn.parameters !== 'object') problems.push(`tools[${i}].parameters is not an object`);
      });
  }
  if (!Array.isArray(b.messages) || b.messages.length === 0) {
    problems.push('messages must be a non-empty array');
    return problems;
  }
  let open = new Set<string>(); // calls of the last assistant message still waiting for a tool message
  const closeTurn = (at: number): void => {
    if (open.size > 0) problems.push(`messages[${at}]: tool calls ${[...open].join(', ')} have no tool message`);
    open = new Set();
  };
  b.messages.forEach((m: unknown, i) => {
    const msg = (m ?? {}) as Record<string, unknown>;
    switch (msg.role) {
      case 'system':
      case 'user':
        closeTurn(i);
        if (typeof msg.content !== 'string') problems.push(`messages[${i}] (${msg.role}): content must be a string`);
        break;
      case 'assistant': {
        closeTurn(i);
        const calls = msg.tool_calls;
        if (calls === undefined) {
          if (typeof msg.content !== 'string') problems.push(`messages[${i}] (assistant): content must be a string without tool_calls`);
          break;
        }
        if (msg.content !== null && typeof msg.content !== 'string') problems.push(`messages[${i}] (assistant): bad content`);
        if (!Array.isArray(calls) || calls.length === 0) {
          problems.push(`messages[${i}]: tool_calls must be a non-empty array`);
          break;
        }
        calls.forEach((c: unknown, j) => {
          const call = (c ?? {}) as { id?: unknown; type?: unknown; function?: { name?: unknown; arguments?: unknown } };
          if (typeof call.id !== 'string' || call.id === '') problems.push(`messages[${i}].tool_calls[${j}]: id missing`);
          else if (open.has(call.id)) problems.push(`messages[${i}].tool_calls[${j}]: duplicate id ${call.id}`);
          else open.add(call.id);
          if (call.type !== 'function') problems.push(`messages[${i}].tool_calls[${j}]: type must be "function"`);
          if (typeof call.function?.name !== 'string' || call.function.name === '') problems.push(`messages[${i}].tool_calls[${j}]: name missing`);
          if (typeof call.function?.arguments !== 'string') problems.push(`messages[${i}].tool_calls[${j}]: arguments must be a string`);
          else {
            try {
              JSON.parse(call.function.arguments);
            } catch {
              problems.push(`messages[${i}].tool_calls[${j}]: arguments is not valid JSON`);
            }
          }
        });
        break;
      }
      case 'tool':
        if (typeof msg.tool_call_id !== 'string' || !open.has(msg.tool_call_id)) {
          problems.push(`messages[${i}] (tool): tool_call_id ${String(msg.tool_call_id)} answers no open call of the preceding assistant message`);
        } else open.delete(msg.tool_call_id);
        if (typeof msg.content !== 'string') problems.push(`messages[${i}] (tool): content must be a string`);
        break;
      default:
        problems.push(`messages[${i}]: unknown role ${String(msg.role)}`);
    }
  });
  closeTurn(b.messages.length);
  return problems;
}

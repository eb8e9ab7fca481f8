import { once } from 'node:events';
import { createServer } from 'node:http';
import { expect } from 'vitest';
import { toNodeListener, type ChatHandler } from '../../src/http.js';
import { MemorySessionStore, type StoredSession } from '../../src/index.js';

/** What a test needs of one AI SDK version: its own transport (parsing and checking chunks) and readUIMessageStream. */
export interface Sdk {
  version: 5 | 6 | 7;
  DefaultChatTransport: new (options: { api: string; fetch: typeof fetch; body?: object }) => {
    sendMessages(options: { chatId: string; messages: unknown[]; trigger: 'submit-message'; messageId: undefined; abortSignal: AbortSignal | undefined }): Promise<ReadableStream<unknown>>;
    reconnectToStream(options: { chatId: string }): Promise<ReadableStream<unknown> | null>;
  };
  readUIMessageStream: (options: { stream: ReadableStream<unknown>; message?: unknown; onError?: (error: unknown) => void; terminateOnError?: boolean }) => AsyncIterable<UIMessage>;
  /** The version's check of a conversation a page loads (throws on a part its schema rejects). */
  validateUIMessages: (options: { messages: unknown[] }) => Promise<UIMessage[]>;
}

export interface UIMessage {
  id: string;
  role: string;
  metadata?: { run: number; outcome: string; usage?: { inputTokens: number; outputTokens: number } };
  parts: Array<{ type: string; text?: string; state?: string; toolCallId?: string; input?: unknown; output?: unknown; preliminary?: boolean; errorText?: string; approval?: { id: string; approved?: boolean; reason?: string }; data?: Record<string, unknown> }>;
}

export const nodeMajor = Number(process.versions.node.split('.')[0]);

export async function loadSdk(version: 5 | 6 | 7): Promise<Sdk> {
  const name = version === 5 ? 'ai' : version === 6 ? 'ai-v6' : 'ai-v7';
  const sdk = (await import(name)) as unknown as Omit<Sdk, 'version'>;
  return { version, DefaultChatTransport: sdk.DefaultChatTransport, readUIMessageStream: sdk.readUIMessageStream, validateUIMessages: sdk.validateUIMessages };
}

/** A page of one chat: the version's transport, talking to the handler through its own fetch (no socket). */
export function page(sdk: Sdk, handler: ChatHandler, chatId: string) {
  const direct = ((input: string | URL | Request, init?: RequestInit) => handler(new Request(new URL(String(input), 'http://127.0.0.1'), init))) as typeof fetch;
  const transport = new sdk.DefaultChatTransport({ api: 'http://127.0.0.1/api/chat', fetch: direct });
  const errors: string[] = [];
  /** The last state of the message a stream builds (from `message`, a continuation, when given). */
  const read = async (stream: ReadableStream<unknown>, message?: UIMessage): Promise<UIMessage> => {
    let last: UIMessage | undefined;
    for await (const m of sdk.readUIMessageStream({ stream, ...(message && { message: structuredClone(message) }), onError: (e) => errors.push(String((e as Error).message ?? e)) })) last = m;
    return last!;
  };
  return {
    errors,
    transport,
    read,
    /** POSTs the page's messages; the last one is new. */
    send: async (messages: unknown[], continuing?: UIMessage) =>
      read(await transport.sendMessages({ chatId, messages, trigger: 'submit-message', messageId: undefined, abortSignal: undefined }), continuing),
    post: (body: unknown) => direct('http://127.0.0.1/api/chat', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }),
    resume: async () => {
      const stream = await transport.reconnectToStream({ chatId });
      return stream && read(stream);
    },
  };
}

export const userMessage = (text: string, id = `u-${text.length}`) => ({ id, role: 'user', parts: [{ type: 'text', text }] });

/** The text of a message's text parts, joined. */
export const textOf = (message: UIMessage): string =>
  message.parts
    .filter((part) => part.type === 'text')
    .map((part) => part.text)
    .join('|');

/** `POST <api>/<chatId>/resume` with `body` as JSON (the page's answer to an operation that yields). */
export const resumeRequest = (handler: ChatHandler, chatId: string, body: unknown, init: RequestInit = {}) =>
  handler(new Request(`http://127.0.0.1/api/chat/${chatId}/resume`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body), ...init }));

/** A UI message stream response's chunks, as the page's transport parses them (server-sent events of JSON). */
export function chunksOf(response: Response): ReadableStream<unknown> {
  let buffer = '';
  return response.body!.pipeThrough(new TextDecoderStream()).pipeThrough(
    new TransformStream<string, unknown>({
      transform(text, controller) {
        buffer += text;
        const events = buffer.split('\n\n');
        buffer = events.pop()!;
        for (const event of events) {
          const data = event.split('\n').find((line) => line.startsWith('data: '))?.slice(6);
          if (data && data !== '[DONE]') controller.enqueue(JSON.parse(data));
        }
      },
    }),
  );
}

/** What a page loads: the stored conversation as UI messages (`GET <api>/<id>/messages`, which must answer 200). */
export async function reloadMessages(handler: ChatHandler, chatId: string): Promise<UIMessage[]> {
  const response = await handler(new Request(`http://127.0.0.1/api/chat/${chatId}/messages`));
  expect(response.status).toBe(200);
  return ((await response.json()) as { messages: UIMessage[] }).messages;
}

/** The parts as JSON carries them (a live part's undefined fields are not sent). */
export const plainParts = (parts: UIMessage['parts']): unknown => JSON.parse(JSON.stringify(parts));

/** The page's answer to every request it shows, as `addToolApprovalResponse({ id, approved, reason })` leaves the part. */
export const answered = (message: UIMessage, approved: boolean, reason?: string): UIMessage => ({
  ...message,
  parts: message.parts.map((part) =>
    part.state === 'approval-requested' ? { ...part, state: 'approval-responded', approval: { ...part.approval!, approved, ...(reason !== undefined && { reason }) } } : part,
  ),
});

/**
 * A memory store whose next `load` of one session, once armed, answers only when released (at
 * most 5 s): a race between two requests made the same every run (the read finds what was there
 * before, the other request writes meanwhile, then the answer arrives), as PostgreSQL's round trip
 * makes it now and then.
 */
export class LateStore extends MemorySessionStore {
  #armed: { sessionId: string; reached: () => void; release: Promise<void> } | null = null;

  /** Holds the next load of `sessionId` after it read the row; `reached` settles once one is held. */
  arm(sessionId: string): { reached: Promise<void>; release: () => void } {
    let release!: () => void;
    let reached!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const reachedOnce = new Promise<void>((resolve) => (reached = resolve));
    this.#armed = { sessionId, reached, release: Promise.race([released, new Promise<void>((resolve) => setTimeout(resolve, 5_000))]) };
    return { reached: reachedOnce, release };
  }

  override async load(sessionId: string): Promise<StoredSession | undefined> {
    const row = await super.load(sessionId);
    const armed = this.#armed;
    if (armed?.sessionId === sessionId) {
      this.#armed = null;
      armed.reached();
      await armed.release;
    }
    return row;
  }
}

/** `handler` on a `node:http` server of 127.0.0.1; `close` ends its connections, the server and the handler. */
export async function listenOn(handler: ChatHandler): Promise<{ port: number; api: string; close: () => Promise<void> }> {
  const server = createServer(toNodeListener(handler)).listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as { port: number }).port;
  return {
    port,
    api: `http://127.0.0.1:${port}/api/chat`,
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      await handler.close();
    },
  };
}

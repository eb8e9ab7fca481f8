import type { Readable, Writable } from 'node:stream';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { ErrorCode, JSONRPCMessageSchema, RequestIdSchema, type JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { LineReader, oversizedMessageId, type OversizedLine } from '../mcp/line-reader.js';
import { McpServerOptionsError } from './agents.js';
import { CallerSchema, STDIO_CALLER } from './caller-sessions.js';
import { createMcpServer, MCP_SERVER_KEYS, type AgentMcpServer, type McpServerOptions } from './server.js';
import { checkKnownKeys, parseOptions } from '../known-keys.js';

/**
 * The server end of MCP's stdio transport, with a bound on what one message may hold: a request
 * over `maxMessageBytes` is answered with an error and skipped as it streams in (never held whole),
 * and the connection stays. The SDK's own transport closes the connection at its buffer's limit.
 */
class BoundedStdioTransport implements Transport {
  onclose?: (() => void) | undefined;
  onerror?: ((error: Error) => void) | undefined;
  onmessage?: (<T extends JSONRPCMessage>(message: T) => void) | undefined;
  readonly #input: Readable;
  readonly #output: Writable;
  readonly #reader: LineReader;
  readonly #maxBytes: number;
  #closed = false;

  constructor(input: Readable, output: Writable, maxBytes: number) {
    this.#input = input;
    this.#output = output;
    this.#maxBytes = maxBytes;
    this.#reader = new LineReader(maxBytes);
  }

  readonly #onData = (chunk: Buffer | string): void =>
    this.#reader.push(
      typeof chunk === 'string' ? Buffer.from(chunk) : chunk,
      (line) => this.#received(line),
      (line) => this.#oversized(line),
    );
  readonly #onEnd = (): void => void this.close();
  readonly #onError = (error: Error): void => this.onerror?.(error);

  async start(): Promise<void> {
    this.#input.on('data', this.#onData);
    this.#input.once('end', this.#onEnd);
    this.#input.once('close', this.#onEnd);
    this.#input.on('error', this.#onError);
    this.#output.on('error', this.#onError);
  }

  send(message: JSONRPCMessage): Promise<void> {
    if (this.#closed) return Promise.resolve();
    return new Promise((resolve) => {
      if (this.#output.write(`${JSON.stringify(message)}\n`)) resolve();
      else this.#output.once('drain', resolve);
    });
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#input.off('data', this.#onData);
    this.#input.off('end', this.#onEnd);
    this.#input.off('close', this.#onEnd);
    this.#input.off('error', this.#onError);
    this.#reader.clear();
    this.onclose?.();
  }

  #received(line: string): void {
    if (line.trim() === '') return;
    let message: unknown;
    try {
      message = JSON.parse(line);
    } catch {
      void this.send({ jsonrpc: '2.0', id: null, error: { code: ErrorCode.ParseError, message: 'the message is not JSON' } } as unknown as JSONRPCMessage);
      return;
    }
    const checked = JSONRPCMessageSchema.safeParse(message);
    if (checked.success) return this.onmessage?.(checked.data);
    // The SDK drops a message it cannot read, request or not: a request whose id can be read is
    // answered, or its client waits for its own timeout. Anything else (a malformed response, whose
    // id is one of the client's own) is only reported.
    const id = requestIdOf(message);
    if (id === undefined) return this.onerror?.(new Error('a message that is not a valid JSON-RPC message was dropped'));
    const error = { code: ErrorCode.InvalidRequest, message: `the request is not a valid JSON-RPC message: ${truncate(z.prettifyError(checked.error), 1_000)}` };
    void this.send({ jsonrpc: '2.0', id, error } as unknown as JSONRPCMessage);
  }

  /** A request over the limit gets an error answer (when its id can be read from its ends); the stream goes on. */
  #oversized(line: OversizedLine): void {
    const id = oversizedMessageId(line);
    const error = { code: ErrorCode.InvalidRequest, message: `the message is ${line.bytes} bytes, over the limit of ${this.#maxBytes}` };
    void this.send({ jsonrpc: '2.0', id: id ?? null, error } as unknown as JSONRPCMessage);
  }
}

/** The id of what reads as a request (an object with a method and a string or whole-number id), or undefined. */
function requestIdOf(message: unknown): string | number | undefined {
  if (typeof message !== 'object' || message === null || Array.isArray(message) || !('method' in message) || !('id' in message)) return undefined;
  const id = RequestIdSchema.safeParse(message.id);
  return id.success ? id.data : undefined;
}

const truncate = (text: string, max: number): string => (text.length > max ? `${text.slice(0, max)}…` : text);

const StdioSettingsSchema = z.strictObject({
  /** The longest message the client may send, in bytes (default 4 MiB, the SDK's HTTP body limit). */
  maxMessageBytes: z.number().int().min(1024).max(2 ** 30).default(4 << 20),
  /** Where messages come from and go to; default this process's stdin and stdout. */
  stdin: z.custom<Readable>((value) => typeof (value as Readable | null)?.on === 'function', { error: 'stdin must be a readable stream' }).optional(),
  stdout: z.custom<Writable>((value) => typeof (value as Writable | null)?.write === 'function', { error: 'stdout must be a writable stream' }).optional(),
  /**
   * Who the one client is (see `McpConnectOptions`); default `'local'`. A stdio
   * server has one client, the one that started it, as the local user who can read the store's
   * file anyway: calls of a later process on the same store (the editor restarted the server)
   * continue and repeat the sessions of earlier ones. It is also their memory scope. Give each
   * user's server its own caller when one store serves several local users.
   */
  caller: CallerSchema.default(STDIO_CALLER),
});

/**
 * What `serveStdio` takes: the server's options, and the stdio stream limits.
 *
 * @example
 * ```ts
 * import type { StdioServeOptions } from 'loopchart/mcp-server';
 *
 * const options: StdioServeOptions = { agents: [{ agent: machine, name: 'helper', description: 'Helps.' }], maxMessageBytes: 1 << 20, caller: 'local' };
 * ```
 */
export interface StdioServeOptions extends McpServerOptions, z.input<typeof StdioSettingsSchema> {}

/** A server on stdio: `closed` settles once the client has gone and every call has ended. */
export interface StdioServing {
  server: AgentMcpServer;
  closed: Promise<void>;
  close(): Promise<void>;
}

/**
 * Serves agents over stdio, the transport Claude Desktop, Cursor and VS Code start a local MCP
 * server with: the process reads requests on stdin and answers on stdout (log to stderr only).
 * When the client closes stdin, the connection ends; `closed` settles once the calls in flight
 * have ended (cancelled, or with a store kept in it: see `onDisconnect`).
 *
 * @example
 * ```ts
 * import { createAgentMachine, openSessionStore } from 'loopchart';
 * import { serveStdio } from 'loopchart/mcp-server';
 * import { scriptedModel } from 'loopchart/testing';
 *
 * const store = await openSessionStore('.loopchart/mcp.db');
 * const helper = createAgentMachine({ model: scriptedModel([{ text: 'Done.' }]) });
 * // A restarted server continues the sessions of the one before (the one local caller, 'local').
 * const serving = await serveStdio({ agents: [{ agent: helper, name: 'helper', description: 'Does one task.' }], store });
 * await serving.closed;
 * await store.close();
 * ```
 */
export async function serveStdio(options: StdioServeOptions): Promise<StdioServing> {
  if (typeof options !== 'object' || options === null) throw new McpServerOptionsError('options must be an object');
  const refuse = (message: string) => new McpServerOptionsError(message);
  checkKnownKeys(options, [...Object.keys(StdioSettingsSchema.shape), ...MCP_SERVER_KEYS], '', refuse);
  const { maxMessageBytes, stdin, stdout, caller, ...serverOptions } = options;
  const settings = parseOptions(StdioSettingsSchema, { maxMessageBytes, stdin, stdout, caller }, '', refuse);
  const server = createMcpServer(serverOptions);
  const transport = new BoundedStdioTransport(settings.stdin ?? process.stdin, settings.stdout ?? process.stdout, settings.maxMessageBytes);
  const gone = new Promise<void>((resolve) => {
    const previous = transport.onclose;
    transport.onclose = () => {
      previous?.();
      resolve();
    };
  });
  await server.connect(transport, { caller: settings.caller });
  const closed = gone.then(() => server.close());
  return { server, closed, close: () => server.close().then(() => closed) };
}

import { spawn, type ChildProcess } from 'node:child_process';
import { PassThrough } from 'node:stream';
import { getDefaultEnvironment } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { JSONRPCMessageSchema, type JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { endOnExit, killGroup } from './child-exit.js';
import { LineReader, oversizedIsRequest, oversizedMessageId, type OversizedLine } from './line-reader.js';

/*
 * The stdio transport loopchart starts MCP servers with, instead of the SDK's, for two things it
 * cannot do: the server runs in its own process group (so the server and whatever it started, an
 * `npx` wrapper's child say, are signalled together, on close and when this process exits), and
 * a message over the size limit fails the request it answers instead of closing the connection
 * (the SDK drops the connection at its 10 MB read buffer, and every later call finds it gone).
 */

/** The JSON-RPC error code of a request whose answer was over the size limit (a server-error code). */
export const RESULT_TOO_LARGE_CODE = -32_090;
/** The JSON-RPC error code of a request whose answer was not a valid JSON-RPC response. */
export const MALFORMED_ANSWER_CODE = -32_091;
const GRACE_MS = 2_000;

export interface StdioParams {
  command: string;
  args?: readonly string[] | undefined;
  env?: Record<string, string> | undefined;
  cwd?: string | undefined;
  /** The longest message the server may send, in bytes. */
  maxMessageBytes: number;
}

type RequestId = string | number;

export class GroupStdioTransport implements Transport {
  onclose?: (() => void) | undefined;
  onerror?: ((error: Error) => void) | undefined;
  onmessage?: (<T extends JSONRPCMessage>(message: T) => void) | undefined;
  /** The server's stderr, readable before the start. */
  readonly stderr = new PassThrough();
  readonly #params: StdioParams;
  readonly #reader: LineReader;
  /** Requests sent and not answered yet: an oversized answer is matched to one of them. */
  readonly #waiting = new Set<RequestId>();
  #child: ChildProcess | undefined;
  #release = (): void => {};

  constructor(params: StdioParams) {
    this.#params = params;
    this.#reader = new LineReader(params.maxMessageBytes);
  }

  get pid(): number | null {
    return this.#child?.pid ?? null;
  }

  start(): Promise<void> {
    if (this.#child) return Promise.reject(new Error('the MCP stdio transport is already started'));
    const { command, args = [], env, cwd } = this.#params;
    const child = spawn(command, [...args], {
      env: { ...getDefaultEnvironment(), ...env },
      ...(cwd !== undefined && { cwd }),
      stdio: ['pipe', 'pipe', 'pipe'],
      // Its own process group (POSIX): the group is what gets signalled.
      detached: process.platform !== 'win32',
      windowsHide: true,
    });
    this.#child = child;
    child.stderr?.pipe(this.stderr);
    child.stdout?.on('data', (chunk: Buffer) =>
      this.#reader.push(
        chunk,
        (line) => this.#received(line),
        (line) => this.#oversized(line),
      ),
    );
    child.stdout?.on('error', (error) => this.onerror?.(error));
    child.stdin?.on('error', (error) => this.onerror?.(error));
    // A server that failed (an error code, a signal) is gone, even while a process it started
    // holds its stdout open (the connection would look alive, and each call wait for its
    // timeout): the rest of its group goes too, which closes the pipes. A server that exits
    // with 0 may be a launcher whose child serves on the same pipes: left be.
    child.on('exit', (code, signal) => {
      if ((code !== 0 || signal !== null) && child.pid !== undefined) killGroup(child.pid, 'SIGKILL');
    });
    child.on('close', () => {
      this.#release();
      this.#child = undefined;
      this.onclose?.();
    });
    return new Promise((resolve, reject) => {
      child.once('error', (error) => {
        reject(error);
        this.onerror?.(error);
      });
      child.once('spawn', () => {
        if (child.pid !== undefined) this.#release = endOnExit(child.pid);
        resolve();
      });
    });
  }

  send(message: JSONRPCMessage): Promise<void> {
    const stdin = this.#child?.stdin;
    if (!stdin) return Promise.reject(new Error('Not connected'));
    if ('method' in message && 'id' in message) this.#waiting.add(message.id);
    // A cancelled request may never be answered.
    if ('method' in message && message.method === 'notifications/cancelled') this.#waiting.delete(message.params?.requestId as RequestId);
    return new Promise((resolve) => {
      if (stdin.write(`${JSON.stringify(message)}\n`)) resolve();
      else stdin.once('drain', resolve);
    });
  }

  /** stdin closed, then SIGTERM to the group, then SIGKILL, `GRACE_MS` apart (as the SDK's transport). */
  async close(): Promise<void> {
    const child = this.#child;
    this.#reader.clear();
    if (!child) return;
    const closed = new Promise<void>((resolve) => child.once('close', () => resolve()));
    const within = (ms: number) => Promise.race([closed.then(() => true), new Promise<boolean>((resolve) => setTimeout(() => resolve(false), ms).unref())]);
    child.stdin?.end();
    if (child.pid === undefined) return;
    const pid = child.pid;
    if (!(await within(GRACE_MS))) {
      killGroup(pid, 'SIGTERM');
      if (!(await within(GRACE_MS))) killGroup(pid, 'SIGKILL');
    }
    // What the server started may outlive it: the rest of the group goes too.
    killGroup(pid, 'SIGKILL');
  }

  /**
   * A line the server wrote, checked as the SDK's own transport does: what is not a JSON-RPC
   * message (a log line, `null`, a number) is reported to `onerror` and dropped, never thrown
   * from the stream's handler (which would end this process).
   */
  #received(line: string): void {
    let parsed: unknown;
    try {
      parsed = JSON.parse(line);
    } catch (error) {
      this.onerror?.(error as Error);
      return;
    }
    const checked = JSONRPCMessageSchema.safeParse(parsed);
    if (!checked.success) {
      // Meant as the answer to a request that waits: that request fails now, not at its timeout.
      const id = malformedAnswerId(parsed);
      if (id !== undefined && this.#waiting.delete(id)) {
        const message = `the server's answer is not a valid JSON-RPC response: ${line.length > 200 ? `${line.slice(0, 200)}…` : line}`;
        this.onmessage?.({ jsonrpc: '2.0', id, error: { code: MALFORMED_ANSWER_CODE, message } } as JSONRPCMessage);
        return;
      }
      this.onerror?.(new Error(`the MCP server wrote a line that is not a JSON-RPC message; it was dropped: ${line.slice(0, 200)}`));
      return;
    }
    const message = checked.data;
    if ('id' in message && !('method' in message) && message.id !== undefined) this.#waiting.delete(message.id);
    this.onmessage?.(message);
  }

  /** Answers the request the oversized message was for with an error, so that call fails and the connection stays. */
  #oversized(line: OversizedLine): void {
    const id = this.#answeredId(line);
    const { maxMessageBytes } = this.#params;
    if (id === undefined) {
      this.onerror?.(new Error(`the MCP server sent a message of ${line.bytes} bytes, over the limit of ${maxMessageBytes}, that answers no request; it was dropped`));
      return;
    }
    this.#waiting.delete(id);
    const error = { code: RESULT_TOO_LARGE_CODE, message: `the answer is ${line.bytes} bytes, over the limit of ${maxMessageBytes}`, data: { bytes: line.bytes, limit: maxMessageBytes } };
    this.onmessage?.({ jsonrpc: '2.0', id, error } as JSONRPCMessage);
  }

  #answeredId(line: OversizedLine): RequestId | undefined {
    // A log line or a request to the client is no answer: the call waiting goes on waiting for its own.
    if (oversizedIsRequest(line)) return undefined;
    const id = oversizedMessageId(line);
    if (id !== undefined && this.#waiting.has(id)) return id;
    // Not where servers put it: with one request waiting, it can only be that one's answer.
    return this.#waiting.size === 1 ? [...this.#waiting][0] : undefined;
  }
}

/** The id of a message that is no request or notification (no `method`) but names one: an answer, however malformed. */
function malformedAnswerId(parsed: unknown): RequestId | undefined {
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed) || 'method' in parsed) return undefined;
  const { id } = parsed as { id?: unknown };
  return typeof id === 'string' || typeof id === 'number' ? id : undefined;
}

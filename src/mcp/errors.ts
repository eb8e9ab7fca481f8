import { LoopchartError } from '../errors.js';

/**
 * An MCP server could not be started or did not complete the MCP handshake: the command was not
 * found, the process exited at once, the URL did not answer, or it took longer than the start
 * timeout. `stderr` holds the end of what a stdio server wrote to its stderr (often the reason).
 *
 * @example
 * ```ts
 * try {
 *   await mcpTools({ command: 'npx', args: ['-y', 'some-mcp-server'] });
 * } catch (error) {
 *   if (McpServerStartError.isInstance(error)) console.error(error.message, error.stderr);
 *   else throw error;
 * }
 * ```
 */
export class McpServerStartError extends LoopchartError {
  /** The server, as given (`command args…` or the URL). */
  readonly server: string;
  /** The last few KiB the server wrote to stderr before it failed ('' for an HTTP server). */
  readonly stderr: string;
  constructor(server: string, problem: string, stderr: string, options?: { cause?: unknown }) {
    super('McpServerStart', `MCP server ${server}: ${problem}${stderr ? `\nits stderr ends with:\n${stderr}` : ''}`, options);
    this.server = server;
    this.stderr = stderr;
  }
}

/**
 * A running MCP server failed a request other than a tool call: listing its tools (at a run's
 * start), or it is gone (exited, closed). A tool call that fails this way is the call's error
 * result instead, and the run goes on.
 *
 * @example
 * ```ts
 * const mcp = await mcpTools({ command: 'npx', args: ['-y', '@modelcontextprotocol/server-filesystem', './docs'] });
 * const outcome = (await runAgent({ model, toolSources: [mcp], prompt: 'List the docs.' })).outcome;
 * // a server that died between runs: outcome.type === 'Failed', the error's message names the server
 * ```
 */
export class McpServerError extends LoopchartError {
  readonly server: string;
  constructor(server: string, problem: string, options?: { cause?: unknown }) {
    super('McpServer', `MCP server ${server}: ${problem}`, options);
    this.server = server;
  }
}

/**
 * An MCP tool call did not produce a result: the server answered with `isError`, the call failed
 * on the wire, or the server exited during it. The tool runner turns it into the call's error
 * result (the model reads the message); the run goes on.
 *
 * @example
 * ```ts
 * const mcp = await mcpTools({ command: 'npx', args: ['-y', '@modelcontextprotocol/server-filesystem', './docs'] });
 * const { messages } = await runAgent({ model, toolSources: [mcp], prompt: 'Read missing.md.' });
 * // the tool message of that call: isError === true, content is the server's error text
 * ```
 */
export class McpToolError extends LoopchartError {
  readonly toolName: string;
  constructor(toolName: string, problem: string, options?: { cause?: unknown }) {
    super('McpTool', problem, options);
    this.toolName = toolName;
  }
}

/**
 * A tool result over `maxResultBytes` (see `mcpTools`), from a stdio or an HTTP server: the call
 * fails with this error (the model reads its message), the result is never held in memory, and
 * the connection stays usable.
 *
 * @example
 * ```ts
 * const mcp = await mcpTools({ command: 'npx', args: ['-y', '@modelcontextprotocol/server-filesystem', './logs'] }, { maxResultBytes: 1_000_000 });
 * try {
 *   await mcp.tools[0]!.execute({ path: 'big.log' }, ctx);
 * } catch (error) {
 *   if (McpResultTooLargeError.isInstance(error)) console.log(error.bytes, error.limit);
 * }
 * ```
 */
export class McpResultTooLargeError extends LoopchartError {
  readonly toolName: string;
  /**
   * The size of the answer, in bytes. Over HTTP without a Content-Length it is what was read
   * before the read stopped, a lower bound (`atLeast`).
   */
  readonly bytes: number;
  readonly limit: number;
  /** `bytes` is a lower bound: the answer's read was stopped at the limit. */
  readonly atLeast: boolean;
  constructor(toolName: string, server: string, bytes: number, limit: number, atLeast = false) {
    const size = atLeast ? `${bytes} bytes or more` : `${bytes} bytes`;
    super('McpResultTooLarge', `the MCP server ${server} answered tool "${toolName}" with ${size}, over the limit of ${limit} (maxResultBytes); the result was dropped`);
    this.atLeast = atLeast;
    this.toolName = toolName;
    this.bytes = bytes;
    this.limit = limit;
  }
}

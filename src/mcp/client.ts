import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { McpError, ToolSchema } from '@modelcontextprotocol/sdk/types.js';
import type { JsonSchemaType, JsonSchemaValidator, jsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/types.js';
import { statSync } from 'node:fs';
import { z } from 'zod';
import { InvalidConfigError } from '../errors.js';
import { parseOptions } from '../known-keys.js';
import { defineTool, type Tool, type ToolContext } from '../tools/define-tool.js';
import { InvalidToolError } from '../tools/errors.js';
import { MAX_SOURCE_NAME_CHARS, type ToolSource } from '../tools/tool-source.js';
import type { ToolDefinition } from '../model.js';
import { McpResultTooLargeError, McpServerError, McpServerStartError, McpToolError } from './errors.js';
import { CallResultSchema, resultText, type CallResult } from './result-text.js';
import { boundedFetch } from './http-limits.js';
import { GroupStdioTransport, RESULT_TOO_LARGE_CODE } from './stdio-transport.js';
import { MAX_TIMER_MS } from '../timer-bound.js';

/** A text spawn can pass: a NUL failed the start as if the handshake had ('did not complete the MCP handshake'). */
const SpawnText = z.string().refine((text) => !text.includes('\0'), { error: 'must not hold a NUL character' });

/** A server started as a child process, spoken to over its stdin and stdout. */
export const McpStdioServerSchema = z.strictObject({
  command: SpawnText.pipe(z.string().min(1)),
  args: z.array(SpawnText).optional(),
  /**
   * Added to the few variables the SDK passes on by default (PATH, HOME, USER, SHELL, TERM, LOGNAME).
   * A name with `=` (or none) would set another variable: `{ 'A=B': 'x' }` is the entry `A=B=x`.
   */
  env: z
    .record(z.string(), SpawnText)
    // On the record, not its keys: zod words a refused key as no more than 'Invalid key in record'.
    .refine((env) => Object.keys(env).every((name) => /^[^=\0]+$/.test(name)), { error: 'a variable name must be non-empty, without = or NUL' })
    .optional(),
  cwd: SpawnText.optional(),
});
/**
 * A server reached over Streamable HTTP. Its url, a text or a URL object, is held to http(s) (a
 * URL object of another scheme passed and failed the start) and to no user info: fetch cannot send
 * it, and the start error naming the server quoted it. The messages do not repeat the url.
 */
export const McpHttpServerSchema = z.strictObject({
  url: z
    .union([z.url({ protocol: /^https?$/ }), z.instanceof(URL)])
    // Zod runs these on a text the union refused too: that one is left to the union's own message.
    .refine((url) => !URL.canParse(String(url)) || /^https?:$/.test(new URL(String(url)).protocol), { error: 'must be an http(s) URL' })
    .refine((url) => !URL.canParse(String(url)) || (new URL(String(url)).username === '' && new URL(String(url)).password === ''), {
      error: 'must not contain credentials (user:password@): fetch cannot send them, and an error naming the server would show them',
    }),
});
export const McpServerSchema = z.union([McpStdioServerSchema, McpHttpServerSchema]);
export type McpServer = z.input<typeof McpServerSchema>;

export const McpToolsOptionsSchema = z.strictObject({
  /**
   * The handle's `name` as a tool source: what a run records as the source of each tool, so a
   * restored run calls it on this server wherever it stands in `toolSources`. Default: the name
   * the server gives itself in the MCP handshake, with the prefix (`filesystem (prefix fs_)`).
   * Give one when two handles would have the same default (one server twice, the same prefix).
   */
  name: z.string().min(1).max(MAX_SOURCE_NAME_CHARS).optional(),
  /**
   * Put before every tool name (`fs_` makes `read_file` `fs_read_file`), to keep several servers
   * apart. Up to 63 characters of a-z, A-Z, 0-9, _ or -: the tool names it starts are held to that
   * rule (1-64 of them), so any other prefix would leave every tool skipped.
   */
  prefix: z
    .string()
    .regex(/^[a-zA-Z0-9_-]{0,63}$/, 'must be up to 63 characters of a-z, A-Z, 0-9, _ or - (it starts every tool name, which providers hold to 1-64 of them)')
    .optional(),
  /**
   * Longest the start and the MCP handshake may take, in ms. Default 30 s. At most 2^31 - 1 (24.8
   * days, setTimeout's bound: a longer delay would fire at once).
   */
  startTimeoutMs: z.number().int().positive().max(MAX_TIMER_MS).optional(),
  /** Longest a tools/list request may take, in ms. Default 30 s. At most 2^31 - 1, as `startTimeoutMs`. */
  listTimeoutMs: z.number().int().positive().max(MAX_TIMER_MS).optional(),
  /** Each tool's `timeoutMs` (see `defineTool`); default the runner's default. */
  toolTimeoutMs: z.union([z.number().int().positive(), z.literal(Number.POSITIVE_INFINITY)]).optional(),
  /**
   * The longest message a server may send, in bytes (default 10 MiB): a stdio line, an HTTP JSON
   * answer or one event of an HTTP SSE stream. A tool result over it is that call's
   * `McpResultTooLargeError` (an error result for the model), never held in memory; the
   * connection stays. The body of an HTTP error status is cut to its first 4 KiB.
   */
  maxResultBytes: z.number().int().positive().optional(),
  /**
   * The most tools taken from one listing (default 128, what OpenAI accepts in one request): the
   * first this many well-formed tools are kept, the others skipped (in `skipped`).
   */
  maxTools: z.number().int().positive().optional(),
  /** The longest tool description taken, in characters (default 10,000): a longer one's tool is skipped. */
  maxDescriptionChars: z.number().int().positive().optional(),
  /**
   * The largest input or output schema taken, in bytes of its JSON (default 64 KiB): a tool
   * with a larger one is skipped.
   */
  maxSchemaBytes: z.number().int().positive().optional(),
});
export type McpToolsOptions = z.input<typeof McpToolsOptionsSchema>;

/** The tools of one MCP server, ready for an agent, and the way to stop the server. */
export interface McpTools extends ToolSource {
  /**
   * What a run records as the source of this handle's tools (see `ToolSource`): the `name`
   * option, else the server's own name from the handshake with the prefix; undefined when the
   * server gives no usable name (then a run records the handle's position in `toolSources`).
   */
  readonly name: string | undefined;
  /** The tools of the last listing (the first one made by `mcpTools`). */
  readonly tools: readonly Tool[];
  /**
   * Tools the server offers that could not be made into loopchart tools (a name providers reject,
   * an input schema that is malformed or uses what the validator cannot enforce, a description or
   * schema over its bound, a tool past `maxTools`), with the reason. The other tools work.
   */
  readonly skipped: readonly InvalidToolError[];
  /** Lists the server's tools again (what an agent does at each run's start, see `ToolSource`). */
  listTools(signal?: AbortSignal): Promise<readonly Tool[]>;
  /** The end of what a stdio server wrote to stderr (its log), '' for an HTTP server. */
  stderr(): string;
  /** Ends the connection and a stdio server's process group (stdin closed, then SIGTERM, then SIGKILL). Idempotent. */
  close(): Promise<void>;
}

/** `CallResultSchema` where the SDK takes its own result schema (typed as one of its two). */
const LOOSE_RESULT = CallResultSchema as unknown as Parameters<Client['callTool']>[1];

/** The `_meta` key of a tool call that carries its idempotency key (stable across retries and restores). */
export const IDEMPOTENCY_KEY_META = 'loopchart/idempotencyKey';
const DEFAULT_START_TIMEOUT_MS = 30_000;
const DEFAULT_LIST_TIMEOUT_MS = 30_000;
const DEFAULT_MAX_RESULT_BYTES = 10 * 1024 * 1024;
const DEFAULT_MAX_TOOLS = 128;
const DEFAULT_MAX_DESCRIPTION_CHARS = 10_000;
const DEFAULT_MAX_SCHEMA_BYTES = 64 * 1024;
/** setTimeout's longest delay: the SDK's own request timeout is left to the tool runner's. */
const NO_SDK_TIMEOUT_MS = MAX_TIMER_MS;
const STDERR_TAIL_CHARS = 4096;
/** A server that pages its tool list forever is refused, not followed. */
const MAX_LIST_PAGES = 100;

/**
 * Connects to an MCP server and makes its tools loopchart tools. A stdio server (`command`,
 * `args`, `env`, `cwd`) is started as a child process; an HTTP server (`url`) is reached with the
 * Streamable HTTP transport. Each tool's JSON Schema is what the model sees and what validates
 * its arguments; each call goes through the agent's tool runner and executor like any tool
 * (journaled, keyed, timed out, cancelled: the call's AbortSignal cancels the MCP request), and
 * its result becomes text. A server that never starts or exits at once rejects with
 * `McpServerStartError` (with its stderr tail). Needs `@modelcontextprotocol/sdk` installed.
 *
 * Give `tools` for a fixed list, or the handle itself as a tool source to list the tools again
 * at the start of every run (a server whose tools change between runs). Call `close()` when
 * done: it ends the server; a process that exits without it ends its stdio servers too (each
 * runs in its own process group, killed as a whole). A result over `maxResultBytes` (stdio or
 * HTTP) fails its call with `McpResultTooLargeError`; the connection stays.
 *
 * @example
 * ```ts
 * import { runAgent } from 'loopchart';
 * import { mcpTools } from 'loopchart/mcp';
 *
 * const fs = await mcpTools({ command: 'npx', args: ['-y', '@modelcontextprotocol/server-filesystem', './docs'] });
 * try {
 *   const { text } = await runAgent({ model, toolSources: [fs], prompt: 'What is in ./docs?' });
 *   console.log(text);
 * } finally {
 *   await fs.close();
 * }
 * ```
 */
export async function mcpTools(server: McpServer, options: McpToolsOptions = {}): Promise<McpTools> {
  // Strict, each against the schema of its kind (a `url` says HTTP): a misspelt key names the closest.
  const isHttp = typeof server === 'object' && server !== null && 'url' in server;
  const config: z.output<typeof McpServerSchema> = parseOptions(isHttp ? McpHttpServerSchema : McpStdioServerSchema, server, 'MCP server');
  const settings = parseOptions(McpToolsOptionsSchema, options, 'MCP options');
  if ('cwd' in config && config.cwd) checkFolder(config.cwd);
  const {
    prefix = '',
    startTimeoutMs = DEFAULT_START_TIMEOUT_MS,
    listTimeoutMs = DEFAULT_LIST_TIMEOUT_MS,
    toolTimeoutMs,
    maxResultBytes = DEFAULT_MAX_RESULT_BYTES,
    maxTools = DEFAULT_MAX_TOOLS,
  } = settings;
  const bounds: ListingBounds = {
    descriptionChars: settings.maxDescriptionChars ?? DEFAULT_MAX_DESCRIPTION_CHARS,
    schemaBytes: settings.maxSchemaBytes ?? DEFAULT_MAX_SCHEMA_BYTES,
  };

  const connection = await connect(config, { timeoutMs: startTimeoutMs, maxMessageBytes: maxResultBytes });
  const { client, label } = connection;
  let closed = false;

  const callTool = async (name: string, args: Record<string, unknown>, { signal, idempotencyKey }: ToolContext): Promise<string> => {
    if (closed) throw new McpToolError(name, `the MCP server ${label} was closed`);
    if (connection.exited()) throw new McpToolError(name, `the MCP server ${label} is not running (it exited or closed the connection)`);
    let result: CallResult;
    try {
      // The key goes along in `_meta`, for a server that deduplicates repeated calls.
      const params = { name, arguments: args, _meta: { [IDEMPOTENCY_KEY_META]: idempotencyKey } };
      // Read with loopchart's own result schema: the SDK's refuses a whole result for one content
      // block of a type it does not know. The SDK still checks structured content against the
      // tool's output schema.
      result = (await client.callTool(params, LOOSE_RESULT, { signal, timeout: NO_SDK_TIMEOUT_MS })) as CallResult;
    } catch (error) {
      // An abort is the runner's own doing (timeout, cancel): it has already settled the call.
      if (signal.aborted) throw error;
      const issues = zodIssues(error);
      if (issues) throw new McpToolError(name, `the MCP server ${label} answered with something that is not a tool result: ${issues}`, { cause: error });
      if (error instanceof McpError && error.code === RESULT_TOO_LARGE_CODE) {
        const { bytes, atLeast } = error.data as { bytes: number; atLeast?: boolean | undefined };
        throw new McpResultTooLargeError(name, label, bytes, maxResultBytes, atLeast === true);
      }
      throw new McpToolError(name, callFailure(label, connection, error), { cause: error });
    }
    if ('toolResult' in result) return JSON.stringify((result as { toolResult: unknown }).toolResult) ?? '';
    const { text, isError } = resultText(result);
    if (isError) throw new McpToolError(name, text || `tool "${name}" reported an error without text`);
    return text;
  };

  const toTool = (listed: ListedTool): Tool =>
    defineTool({
      name: `${prefix}${listed.name}`,
      description: listed.description ?? listed.title ?? '',
      inputSchema: listed.inputSchema,
      ...(toolTimeoutMs !== undefined && { timeoutMs: toolTimeoutMs }),
      execute: (args, ctx) => callTool(listed.name, args, ctx),
    });

  let tools: readonly Tool[] = [];
  let skipped: readonly InvalidToolError[] = [];
  const list = async (signal?: AbortSignal): Promise<readonly Tool[]> => {
    if (closed) throw new McpServerError(label, 'it was closed');
    if (connection.exited()) throw new McpServerError(label, `it is not running any more${stderrNote(connection.stderr())}`);
    let listed: unknown[];
    try {
      listed = await listAll(client, { ...(signal && { signal }), timeout: listTimeoutMs });
    } catch (error) {
      if (signal?.aborted) throw error;
      throw new McpServerError(label, `listing its tools failed: ${messageOf(error)}`, { cause: error });
    }
    // From here to rememberTools nothing awaits: a listing's output schemas are compiled together.
    connection.validators?.nextListing();
    const { made, valid, refused } = takeListing(client, listed, { maxTools, bounds, toTool });
    rememberTools(client, valid);
    tools = Object.freeze(made);
    skipped = Object.freeze(refused);
    return tools;
  };

  try {
    await list();
  } catch (error) {
    await connection.close();
    throw error;
  }

  const name = settings.name ?? defaultName(client.getServerVersion()?.name, prefix);
  return {
    name,
    get tools() {
      return tools;
    },
    get skipped() {
      return skipped;
    },
    listTools: list,
    // A tool a run recorded from an earlier listing: called by its name on the server, with the
    // recorded schema (the server answers a call to a tool it no longer has with its own error).
    toolFor: (definition: ToolDefinition) =>
      definition.name.startsWith(prefix)
        ? toTool({ name: definition.name.slice(prefix.length), description: definition.description, inputSchema: definition.inputSchema } as ListedTool)
        : undefined,
    stderr: connection.stderr,
    async close() {
      if (closed) return;
      closed = true;
      await connection.close();
    },
  };
}

type ListedTool = z.infer<typeof ToolSchema>;

/**
 * The tools of a listing this process takes, in the listing's order, and those it refuses, each
 * with why: past `maxTools`, over the listing bounds, a name listed twice, an output schema that
 * does not compile.
 */
function takeListing(
  client: Client,
  listed: readonly unknown[],
  { maxTools, bounds, toTool }: { maxTools: number; bounds: ListingBounds; toTool: (listed: ListedTool) => Tool },
): { made: Tool[]; valid: ListedTool[]; refused: InvalidToolError[] } {
  const made: Tool[] = [];
  const refused: InvalidToolError[] = [];
  const valid: ListedTool[] = [];
  const names = new Set<string>();
  for (const [index, entry] of listed.entries()) {
    try {
      // Past the count nothing is read but the name: a server listing 10,000 tools costs little.
      if (made.length >= maxTools) {
        throw new InvalidToolError(nameOf(entry, index), `the server lists more than maxTools (${maxTools}) tools; the first ${maxTools} are kept`);
      }
      const tool = listedTool(entry, index);
      checkBounds(tool, bounds);
      // A second tool of one name would make the agent's tool set refuse the whole listing.
      if (names.has(tool.name)) {
        throw new InvalidToolError(tool.name, 'the server lists this name more than once; the first tool of that name is kept');
      }
      checkOutputSchema(client, tool);
      made.push(toTool(tool));
      valid.push(tool);
      names.add(tool.name);
    } catch (error) {
      if (!InvalidToolError.isInstance(error)) throw error;
      refused.push(error);
    }
  }
  return { made, valid, refused };
}

/**
 * A handle's name when none is given: the server's name for itself (from the handshake), and the
 * prefix, which sets apart two handles of one server. Stable across deploys where a command line
 * is not (a path that moves, a token in an argument); undefined for a name that is empty, too
 * long or holds control characters.
 */
function defaultName(serverName: string | undefined, prefix: string): string | undefined {
  if (!serverName || /\p{Cc}/u.test(serverName)) return undefined;
  const name = prefix ? `${serverName} (prefix ${prefix})` : serverName;
  return name.length <= MAX_SOURCE_NAME_CHARS ? name : undefined;
}

/**
 * A tools/list page, each tool left unchecked: the SDK's `listTools` checks the whole page at
 * once, so one malformed tool would fail the listing; each is checked on its own (`listedTool`).
 */
const ListPageSchema = z.object({ tools: z.array(z.unknown()), nextCursor: z.string().optional() });

async function listAll(client: Client, options: { signal?: AbortSignal | undefined; timeout: number }): Promise<unknown[]> {
  const tools: unknown[] = [];
  let cursor: string | undefined;
  for (let page = 0; page < MAX_LIST_PAGES; page++) {
    const params = cursor === undefined ? {} : { cursor };
    const result = await client.request({ method: 'tools/list', params }, ListPageSchema, options);
    tools.push(...result.tools);
    cursor = result.nextCursor;
    if (cursor === undefined) return tools;
  }
  throw new Error(`the tool list did not end after ${MAX_LIST_PAGES} pages`);
}

const nameOf = (entry: unknown, index: number): string =>
  typeof (entry as { name?: unknown } | null)?.name === 'string' ? (entry as { name: string }).name.slice(0, 200) : `#${index}`;

/** The bounds one listed tool is held to (see `McpToolsOptions`). */
interface ListingBounds {
  descriptionChars: number;
  schemaBytes: number;
}

/**
 * An `InvalidToolError` for a tool over a bound: every run offers its description and input
 * schema to the model (and records them with the session), so one huge tool would fill the
 * context window and fail each run.
 */
function checkBounds(tool: ListedTool, bounds: ListingBounds): void {
  const description = tool.description ?? tool.title ?? '';
  if (description.length > bounds.descriptionChars) {
    throw new InvalidToolError(tool.name, `its description is ${description.length} characters, over maxDescriptionChars (${bounds.descriptionChars})`);
  }
  for (const [which, schema] of [
    ['input', tool.inputSchema],
    ['output', tool.outputSchema],
  ] as const) {
    if (schema === undefined) continue;
    const bytes = Buffer.byteLength(JSON.stringify(schema) ?? '', 'utf8');
    if (bytes > bounds.schemaBytes) {
      throw new InvalidToolError(tool.name, `its ${which} schema is ${bytes} bytes of JSON, over maxSchemaBytes (${bounds.schemaBytes})`);
    }
  }
}

/** One listed tool as the MCP schema describes it, or an `InvalidToolError` saying where it is not. */
function listedTool(entry: unknown, index: number): ListedTool {
  const parsed = ToolSchema.safeParse(entry);
  if (parsed.success) return parsed.data;
  const name = nameOf(entry, index);
  const problems = parsed.error.issues.map((issue) => `${['tool', ...issue.path.map(String)].join('.')}: ${issue.message}`);
  throw new InvalidToolError(name, `the server listed it in a form the MCP schema refuses: ${problems.join('; ')}`);
}

/**
 * Hands the well-formed tools to the SDK's client, as its own `listTools` does: it validates a
 * structured result against the tool's `outputSchema` and refuses a call to a task-only tool.
 */
function rememberTools(client: Client, tools: readonly ListedTool[]): void {
  const cache = (client as unknown as { cacheToolMetadata?: ((tools: readonly ListedTool[]) => void) | undefined }).cacheToolMetadata;
  if (typeof cache === 'function') cache.call(client, tools);
}

/**
 * An `InvalidToolError` for a tool whose `outputSchema` the SDK cannot compile (a type that is no
 * JSON type, a `$ref` to nowhere): the SDK compiles every output schema of a listing at once, so
 * one such tool would fail the whole listing. Compiled here one tool at a time, and the listing
 * compiles it again from the validator's cache.
 */
function checkOutputSchema(client: Client, tool: ListedTool): void {
  if (tool.outputSchema === undefined) return;
  try {
    rememberTools(client, [tool]);
  } catch (error) {
    throw new InvalidToolError(tool.name, `its output schema cannot be compiled: ${messageOf(error).slice(0, 500)}`, { cause: error });
  }
}

interface Connection {
  client: Client;
  label: string;
  /** The SDK client's output-schema validators (absent with an SDK before 1.22, which compiles its own). */
  validators: ListingValidators | undefined;
  /** True once the server is gone (a stdio child exited, the connection closed). */
  exited(): boolean;
  stderr(): string;
  close(): Promise<void>;
}

async function connect(server: z.output<typeof McpServerSchema>, limits: { timeoutMs: number; maxMessageBytes: number }): Promise<Connection> {
  const { timeoutMs, maxMessageBytes } = limits;
  const validators = await ListingValidators.create();
  const client = new Client({ name: 'loopchart', version: '1' }, validators ? { jsonSchemaValidator: validators } : {});
  let gone = false;
  let tail = '';
  let transport: Transport;
  let label: string;
  if ('command' in server) {
    label = `"${[server.command, ...(server.args ?? [])].join(' ')}"`;
    const stdio = new GroupStdioTransport({
      command: server.command,
      ...(server.args && { args: server.args }),
      ...(server.env && { env: server.env }),
      ...(server.cwd && { cwd: server.cwd }),
      maxMessageBytes,
    });
    // Read as it comes (a full pipe would block the server), keep the end for error messages.
    stdio.stderr.on('data', (chunk: Buffer) => {
      tail = (tail + chunk.toString('utf8')).slice(-STDERR_TAIL_CHARS);
    });
    transport = stdio;
  } else {
    // Its origin and path only: a query may hold a key (`?key=…`), and the label is in every error,
    // a tool's included, which the model reads and the session stores.
    const url = new URL(String(server.url));
    label = `${url.origin}${url.pathname}`;
    transport = new StreamableHTTPClientTransport(new URL(String(server.url)), { fetch: boundedFetch(maxMessageBytes) });
  }
  client.onclose = () => {
    gone = true;
  };
  const close = async (): Promise<void> => {
    try {
      await client.close();
    } finally {
      gone = true;
    }
  };
  try {
    await client.connect(transport, { timeout: timeoutMs });
  } catch (error) {
    await close().catch(() => {});
    // The last of stderr may still be in the pipe when the exit is seen.
    await new Promise((resolve) => setTimeout(resolve, 20));
    throw new McpServerStartError(label, startFailure(error, timeoutMs), tail.trim(), { cause: error });
  }
  return { client, label, validators, exited: () => gone, stderr: () => tail, close };
}

/**
 * The validators of the tools' output schemas, one set per listing. The SDK's default validator
 * compiles into one Ajv instance that keeps every schema it compiled, by object and by `$id`: a
 * handle listed at every run's start grew by every listing (150 KB a listing of 50 tools), and a
 * schema that changed under the same `$id` was still checked against the first one. Here each
 * listing compiles into a fresh instance, reusing the last listing's validator for a schema that
 * did not change, so what is kept is what the last listing uses.
 */
class ListingValidators implements jsonSchemaValidator {
  readonly #make: () => jsonSchemaValidator;
  #compiler: jsonSchemaValidator;
  #last = new Map<string, JsonSchemaValidator<unknown>>();
  #current = new Map<string, JsonSchemaValidator<unknown>>();

  private constructor(make: () => jsonSchemaValidator) {
    this.#make = make;
    this.#compiler = make();
  }

  /** Undefined with an SDK that has no pluggable validator (before 1.22). */
  static async create(): Promise<ListingValidators | undefined> {
    try {
      const { AjvJsonSchemaValidator } = await import('@modelcontextprotocol/sdk/validation/ajv-provider.js');
      return new ListingValidators(() => new AjvJsonSchemaValidator());
    } catch {
      return undefined;
    }
  }

  /** A new listing: the validators of the one before are kept only where its schemas come again. */
  nextListing(): void {
    this.#last = this.#current;
    this.#current = new Map();
    this.#compiler = this.#make();
  }

  getValidator<T>(schema: JsonSchemaType): JsonSchemaValidator<T> {
    const key = JSON.stringify(schema);
    const validator = this.#current.get(key) ?? this.#last.get(key) ?? this.#compiler.getValidator(schema);
    this.#current.set(key, validator);
    return validator as JsonSchemaValidator<T>;
  }
}

/**
 * A stdio server's `cwd` is a folder, checked before it starts: spawn reports a missing one as
 * ENOENT, which read as 'the command was not found' (the command was there).
 */
function checkFolder(cwd: string): void {
  let folder = false;
  try {
    folder = statSync(cwd).isDirectory();
  } catch {
    // Not there, or not readable: no folder to start in either way.
  }
  if (!folder) throw new InvalidConfigError(`MCP server: cwd: no folder at ${cwd}`);
}

function startFailure(error: unknown, timeoutMs: number): string {
  const message = messageOf(error);
  if ((error as { code?: unknown }).code === 'ENOENT') return `the command was not found (${message})`;
  if (/timed out|timeout/i.test(message)) return `no answer to the MCP handshake within ${timeoutMs} ms`;
  if (/connection closed/i.test(message)) return 'it exited before completing the MCP handshake';
  return `it did not complete the MCP handshake: ${message}`;
}

function callFailure(label: string, connection: Connection, error: unknown): string {
  if (connection.exited()) return `the MCP server ${label} exited or closed the connection during the call`;
  return messageOf(error);
}

const stderrNote = (tail: string): string => (tail.trim() ? `; its stderr ends with:\n${tail.trim()}` : '');

/** A schema error's issues on one line (`content: expected array, received string`), or undefined for any other error. */
function zodIssues(error: unknown): string | undefined {
  const issues = (error as { issues?: unknown } | null)?.issues;
  if (!(error instanceof Error) || !Array.isArray(issues)) return undefined;
  const text = (issues as { path?: unknown[] | undefined; message?: unknown }[])
    .map(({ path = [], message }) => `${path.length ? `${path.map(String).join('.')}: ` : ''}${String(message)}`)
    .join('; ')
    .replace(/\s+/g, ' ');
  return text.length > 500 ? `${text.slice(0, 500)}…` : text;
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

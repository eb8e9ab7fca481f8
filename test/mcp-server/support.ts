import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ElicitRequestSchema, type ElicitResult } from '@modelcontextprotocol/sdk/types.js';
import { MemorySessionStore, type SessionStore } from '../../src/index.js';
import { toNodeListener } from '../../src/http.js';
import { createMcpHandler, type McpHandler, type McpHandlerOptions } from '../../src/mcp-server.js';
import { afterAll, beforeAll } from 'vitest';
import { bundledCommand, type NodeCommand } from '../sessions/fixtures/processes.js';
import { AGENTS } from './fixtures/agents.js';

export const STDIO_SERVER = fileURLToPath(new URL('./fixtures/stdio-server.ts', import.meta.url));

export function scratchDir(): { dir: string; remove: () => void } {
  const dir = mkdtempSync(join(tmpdir(), 'loopchart-mcp-server-'));
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

export interface ServedHttp {
  url: URL;
  handler: McpHandler;
  store: MemorySessionStore;
  close(): Promise<void>;
}

/** The fixture agents behind createMcpHandler on a port of 127.0.0.1, with a store of their own. */
export async function serveHttp(options: Partial<McpHandlerOptions> = {}): Promise<ServedHttp> {
  const store = new MemorySessionStore();
  const handler = createMcpHandler({ agents: AGENTS, store, ...options });
  const server = createServer(toNodeListener(handler));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: new URL(`http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`),
    handler,
    store,
    async close() {
      await handler.close();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/**
 * An SDK client; with `answer` it declares form elicitation and answers each approval with it
 * (what a person clicks in Claude Desktop's dialog), and records the questions it was asked.
 */
export function client(answer?: (message: string) => ElicitResult): { client: Client; asked: string[] } {
  const asked: string[] = [];
  const made = new Client({ name: 'test-client', version: '1' }, answer ? { capabilities: { elicitation: { form: {} } } } : {});
  if (answer) {
    made.setRequestHandler(ElicitRequestSchema, (request) => {
      asked.push(request.params.message);
      return answer(request.params.message);
    });
  }
  return { client: made, asked };
}

/** A fixture server's process on a SQLite file, with a client connected to it over stdio. */
export interface StdioServerProcess {
  client: Client;
  /** The questions the client was asked (with an `answer`: see `client`). */
  asked: string[];
  pid: number;
  /** What the process wrote to stderr so far (the fixtures log what they did there). */
  stderr(): string;
}

/**
 * For a test file whose tests kill and restart a fixture server (`fixture`, a module path): the
 * fixture is bundled once for the file and disposed of after it, with a scratch folder for the
 * SQLite files; `start` runs a process of it on `db` with `env` and connects a client.
 */
export function useStdioServer(fixture: string) {
  const scratch = scratchDir();
  let server: NodeCommand | undefined;
  beforeAll(async () => {
    server = await bundledCommand(fixture);
  });
  afterAll(() => {
    server?.dispose();
    scratch.remove();
  });
  return {
    /** Where the file's databases go: `join(dir, 'name.db')`. */
    dir: scratch.dir,
    async start(db: string, env: Record<string, string> = {}, answer?: (message: string) => ElicitResult): Promise<StdioServerProcess> {
      const made = client(answer);
      const transport = new StdioClientTransport({ command: process.execPath, args: [...server!.args, db], env: { PATH: process.env.PATH ?? '', ...env }, stderr: 'pipe' });
      let stderr = '';
      transport.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      await made.client.connect(transport);
      return { ...made, pid: transport.pid!, stderr: () => stderr };
    },
  };
}

/** Waits until `check` holds, polling every 20 ms, at most `ms`. */
export async function until(check: () => boolean | Promise<boolean>, ms = 10_000): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await check()) return true;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return check();
}

/**
 * The id of a session of `tool` the store holds that is not in `known` (the ids there before the
 * call), once there is one, at most `ms`: a call's session id is the server's to choose.
 */
export async function newSessionOf(store: SessionStore, tool: string, known: ReadonlySet<string> = new Set(), ms = 10_000): Promise<string> {
  let found: string | undefined;
  await until(async () => {
    found = (await store.list()).map((s) => s.sessionId).find((id) => id.startsWith(`mcp/${tool}/`) && !known.has(id));
    return found !== undefined;
  }, ms);
  if (found === undefined) throw new Error(`no new session of '${tool}' in the store within ${ms} ms`);
  return found;
}

export const sessionIds = async (store: SessionStore): Promise<Set<string>> => new Set((await store.list()).map((s) => s.sessionId));

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

/** The session a call of `caller` to `tool` naming `name` runs in: the server keeps client names in its namespace. */
export const namedSessionId = (tool: string, caller: string, name: string): string =>
  `mcp/${tool}/${sha256(JSON.stringify(['caller', caller])).slice(0, 24)}/name-${sha256(name).slice(0, 32)}`;

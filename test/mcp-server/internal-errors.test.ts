/**
 * What an MCP client reads of a failure that is not its own doing, over Streamable HTTP on
 * 127.0.0.1 (createMcpHandler behind toNodeListener, the SDK's own client), with a real SQLite
 * file behind a store whose reads or writes throw what a database driver reports: an error
 * holding a connection string with its password. Before, the call's JSON-RPC error carried the
 * store's message (and a throwing `prompt` function's) to the client; now it reads a fixed
 * sentence and a reference, and the error is on the server's stderr (console.error) under it.
 * The caller's own errors (bad arguments) and a run's own outcome (a Failed run's message, the
 * agent's answer) are answered as before. The stdio side: internal-errors.process.test.ts.
 */
import { join } from 'node:path';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ErrorCode, McpError, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { createAgentMachine } from '../../src/index.js';
import type { McpAgent } from '../../src/mcp-server.js';
import { SqliteSessionStore } from '../../src/sqlite.js';
import type { SessionStore } from '../../src/stores/session-store.js';
import { scriptedModel } from '../../src/testing.js';
import { AGENTS } from './fixtures/agents.js';
import { client, scratchDir, serveHttp, type ServedHttp } from './support.js';

const SECRET = 'postgres://admin:hunter2-s3cret@db.internal:5432/prod';
const scratch = scratchDir();
let sqlite: SqliteSessionStore;

/** The SQLite store, whose calls named in `failing` throw what a driver would: an error holding the secret. */
function failingStore(inner: SessionStore, failing: Set<string>): SessionStore {
  const store = Object.create(inner) as SessionStore;
  for (const name of ['load', 'apply'] as const) {
    const call = (inner[name] as (...args: unknown[]) => Promise<unknown>).bind(inner);
    (store as unknown as Record<string, unknown>)[name] = async (...args: unknown[]) => {
      if (failing.has(name)) throw new Error(`connection to ${SECRET} refused`);
      return call(...args);
    };
  }
  return store;
}

/** Everything written to console.error meanwhile (what the server reports), as one text. */
function reports() {
  const spy = vi.spyOn(console, 'error').mockImplementation(() => {});
  return { text: () => spy.mock.calls.map((call) => call.map((part) => (part instanceof Error ? part.message : String(part))).join(' ')).join('\n') };
}

/** The reference an answer names (8 hex digits). */
const referenceIn = (message: string): string => /reference ([0-9a-f]{8})\b/.exec(message)?.[1] ?? 'none';
const text = (result: CallToolResult) => (result.content[0] as { text: string }).text;

/** An agent whose `prompt` function throws what a product's lookup might: the secret. */
const leaky: McpAgent = {
  agent: createAgentMachine({ model: scriptedModel([{ text: 'never' }]) }),
  name: 'leaky',
  description: 'Its prompt function throws.',
  input: z.object({ task: z.string() }),
  prompt: () => {
    throw new Error(`lookup failed at ${SECRET}`);
  },
};
/** An agent whose run fails: its outcome (the model's refusal) is the answer the caller reads. */
const refusing: McpAgent = {
  agent: createAgentMachine({ model: scriptedModel([{ error: { message: 'the model refused: the task breaks policy 7', status: 400, retryable: false } }]) }),
  name: 'refusing',
  description: 'Its run fails.',
};

const failing = new Set<string>();
let served: ServedHttp;
beforeAll(async () => {
  sqlite = new SqliteSessionStore({ path: join(scratch.dir, 'mcp.db') });
  served = await serveHttp({ agents: [...AGENTS, leaky, refusing], store: failingStore(sqlite, failing) });
});
afterEach(() => {
  failing.clear();
  vi.restoreAllMocks();
});
afterAll(async () => {
  await served?.close();
  await sqlite?.close();
  scratch.remove();
});

/** One call over a new connection, answered with its result or the error it failed with. */
async function call(name: string, args: Record<string, unknown>): Promise<CallToolResult | McpError> {
  const { client: mcp } = client();
  await mcp.connect(new StreamableHTTPClientTransport(served.url));
  try {
    return (await mcp.callTool({ name, arguments: args }, undefined, { timeout: 10_000 }).catch((error: unknown) => error)) as CallToolResult | McpError;
  } finally {
    await mcp.close();
  }
}

describe('a failure that is not the caller own, over HTTP', () => {
  for (const [what, fails] of [
    ['a store read', 'load'],
    ['a store write', 'apply'],
  ] as const) {
    it(`${what} that throws: the client reads a sentence and a reference, the server reports the error under it`, async () => {
      const reported = reports();
      failing.add(fails);
      const answer = await call('echo', { task: 'pear' });
      expect(answer).toBeInstanceOf(McpError);
      const { code, message } = answer as McpError;
      expect(code).toBe(ErrorCode.InternalError);
      expect(message).not.toContain('hunter2');
      expect(message).toMatch(/the MCP server failed to answer the call \(reference [0-9a-f]{8}\)/);
      expect(reported.text()).toContain(`reference ${referenceIn(message)}`);
      expect(reported.text()).toContain(SECRET);
      // The server goes on serving once the store is back.
      failing.clear();
      expect(text((await call('echo', { task: 'pear' })) as CallToolResult)).toBe('echo: pear (pear is a word)');
    });
  }

  it("a prompt function that throws: the same, the tool's name in the server's report", async () => {
    const reported = reports();
    const answer = await call('leaky', { task: 'x' });
    expect(answer).toBeInstanceOf(McpError);
    const { message } = answer as McpError;
    expect(message).not.toContain('hunter2');
    expect(referenceIn(message)).not.toBe('none');
    expect(reported.text()).toMatch(new RegExp(`the prompt function of 'leaky' failed \\(reference ${referenceIn(message)}\\)`));
    expect(reported.text()).toContain(SECRET);
  });

  it("the caller's own errors and a run's own outcome are answered as they were, and nothing is reported", async () => {
    const reported = reports();
    const bad = await call('echo', { task: 7 });
    expect((bad as McpError).code).toBe(ErrorCode.InvalidParams);
    expect((bad as McpError).message).toMatch(/input schema of 'echo'/);
    const failed = (await call('refusing', { task: 'x' })) as CallToolResult;
    expect(failed.isError).toBe(true);
    expect(text(failed)).toMatch(/^the agent's run ended Failed: .*the model refused: the task breaks policy 7/);
    expect(reported.text()).toBe('');
  });
});

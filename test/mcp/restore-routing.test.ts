/**
 * Two MCP servers given as tool sources, one of them with no prefix, and a session restored in
 * another "process" (new handles, new agent, the same SQLite store): each recorded tool is
 * called on the server that listed it, whatever the other sources claim or fail to list.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { createAgentMachine, DurableSession, type ModelRequest, type ToolMessage } from '../../src/index.js';
import { mcpTools, type McpTools } from '../../src/mcp.js';
import { SqliteSessionStore } from '../../src/sqlite.js';
import { openSqlite } from '../../src/stores/sqlite-driver.js';
import { scriptedModel } from '../../src/testing.js';

const RAW_SERVER = fileURLToPath(new URL('./fixtures/raw-server.mjs', import.meta.url));
const raw = (name: string, tools: string[], env: Record<string, string> = {}) => ({
  command: process.execPath,
  args: [RAW_SERVER],
  env: { MCP_RAW_NAME: name, MCP_RAW_TOOLS: JSON.stringify(tools.map((tool) => ({ name: tool, inputSchema: { type: 'object' } }))), ...env },
});

const handles: McpTools[] = [];
const dirs: string[] = [];
afterEach(async () => {
  await Promise.all(handles.splice(0).map((handle) => handle.close()));
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});
const open = async (...args: Parameters<typeof mcpTools>) => {
  const handle = await mcpTools(...args);
  handles.push(handle);
  return handle;
};

const toolResults = (messages: readonly { role: string }[]) =>
  messages.filter((m): m is ToolMessage => m.role === 'tool').map(({ toolCallId, content, isError }) => ({ toolCallId, content, isError: isError === true }));

/**
 * Process one lists A (prefix '') and B (prefix 'b_') and crashes in its first model call;
 * process two, with new connections (`later` gives B's), restores the session from the store and
 * its model calls `calls`.
 */
async function crashAndRestore(
  calls: { id: string; name: string }[],
  later: { b: () => ReturnType<typeof raw> },
  /** Rewrites the stored row before the restore (a row of an older build). */
  rewrite?: (db: string) => void,
) {
  const dir = mkdtempSync(join(tmpdir(), 'loopchart-routing-'));
  dirs.push(dir);
  const store = new SqliteSessionStore({ path: join(dir, 'sessions.db') });
  try {
    let asked!: (request: ModelRequest) => void;
    const firstCall = new Promise<ModelRequest>((resolve) => (asked = resolve));
    const hang = scriptedModel([(request) => (asked(request), new Promise<never>(() => {}))]);
    const a1 = await open(raw('A', ['alpha']));
    const b1 = await open(raw('B', ['beta']), { prefix: 'b_' });
    const crashed = await DurableSession.open({ machine: createAgentMachine({ model: hang, toolSources: [a1, b1] }), store, sessionId: 'routed' });
    crashed.send({ type: 'input', message: 'use both servers' });
    const offered = (await firstCall).tools.map((tool) => tool.name);
    await crashed.flush();
    crashed.actor.stop();
    rewrite?.(join(dir, 'sessions.db'));

    const a2 = await open(raw('A', ['alpha']));
    const b2 = await open(later.b(), { prefix: 'b_' });
    const model = scriptedModel([{ toolCalls: calls.map(({ id, name }) => ({ id, name, args: {} })) }, { text: 'done' }]);
    const restored = await DurableSession.open({ machine: createAgentMachine({ model, toolSources: [a2, b2] }), store, sessionId: 'routed' });
    const output = await restored.whenIdle();
    await restored.close();
    return { offered, output: output! };
  } finally {
    await store.close();
  }
}

describe('a restored session calls each recorded tool on the server that listed it', () => {
  it("a source whose listing fails after the restore: its recorded tool still goes to its own server, never to the prefix-less one's", async () => {
    // B lists `beta` once (the handle's first listing), then its listing fails; it still answers calls.
    const { offered, output } = await crashAndRestore(
      [
        { id: 'a', name: 'alpha' },
        { id: 'b', name: 'b_beta' },
      ],
      { b: () => raw('B', ['beta'], { MCP_RAW_TOOLS_NEXT: '"not a list"' }) },
    );
    expect(offered).toEqual(['alpha', 'b_beta']);
    expect(output.outcome).toEqual({ type: 'Completed', finalText: 'done' });
    expect(toolResults(output.messages)).toEqual([
      { toolCallId: 'a', content: 'A called alpha', isError: false },
      { toolCallId: 'b', content: 'B called beta', isError: false },
    ]);
  });

  it('a source that no longer lists a recorded tool: the call goes to that source (its own error), not to another that claims every name', async () => {
    const { output } = await crashAndRestore([{ id: 'b', name: 'b_beta' }], { b: () => raw('B', ['gamma']) });
    expect(toolResults(output.messages)).toEqual([{ toolCallId: 'b', content: expect.stringContaining('B: unknown tool beta'), isError: true }]);
  });

  it('a session recorded before the source of each tool was: a tool listed now by one source goes there; one that several could take is answered with an error, never sent to another server', async () => {
    const { output } = await crashAndRestore(
      [
        { id: 'a', name: 'alpha' },
        { id: 'b', name: 'b_beta' },
      ],
      { b: () => raw('B', ['beta'], { MCP_RAW_TOOLS_NEXT: '"not a list"' }) },
      forgetSources,
    );
    expect(toolResults(output.messages)).toEqual([
      { toolCallId: 'a', content: 'A called alpha', isError: false },
      { toolCallId: 'b', content: expect.stringMatching(/recorded without the source of each tool.*2 sources could take it/), isError: true },
    ]);
  });
});

/** Takes `offered.sources` out of every stored row, as a build before it wrote them. */
function forgetSources(db: string): void {
  const sqlite = openSqlite(db, { busyTimeoutMs: 1000 });
  try {
    const tables = sqlite.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all() as { name: string }[];
    let rewritten = 0;
    for (const { name } of tables) {
      const columns = (sqlite.prepare(`PRAGMA table_info("${name}")`).all() as { name: string }[]).map((column) => column.name);
      for (const column of columns) {
        const rows = sqlite.prepare(`SELECT rowid AS id, "${column}" AS value FROM "${name}" WHERE CAST("${column}" AS TEXT) LIKE '%"sources":[%'`).all() as { id: number; value: string }[];
        for (const row of rows) {
          const value = String(row.value).replace(/,"sources":\[[0-9,]*\]/g, '');
          sqlite.prepare(`UPDATE "${name}" SET "${column}" = ? WHERE rowid = ?`).run(value, row.id);
          rewritten++;
        }
      }
    }
    expect(rewritten).toBeGreaterThan(0);
  } finally {
    sqlite.close();
  }
}

/**
 * Two MCP servers given as tool sources, one of them with no prefix, and a session restored in
 * another "process" (new handles, new agent, the same SQLite store): each recorded tool is
 * called on the server that listed it, whatever the other sources claim or fail to list.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { createAgentMachine, DurableSession, InvalidConfigError, type ModelRequest, type ToolMessage } from '../../src/index.js';
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
 * Process one opens `before` and crashes in its first model call; process two opens `after` (new
 * connections, in the order given), restores the session from the store and its model calls
 * `calls`. Each server writes every call it receives to the run's call log (`received`).
 */
async function restoreWith(options: {
  before: (log: string) => Promise<McpTools>[];
  after: (log: string) => Promise<McpTools>[];
  calls: { id: string; name: string }[];
  /** Rewrites the stored rows before the restore (rows of an older build). */
  rewrite?: ((db: string) => void) | undefined;
}) {
  const dir = mkdtempSync(join(tmpdir(), 'loopchart-routing-'));
  dirs.push(dir);
  const log = join(dir, 'calls.jsonl');
  const store = new SqliteSessionStore({ path: join(dir, 'sessions.db') });
  try {
    let asked!: (request: ModelRequest) => void;
    const firstCall = new Promise<ModelRequest>((resolve) => (asked = resolve));
    const hang = scriptedModel([(request) => (asked(request), new Promise<never>(() => {}))]);
    const crashed = await DurableSession.open({ machine: createAgentMachine({ model: hang, toolSources: await Promise.all(options.before(log)) }), store, sessionId: 'routed' });
    crashed.send({ type: 'input', message: 'use the servers' });
    const offered = (await firstCall).tools.map((tool) => tool.name);
    await crashed.flush();
    crashed.actor.stop();
    options.rewrite?.(join(dir, 'sessions.db'));

    const toolSources = await Promise.all(options.after(log));
    const model = scriptedModel([{ toolCalls: options.calls.map(({ id, name }) => ({ id, name, args: {} })) }, { text: 'done' }]);
    const restored = await DurableSession.open({ machine: createAgentMachine({ model, toolSources }), store, sessionId: 'routed' });
    const output = await restored.whenIdle();
    await restored.close();
    // The calls of a batch run at once: their order in the log is not theirs.
    const received = (existsSync(log) ? readFileSync(log, 'utf8').split('\n').filter(Boolean) : []).sort().map((line) => JSON.parse(line) as { server: string; tool: string });
    return { offered, output: output!, received };
  } finally {
    await store.close();
  }
}

/**
 * Process one lists A (prefix '') and B (prefix 'b_'); process two, with new connections (`later`
 * gives B's), in the same order.
 */
const crashAndRestore = (calls: { id: string; name: string }[], later: { b: () => ReturnType<typeof raw> }, rewrite?: (db: string) => void) =>
  restoreWith({
    before: () => [open(raw('A', ['alpha'])), open(raw('B', ['beta']), { prefix: 'b_' })],
    after: () => [open(raw('A', ['alpha'])), open(later.b(), { prefix: 'b_' })],
    calls,
    rewrite,
  });

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

describe('a restored session finds each recorded source by its name, in whatever order the sources are given', () => {
  // Both servers list `delete`, each under its prefix. The session is stored with [A, B] and
  // restored with [B, A] (a product that reorders its config between deploys).
  const both = (log: string) => ({
    a: () => open(raw('A', ['delete'], { MCP_RAW_LOG: log }), { prefix: 'a_' }),
    b: () => open(raw('B', ['delete'], { MCP_RAW_LOG: log }), { prefix: 'b_' }),
  });

  it('two servers with a tool of the same name, restored in the other order: each call reaches the server the model meant', async () => {
    const { offered, output, received } = await restoreWith({
      before: (log) => [both(log).a(), both(log).b()],
      after: (log) => [both(log).b(), both(log).a()],
      calls: [
        { id: '1', name: 'a_delete' },
        { id: '2', name: 'b_delete' },
      ],
    });
    expect(offered).toEqual(['a_delete', 'b_delete']);
    expect(toolResults(output.messages)).toEqual([
      { toolCallId: '1', content: 'A called delete', isError: false },
      { toolCallId: '2', content: 'B called delete', isError: false },
    ]);
    expect(received).toEqual([
      { server: 'A', tool: 'delete' },
      { server: 'B', tool: 'delete' },
    ]);
  });

  it("servers without a prefix, reordered, and B now lists A's `delete` too: the call runs on A, and B receives nothing", async () => {
    const { offered, output, received } = await restoreWith({
      before: (log) => [open(raw('A', ['delete'], { MCP_RAW_LOG: log })), open(raw('B', ['archive'], { MCP_RAW_LOG: log }))],
      // B's next deploy added a `delete` of its own; the config now gives B first.
      after: (log) => [open(raw('B', ['archive', 'delete'], { MCP_RAW_LOG: log })), open(raw('A', ['delete'], { MCP_RAW_LOG: log }))],
      calls: [{ id: '1', name: 'delete' }],
    });
    expect(offered).toEqual(['delete', 'archive']);
    expect(toolResults(output.messages)).toEqual([{ toolCallId: '1', content: 'A called delete', isError: false }]);
    expect(received).toEqual([{ server: 'A', tool: 'delete' }]);
  });

  it("a recorded source the restored agent no longer has: the call is refused with the source's name, never run on the source now in its place", async () => {
    const { output, received } = await restoreWith({
      before: (log) => [open(raw('A', ['delete'], { MCP_RAW_LOG: log })), open(raw('B', ['archive'], { MCP_RAW_LOG: log }))],
      after: (log) => [open(raw('B', ['archive', 'delete'], { MCP_RAW_LOG: log }))],
      calls: [{ id: '1', name: 'delete' }],
    });
    expect(toolResults(output.messages)).toEqual([
      { toolCallId: '1', content: "tool 'delete' was offered to this run, but the tool source named 'A' that listed it is not among this agent's (its named sources: 'B')", isError: true },
    ]);
    expect(output.outcome).toEqual({ type: 'Completed', finalText: 'done' });
    expect(received).toEqual([]);
  });

  it('two sources of one name are refused when the agent is built, with an InvalidConfigError naming both; a name option sets them apart', async () => {
    const first = await open(raw('A', ['delete']));
    const second = await open(raw('A', ['archive']));
    expect([first.name, second.name]).toEqual(['A', 'A']);
    const build = () => createAgentMachine({ model: scriptedModel([]), toolSources: [first, second] });
    expect(build).toThrow(InvalidConfigError);
    expect(build).toThrow("toolSources[0] and toolSources[1] are both named 'A'");
    const named = await open(raw('A', ['archive']), { name: 'archive-server' });
    expect(named.name).toBe('archive-server');
    expect(() => createAgentMachine({ model: scriptedModel([]), toolSources: [first, named] })).not.toThrow();
  });

  it('a session of an older build, recorded by position: used where nothing contradicts it; reordered, each call is refused, none runs on the other server', async () => {
    const positions = byPosition(['A (prefix a_)', 'B (prefix b_)']);
    const same = await restoreWith({
      before: (log) => [both(log).a(), both(log).b()],
      after: (log) => [both(log).a(), both(log).b()],
      calls: [
        { id: '1', name: 'a_delete' },
        { id: '2', name: 'b_delete' },
      ],
      rewrite: positions,
    });
    expect(same.received).toEqual([
      { server: 'A', tool: 'delete' },
      { server: 'B', tool: 'delete' },
    ]);
    const reordered = await restoreWith({
      before: (log) => [both(log).a(), both(log).b()],
      after: (log) => [both(log).b(), both(log).a()],
      calls: [
        { id: '1', name: 'a_delete' },
        { id: '2', name: 'b_delete' },
      ],
      rewrite: positions,
    });
    expect(toolResults(reordered.output.messages)).toEqual([
      { toolCallId: '1', content: expect.stringContaining("recorded its source by position (toolSources[0]), and tool source 'A (prefix a_)' lists it now"), isError: true },
      { toolCallId: '2', content: expect.stringContaining("recorded its source by position (toolSources[1]), and tool source 'B (prefix b_)' lists it now"), isError: true },
    ]);
    expect(reordered.received).toEqual([]);
  });

  it('a session of an older build, recorded by position, restored in the other order after B gained the tool: refused, not run on B', async () => {
    const { output, received } = await restoreWith({
      before: (log) => [open(raw('A', ['delete'], { MCP_RAW_LOG: log })), open(raw('B', ['archive'], { MCP_RAW_LOG: log }))],
      after: (log) => [open(raw('B', ['archive', 'delete'], { MCP_RAW_LOG: log })), open(raw('A', ['delete'], { MCP_RAW_LOG: log }))],
      calls: [{ id: '1', name: 'delete' }],
      rewrite: byPosition(['A', 'B']),
    });
    expect(toolResults(output.messages)).toEqual([
      { toolCallId: '1', content: expect.stringContaining("recorded its source by position (toolSources[0]), and tool source 'A' lists it now: the sources may have been reordered since"), isError: true },
    ]);
    expect(received).toEqual([]);
  });
});

describe('a session recorded before the source of each tool was', () => {
  it('two sources list the tool now: the call is refused, not run on the first of them', async () => {
    const { output, received } = await restoreWith({
      before: (log) => [open(raw('A', ['delete'], { MCP_RAW_LOG: log })), open(raw('B', ['archive'], { MCP_RAW_LOG: log }))],
      after: (log) => [open(raw('B', ['archive', 'delete'], { MCP_RAW_LOG: log })), open(raw('A', ['delete'], { MCP_RAW_LOG: log }))],
      calls: [{ id: '1', name: 'delete' }],
      rewrite: forgetSources,
    });
    expect(toolResults(output.messages)).toEqual([
      { toolCallId: '1', content: "tool 'delete' was offered to this run, but this run was recorded without the source of each tool, and 2 sources list it now", isError: true },
    ]);
    expect(received).toEqual([]);
  });
});

/** Rewrites `offered.sources` in every stored row: `change` gets the recorded array's JSON and gives its replacement ('' drops the key). */
function rewriteSources(db: string, change: (sources: string) => string): void {
  const sqlite = openSqlite(db, { busyTimeoutMs: 1000 });
  try {
    const tables = sqlite.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all() as { name: string }[];
    let rewritten = 0;
    for (const { name } of tables) {
      const columns = (sqlite.prepare(`PRAGMA table_info("${name}")`).all() as { name: string }[]).map((column) => column.name);
      for (const column of columns) {
        const rows = sqlite.prepare(`SELECT rowid AS id, "${column}" AS value FROM "${name}" WHERE CAST("${column}" AS TEXT) LIKE '%"sources":[%'`).all() as { id: number; value: string }[];
        for (const row of rows) {
          const value = String(row.value).replace(/,"sources":(\[[^\]]*\])/g, (_, sources: string) => {
            const replacement = change(sources);
            return replacement ? `,"sources":${replacement}` : '';
          });
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

/** Takes `offered.sources` out of every stored row, as a build before it wrote them. */
const forgetSources = (db: string): void => rewriteSources(db, () => '');

/** Records each tool's source by its position in `order` (the sources as process one gave them), as a build before names wrote them. */
const byPosition =
  (order: string[]) =>
  (db: string): void =>
    rewriteSources(db, (sources) => {
      const names = JSON.parse(sources) as string[];
      for (const name of names) expect(order).toContain(name);
      return JSON.stringify(names.map((name) => order.indexOf(name)));
    });

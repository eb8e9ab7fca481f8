/**
 * `mcpTools` against a real MCP server over stdio: the fixture server in ./fixtures/server.mjs,
 * written with the MCP SDK, started as a child process. Tool calls go through the agent's tool
 * runner and executor seam like any other; failures of the server are typed errors or error
 * results; no server process outlives its handle or its parent process.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createActor, toPromise } from 'xstate';
import {
  createAgentMachine,
  DurableSession,
  InvalidConfigError,
  InvalidToolError,
  type Executor,
  type ToolMessage,
} from '../../src/index.js';
import { mcpTools, McpServerError, McpServerStartError, type McpTools } from '../../src/mcp.js';
import { runToolCalls } from '../../src/tools/run-tools.js';
import { MemorySessionStore } from '../../src/index.js';
import type { StepWrite } from '../../src/stores/session-store.js';
import { scriptedModel } from '../../src/testing.js';
import { alive, eventually, FIXTURE_SERVER, fixtureServer, scratch } from './support.js';

const files = scratch();
let mcp: McpTools;

beforeAll(async () => {
  mcp = await mcpTools(fixtureServer({ MCP_FIXTURE_LOG: files.logFile, MCP_FIXTURE_BAD: '1' }));
});
afterAll(async () => {
  await mcp?.close();
  files.remove();
});

const toolsOf = (messages: readonly { role: string }[]) => messages.filter((m): m is ToolMessage => m.role === 'tool');

/** Records every tool result DurableSession stores: journaled on its own, or in the step that logs it and clears its batch's key. */
class RecordingStore extends MemorySessionStore {
  readonly journaled: { turnKey: string; result: ToolMessage }[] = [];
  readonly logged: { turnKey: string; result: ToolMessage }[] = [];
  override async journalToolResult(sessionId: string, turnKey: string, result: ToolMessage): Promise<void> {
    this.journaled.push({ turnKey, result });
    return super.journalToolResult(sessionId, turnKey, result);
  }
  override async apply(sessionId: string, write: StepWrite): Promise<number> {
    const cleared = Array.isArray(write.clearJournal) ? write.clearJournal : [];
    for (const message of write.append ?? []) {
      for (const turnKey of cleared) if (message.role === 'tool') this.logged.push({ turnKey, result: message });
    }
    return super.apply(sessionId, write);
  }
}

describe('mcpTools over stdio', () => {
  it("lists the server's tools; the model sees each input schema as the server sent it, less $schema", () => {
    expect(mcp.tools.map((tool) => tool.name)).toEqual(['echo', 'fail', 'soft_fail', 'slow', 'crash', 'picture', 'structured', 'pid', 'grow']);
    expect(mcp.tools[0]!.definition).toEqual({
      name: 'echo',
      description: 'Repeats a text.',
      inputSchema: { type: 'object', properties: { text: { type: 'string', minLength: 1 } }, required: ['text'] },
    });
  });

  it('a tool whose schema is malformed is left out and reported as an InvalidToolError; the others work', () => {
    expect(mcp.skipped).toHaveLength(1);
    expect(InvalidToolError.isInstance(mcp.skipped[0])).toBe(true);
    expect(mcp.skipped[0]!.toolName).toBe('bad_schema');
    expect(mcp.skipped[0]!.message).toContain('inputSchema.properties.a.type');
  });

  it('an agent run calls MCP tools through the executor seam; DurableSession stores each result under its key', async () => {
    const store = new RecordingStore();
    const effects: { kind: string; key: string }[] = [];
    const recording: Executor = (effect, perform) => (effects.push({ kind: effect.kind, key: effect.key }), perform());
    const model = scriptedModel([
      {
        toolCalls: [
          { id: 'e', name: 'echo', args: { text: 'hi' } },
          { id: 'p', name: 'picture', args: {} },
          { id: 's', name: 'structured', args: {} },
          { id: 'f', name: 'fail', args: {} },
          { id: 'x', name: 'soft_fail', args: {} },
          { id: 'v', name: 'echo', args: { text: '' } },
        ],
      },
      { text: 'done' },
    ]);
    const machine = createAgentMachine({ model, tools: mcp.tools, executor: recording });
    const session = await DurableSession.open({ machine, store, sessionId: 'mcp-1' });
    session.send({ type: 'input', message: 'use the tools' });
    const output = await session.whenIdle();
    await session.close();

    expect(output?.outcome).toEqual({ type: 'Completed', finalText: 'done' });
    const results = toolsOf(output!.messages);
    expect(results.map(({ toolCallId, content, isError }) => ({ toolCallId, content, isError }))).toEqual([
      { toolCallId: 'e', content: 'echo: hi', isError: undefined },
      { toolCallId: 'p', content: '[image: image/png, 10 bytes]\na chart', isError: undefined },
      { toolCallId: 's', content: '{"total":3,"items":["a","b","c"]}', isError: undefined },
      { toolCallId: 'f', content: expect.stringContaining('kaput'), isError: true },
      { toolCallId: 'x', content: 'the disk is full', isError: true },
      // The server's minLength, enforced before the call left this process.
      { toolCallId: 'v', content: expect.stringContaining('invalid arguments for tool "echo"'), isError: true },
    ]);
    const batch = 'mcp-1:run-1:turn-1:tools';
    expect(effects.filter((effect) => effect.kind === 'tool').map((effect) => effect.key)).toEqual(
      ['e', 'p', 's', 'f', 'x', 'v'].map((id) => `${batch}:${id}`),
    );
    // Each result is journaled as it comes, but for the one that ends the batch: the step that logs the batch stores it.
    const journaled = store.journaled.map(({ turnKey, result }) => `${turnKey}:${result.toolCallId}`);
    expect(journaled).toHaveLength(5);
    const last = ['e', 'f', 'p', 's', 'v', 'x'].find((id) => !journaled.includes(`${batch}:${id}`))!;
    expect(store.logged.filter(({ turnKey }) => turnKey === batch).map(({ result }) => result.toolCallId)).toContain(last);
    expect([...journaled, `${batch}:${last}`].sort()).toEqual(['e', 'f', 'p', 's', 'v', 'x'].map((id) => `${batch}:${id}`));
    // The idempotency key reaches the server in the call's _meta; the invalid call never left.
    const calls = files.events().filter((event) => event.key?.toString().startsWith(batch));
    expect(calls.map((event) => event.key)).toEqual(['e', 'p', 's', 'f', 'x'].map((id) => `${batch}:${id}`));
  });

  it("cancelling the run cancels the MCP request: the server's handler sees the abort", async () => {
    const model = scriptedModel([{ toolCalls: [{ id: 'slow-1', name: 'slow', args: { ms: 20_000 } }] }, { text: 'unreachable' }]);
    const actor = createActor(createAgentMachine({ model, tools: mcp.tools }), { input: { prompt: 'wait', sessionId: 'cancel-1' } });
    // Cancelled once the server has the call (a timer could fire before the request got there).
    const slowCalls = () => files.events().filter((event) => event.call === 'slow').length;
    const before = slowCalls();
    actor.on('tool.started', () => void eventually(() => slowCalls() > before).then(() => actor.send({ type: 'cancel' })));
    const started = performance.now();
    const output = await toPromise(actor.start());
    expect(output.outcome).toEqual({ type: 'Cancelled' });
    expect(performance.now() - started).toBeLessThan(5_000);
    expect(await eventually(() => files.events().some((event) => event.cancelled === 'slow' && String(event.reason).includes('Abort')))).toBe(
      true,
    );
  });

  it('a call past its timeout gets an error result and is cancelled on the server', async () => {
    const before = files.events().filter((event) => event.cancelled).length;
    const [result] = await runToolCalls([{ call: { id: 't', name: 'slow', args: { ms: 20_000 } } }], mcp.tools, {
      idempotencyKey: () => 'timeout-1',
      defaultTimeoutMs: 200,
    });
    expect(result).toMatchObject({ isError: true, content: 'tool "slow" timed out after 200 ms' });
    expect(await eventually(() => files.events().filter((event) => event.cancelled === 'slow').length > before)).toBe(true);
    expect(files.events().at(-1)).toMatchObject({ cancelled: 'slow', reason: expect.stringContaining('timed out') });
  });

  it('refuses a server description that is neither stdio nor HTTP, and options it does not know', async () => {
    await expect(mcpTools({ command: '' })).rejects.toThrow(InvalidConfigError);
    await expect(mcpTools({ url: 'ftp://example.com' })).rejects.toThrow(InvalidConfigError);
    await expect(mcpTools({ command: 'x', url: 'http://127.0.0.1:1' } as never)).rejects.toThrow(InvalidConfigError);
    await expect(mcpTools(fixtureServer(), { startTimeout: 5 } as never)).rejects.toThrow(InvalidConfigError);
  });

  // setTimeout cuts a delay past 2^31 - 1 ms (24.8 days) to 1 ms: before, a startTimeoutMs of
  // 3,000,000,000 failed every start ('no answer to the MCP handshake within 3000000000 ms').
  it.each(['startTimeoutMs', 'listTimeoutMs'])('refuses a %s longer than a timer can wait, before starting the server', async (option) => {
    const error = await mcpTools(fixtureServer(), { [option]: 3_000_000_000 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidConfigError);
    expect((error as Error).message).toContain(option);
  });
});

describe('a server that fails', () => {
  it('a command that does not exist: McpServerStartError', async () => {
    const error = await mcpTools({ command: 'loopchart-no-such-command-7f3a' }).catch((e: unknown) => e);
    expect(McpServerStartError.isInstance(error)).toBe(true);
    expect((error as McpServerStartError).code).toBe('McpServerStart');
    expect((error as Error).message).toContain('the command was not found');
  });

  it('a server that exits at once: McpServerStartError with the end of its stderr', async () => {
    const script = "console.error('line one'); console.error('config missing: API_TOKEN'); process.exit(3)";
    const error = await mcpTools({ command: process.execPath, args: ['-e', script] }).catch((e: unknown) => e);
    expect(McpServerStartError.isInstance(error)).toBe(true);
    expect((error as Error).message).toContain('exited before completing the MCP handshake');
    expect((error as McpServerStartError).stderr).toContain('config missing: API_TOKEN');
    expect((error as Error).message).toContain('config missing: API_TOKEN');
  });

  it('a server that never answers: McpServerStartError after the start timeout, and the process is ended', async () => {
    const script = 'console.error(`pid=${process.pid}`); setInterval(() => {}, 1000)';
    const error = await mcpTools({ command: process.execPath, args: ['-e', script] }, { startTimeoutMs: 500 }).catch((e: unknown) => e);
    expect(McpServerStartError.isInstance(error)).toBe(true);
    expect((error as Error).message).toContain('no answer to the MCP handshake within 500 ms');
    const pid = Number(/pid=(\d+)/.exec((error as McpServerStartError).stderr)?.[1]);
    expect(pid).toBeGreaterThan(0);
    expect(await eventually(() => !alive(pid))).toBe(true);
  });

  it('a tool list the MCP schema refuses: McpServerError from mcpTools, and the server is ended', async () => {
    const own = scratch();
    try {
      const error = await mcpTools(fixtureServer({ MCP_FIXTURE_BROKEN_LIST: '1', MCP_FIXTURE_LOG: own.logFile })).catch((e: unknown) => e);
      expect(McpServerError.isInstance(error)).toBe(true);
      expect((error as McpServerError).code).toBe('McpServer');
      expect((error as Error).message).toContain('listing its tools failed');
      const pid = Number(own.events().find((event) => event.started)?.started);
      expect(pid).toBeGreaterThan(0);
      expect(await eventually(() => !alive(pid))).toBe(true);
    } finally {
      own.remove();
    }
  });

  it('a server that dies during a call: that call gets an error result, the run goes on', async () => {
    const doomed = await mcpTools(fixtureServer());
    try {
      const model = scriptedModel([
        { toolCalls: [{ id: 'c1', name: 'crash', args: {} }] },
        { toolCalls: [{ id: 'c2', name: 'echo', args: { text: 'still there?' } }] },
        { text: 'carried on' },
      ]);
      const output = await toPromise(createActor(createAgentMachine({ model, tools: doomed.tools }), { input: { prompt: 'go' } }).start());
      expect(output.outcome).toEqual({ type: 'Completed', finalText: 'carried on' });
      const [crashed, after] = toolsOf(output.messages);
      expect(crashed).toMatchObject({ toolCallId: 'c1', isError: true, content: expect.stringContaining('exited or closed the connection during the call') });
      expect(after).toMatchObject({ toolCallId: 'c2', isError: true, content: expect.stringContaining('is not running') });
    } finally {
      await doomed.close();
    }
  });
});

describe('no server outlives its handle', () => {
  const pidOf = async (handle: McpTools): Promise<number> => {
    const [result] = await runToolCalls([{ call: { id: 'p', name: 'pid', args: {} } }], handle.tools, { idempotencyKey: () => 'pid' });
    return Number(result!.content);
  };

  it('close() ends the server process', async () => {
    // A server that ignores the end of its stdin: close() goes on to SIGTERM.
    const handle = await mcpTools(fixtureServer({ MCP_FIXTURE_STAY: '1' }));
    const pid = await pidOf(handle);
    expect(alive(pid)).toBe(true);
    await handle.close();
    expect(await eventually(() => !alive(pid))).toBe(true);
    await handle.close(); // idempotent
  });

  it('a process that exits without close() leaves no server behind', async () => {
    const tsx = fileURLToPath(new URL('../../node_modules/tsx/dist/loader.mjs', import.meta.url));
    const mcpEntry = fileURLToPath(new URL('../../src/mcp.ts', import.meta.url));
    const script = `
      const { mcpTools } = await import(${JSON.stringify(mcpEntry)});
      const handle = await mcpTools({ command: process.execPath, args: [${JSON.stringify(FIXTURE_SERVER)}], env: { MCP_FIXTURE_STAY: '1' } });
      const pid = handle.tools.find((tool) => tool.name === 'pid');
      console.log(await pid.execute({}, { signal: new AbortController().signal, toolCallId: 'p', idempotencyKey: 'p' }));
      process.exit(0); // no close()
    `;
    const child = spawn(process.execPath, ['--import', tsx, '--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    expect(code, stderr).toBe(0);
    const serverPid = Number(stdout.trim());
    expect(serverPid).toBeGreaterThan(0);
    // The fixture server keeps itself alive with a timer: only its parent's exit hook ends it.
    expect(await eventually(() => !alive(serverPid))).toBe(true);
  });
});

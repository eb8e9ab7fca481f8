/**
 * MCP that survives its servers (issue 25 item 3), against a real stdio server that misbehaves
 * on purpose (fixtures/hostile-server.mjs): a result over the size limit fails that call and the
 * connection stays; a tool the MCP schema refuses is skipped, not the whole listing; a server
 * that ignores SIGTERM and the end of its input, and its own child, die with the host however
 * the host ends.
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InvalidToolError } from '../../src/index.js';
import { mcpTools, McpResultTooLargeError, type McpTools } from '../../src/mcp.js';
import { runToolCalls } from '../../src/tools/run-tools.js';
import { bundledCommand, type NodeCommand } from '../sessions/fixtures/processes.js';
import { eventually } from './support.js';

const HOSTILE = fileURLToPath(new URL('./fixtures/hostile-server.mjs', import.meta.url));
/** fixtures/host.ts as a bundle (see bundledCommand: a third of tsx's start-up CPU). */
let hostCommand: NodeCommand;
beforeAll(async () => {
  hostCommand = await bundledCommand(fileURLToPath(new URL('./fixtures/host.ts', import.meta.url)));
});
afterAll(() => hostCommand?.dispose());
const hostile = (env: Record<string, string> = {}) => ({ command: process.execPath, args: [HOSTILE], env });

/** Running, and not a zombie waiting to be reaped (a killed process whose parent is gone may stay one). */
function running(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

async function call(handle: McpTools, name: string, args: Record<string, unknown>) {
  const [result] = await runToolCalls([{ call: { id: name, name, args } }], handle.tools, { idempotencyKey: () => name });
  return result!;
}

describe('a result over the size limit', () => {
  let handle: McpTools;
  beforeAll(async () => {
    handle = await mcpTools(hostile(), { maxResultBytes: 100_000 });
  });
  afterAll(() => handle?.close());

  it('fails that call with McpResultTooLargeError; the next calls on the same connection succeed', async () => {
    const tool = handle.tools.find((t) => t.name === 'big')!;
    const ctx = { signal: new AbortController().signal, toolCallId: 'b', idempotencyKey: 'b' };
    const error = await Promise.resolve(tool.execute({ bytes: 300_000 }, ctx)).catch((e: unknown) => e);
    expect(McpResultTooLargeError.isInstance(error)).toBe(true);
    expect((error as McpResultTooLargeError).code).toBe('McpResultTooLarge');
    expect((error as McpResultTooLargeError).bytes).toBeGreaterThan(300_000);
    expect((error as McpResultTooLargeError).limit).toBe(100_000);

    expect(await call(handle, 'echo', { text: 'still here' })).toMatchObject({ content: 'echo: still here' });
    expect((await call(handle, 'big', { bytes: 50_000 })).content).toHaveLength(50_000);
    // Through the runner it is the call's error result, which the model reads.
    const refused = await call(handle, 'big', { bytes: 150_000 });
    expect(refused).toMatchObject({ isError: true, content: expect.stringContaining('over the limit of 100000 (maxResultBytes)') });
    expect(await call(handle, 'echo', { text: 'and again' })).toMatchObject({ content: 'echo: and again' });
    expect(await handle.listTools()).toHaveLength(3);
  });

  it('by default the limit is 10 MiB: an 11 MiB result fails its call, and the connection is not lost', async () => {
    const plain = await mcpTools(hostile());
    try {
      const refused = await call(plain, 'big', { bytes: 11 * 1024 * 1024 });
      expect(refused).toMatchObject({ isError: true, content: expect.stringContaining(`over the limit of ${10 * 1024 * 1024}`) });
      expect(await call(plain, 'echo', { text: 'next' })).toMatchObject({ content: 'echo: next' });
      expect(await plain.listTools()).toHaveLength(3);
    } finally {
      await plain.close();
    }
  });

  it('calls in flight beside the oversized one get their own answers', async () => {
    const results = await runToolCalls(
      [
        { call: { id: 'a', name: 'echo', args: { text: 'one' } } },
        { call: { id: 'b', name: 'big', args: { bytes: 400_000 } } },
        { call: { id: 'c', name: 'echo', args: { text: 'two' } } },
      ],
      handle.tools,
      { idempotencyKey: (c) => c.id },
    );
    expect(results.map((r) => [r.toolCallId, r.isError ?? false, r.content.slice(0, 9)])).toEqual([
      ['a', false, 'echo: one'],
      ['b', true, 'the MCP s'],
      ['c', false, 'echo: two'],
    ]);
  });
});

describe('a tool list with tools the MCP schema refuses', () => {
  it('skips each such tool with the reason in skipped; the listing and the other tools work', async () => {
    const handle = await mcpTools(hostile({ MCP_HOSTILE_MALFORMED: '1' }));
    try {
      expect(handle.tools.map((t) => t.name)).toEqual(['echo', 'big', 'pids']);
      expect(handle.skipped.map((e) => e.toolName)).toEqual(['numeric_properties', 'string_input', '#5']);
      for (const error of handle.skipped) expect(InvalidToolError.isInstance(error)).toBe(true);
      expect(handle.skipped[0]!.message).toContain('tool.inputSchema.properties');
      expect(handle.skipped[1]!.message).toContain('tool.inputSchema.type');
      expect(handle.skipped[2]!.message).toContain('tool.name');
      expect(await call(handle, 'echo', { text: 'fine' })).toMatchObject({ content: 'echo: fine' });
    } finally {
      await handle.close();
    }
  });
});

describe('servers die with their host', () => {
  /** Runs fixtures/host.ts, which ends as `how` says; returns the pids it printed. */
  async function host(how: 'exit' | 'throw' | 'signal'): Promise<{ server: number; grandchild: number; code: number | null; signal: string | null }> {
    const child = spawn(process.execPath, [...hostCommand.args, how], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
      if (how === 'signal' && stdout.includes('\n')) child.kill('SIGTERM');
    });
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
    const [code, signal] = await new Promise<[number | null, string | null]>((resolve) => child.on('close', (c, s) => resolve([c, s])));
    clearTimeout(timer);
    const pids = JSON.parse(stdout.trim().split('\n')[0] ?? 'null') as { server: number; grandchild: number } | null;
    if (!pids) throw new Error(`the host printed no pids: ${stderr}`);
    return { ...pids, code, signal };
  }

  it.each([
    ['process.exit() without close()', 'exit', { code: 0, signal: null }],
    ['an uncaught exception', 'throw', { code: 1, signal: null }],
    ['SIGTERM with no handler of its own', 'signal', { code: null, signal: 'SIGTERM' }],
  ] as const)('%s: the server (which ignores SIGTERM and its stdin closing) and its child are gone', async (_, how, ended) => {
    const { server, grandchild, code, signal } = await host(how);
    expect({ code, signal }).toEqual(ended);
    expect(server).toBeGreaterThan(0);
    expect(grandchild).toBeGreaterThan(0);
    expect(await eventually(() => !running(server) && !running(grandchild), 5_000)).toBe(true);
  });

  it('close() ends the whole group: the server and the child it started', async () => {
    const handle = await mcpTools(hostile({ MCP_HOSTILE_STUBBORN: '1' }));
    const { server, grandchild } = JSON.parse((await call(handle, 'pids', {})).content) as { server: number; grandchild: number };
    expect(running(server) && running(grandchild)).toBe(true);
    await handle.close();
    expect(await eventually(() => !running(server) && !running(grandchild), 5_000)).toBe(true);
  }, 15_000);
});

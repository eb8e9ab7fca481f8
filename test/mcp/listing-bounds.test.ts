/**
 * What one listing may bring is bounded where it enters: a tool whose description or schema is
 * over its bound, and the tools past a server's count, are skipped (reported in `skipped` with
 * the reason); the rest are offered and the run goes on. Each bound is an option a user can raise.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { createActor, toPromise } from 'xstate';
import { createAgentMachine, type ModelRequest } from '../../src/index.js';
import { mcpTools, type McpTools, type McpToolsOptions } from '../../src/mcp.js';
import { scriptedModel } from '../../src/testing.js';

const RAW_SERVER = fileURLToPath(new URL('./fixtures/raw-server.mjs', import.meta.url));
const MB5 = 5 * 1024 * 1024;

const handles: McpTools[] = [];
const dirs: string[] = [];
afterEach(async () => {
  await Promise.all(handles.splice(0).map((handle) => handle.close()));
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** A raw server listing `tools` (written to a file: too big for the environment). */
async function serve(tools: unknown[], options: McpToolsOptions = {}): Promise<McpTools> {
  const dir = mkdtempSync(join(tmpdir(), 'loopchart-bounds-'));
  dirs.push(dir);
  const file = join(dir, 'tools.json');
  writeFileSync(file, JSON.stringify(tools));
  const handle = await mcpTools({ command: process.execPath, args: [RAW_SERVER], env: { MCP_RAW_TOOLS_FILE: file } }, { maxResultBytes: 64 * 1024 * 1024, ...options });
  handles.push(handle);
  return handle;
}

const small = (name: string) => ({ name, description: `the ${name} tool`, inputSchema: { type: 'object' } });

/** One run with the handle as a tool source: its outcome and the tool names its model was offered. */
async function run(handle: McpTools) {
  let offered: string[] = [];
  const model = scriptedModel([(request: ModelRequest) => ((offered = request.tools.map((tool) => tool.name)), { text: 'ok' })]);
  const actor = createActor(createAgentMachine({ model, toolSources: [handle] }), { input: { prompt: 'hi', sessionId: 'bounds' } });
  const output = await toPromise(actor.start());
  return { outcome: output.outcome, offered };
}

describe('bounds on what a listing brings', () => {
  it('a 5 MB description: that tool is skipped with the reason, the run goes on with the others', async () => {
    const handle = await serve([small('fine'), { ...small('wordy'), description: 'x'.repeat(MB5) }]);
    const { outcome, offered } = await run(handle);
    expect(outcome).toEqual({ type: 'Completed', finalText: 'ok' });
    expect(offered).toEqual(['fine']);
    expect(handle.skipped.map((error) => [error.toolName, error.message])).toEqual([['wordy', expect.stringMatching(/description .*over maxDescriptionChars/)]]);
  });

  it('a 5 MB input schema: that tool is skipped with the reason, the run goes on with the others', async () => {
    const huge = { type: 'object', properties: { a: { type: 'string', description: 'y'.repeat(MB5) } } };
    const handle = await serve([{ ...small('heavy'), inputSchema: huge }, small('fine')]);
    const { outcome, offered } = await run(handle);
    expect(outcome).toEqual({ type: 'Completed', finalText: 'ok' });
    expect(offered).toEqual(['fine']);
    expect(handle.skipped.map((error) => [error.toolName, error.message])).toEqual([['heavy', expect.stringMatching(/input schema .*over maxSchemaBytes/)]]);
  });

  it('10,000 tools: the first maxTools (default 128) are kept, the others skipped with the reason, and the run goes on', async () => {
    const handle = await serve(Array.from({ length: 10_000 }, (_, i) => small(`t${i}`)));
    const { outcome, offered } = await run(handle);
    expect(outcome).toEqual({ type: 'Completed', finalText: 'ok' });
    expect(offered).toHaveLength(128);
    expect(handle.tools).toHaveLength(128);
    expect(handle.skipped).toHaveLength(10_000 - 128);
    expect(handle.skipped[0]!.toolName).toBe('t128');
    expect(handle.skipped[0]!.message).toMatch(/more than maxTools \(128\)/);
  });

  it('each bound can be raised', async () => {
    const wordy = { ...small('wordy'), description: 'x'.repeat(20_000) };
    const heavy = { ...small('heavy'), inputSchema: { type: 'object', properties: { a: { type: 'string', description: 'y'.repeat(100_000) } } } };
    const many = Array.from({ length: 200 }, (_, i) => small(`t${i}`));
    const handle = await serve([wordy, heavy, ...many], { maxDescriptionChars: 30_000, maxSchemaBytes: 200_000, maxTools: 300 });
    expect(handle.skipped).toEqual([]);
    expect(handle.tools).toHaveLength(202);
  });
});

/**
 * mcpTools' `prefix` starts every tool name, which providers hold to 1-64 characters of a-z, A-Z,
 * 0-9, _ or -: a prefix outside that rule is refused before the server is started. Before, it
 * was accepted, the server started, and every tool it listed was skipped (a handle with no tools).
 */
import { tmpdir } from 'node:os';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { InvalidConfigError } from '../../src/errors.js';
import { mcpTools, type McpTools } from '../../src/mcp.js';
import { fixtureServer } from './support.js';

const handles: McpTools[] = [];
afterEach(async () => {
  await Promise.all(handles.splice(0).map((handle) => handle.close()));
});

/** What `mcpTools` failed with, or what it started (kept, to be closed) when it did not fail. */
const startError = (...args: Parameters<typeof mcpTools>): Promise<unknown> =>
  mcpTools(...args).then(
    (handle) => {
      handles.push(handle);
      return `accepted: ${handle.tools.length} tools, ${handle.skipped.length} skipped`;
    },
    (e: unknown) => e,
  );

describe('mcpTools: prefix', () => {
  it.each([['fs.'], ['my tools_'], ['fs/'], ['x'.repeat(64)]])('%j is refused before the server starts', async (prefix) => {
    const error = await startError(fixtureServer(), { prefix });
    expect(error).toBeInstanceOf(InvalidConfigError);
    expect((error as Error).message).toMatch(/MCP options: prefix: must be up to 63 characters of a-z, A-Z, 0-9, _ or -/);
  });

  it('a prefix within the rule still names every tool', async () => {
    const handle = await mcpTools(fixtureServer(), { prefix: 'fs_' });
    handles.push(handle);
    expect(handle.skipped).toEqual([]);
    expect(handle.tools.map((tool) => tool.name)).toContain('fs_echo');
  });
});

describe('mcpTools: an HTTP server url', () => {
  const SECRET = 'sk-SECRET-123';
  it.each([
    ['with credentials (before: the start error quoted them)', `http://user:${SECRET}@127.0.0.1:1/mcp`, /MCP server: url: must not contain credentials/],
    ['a URL object with credentials', new URL(`https://user:${SECRET}@127.0.0.1:1/mcp`), /MCP server: url: must not contain credentials/],
    ['a URL object that is no http(s) (before: accepted, the start failed: fetch failed)', new URL('ftp://127.0.0.1/mcp'), /MCP server: url: must be an http\(s\) URL/],
    ['a file: URL object', new URL('file:///etc/passwd'), /MCP server: url: must be an http\(s\) URL/],
    ['a text that is no URL (its own message kept; a refinement parsing it must not throw)', 'not a url', /MCP server: url: Invalid URL/],
    ['an empty text', '', /MCP server: url: Invalid URL/],
  ])('%s is an InvalidConfigError that does not quote it', async (_, url, problem) => {
    const error = await startError({ url });
    expect(error).toBeInstanceOf(InvalidConfigError);
    expect((error as Error).message).toMatch(problem);
    expect((error as Error).message).not.toContain(SECRET);
  });
});

describe('mcpTools: an HTTP server url with a key in its query', () => {
  // Before, the whole URL was the server's label, in the start error and in every tool error the
  // model reads: 'MCP server http://127.0.0.1:1/mcp?key=sk-SECRET-123 failed to start: …'.
  it('is used, and no error quotes the query', async () => {
    const SECRET = 'sk-SECRET-123';
    const error = await startError({ url: `http://127.0.0.1:1/mcp?key=${SECRET}` }, { startTimeoutMs: 2_000 });
    expect(error).toBeInstanceOf(Error);
    expect((error as Error).message).toContain('http://127.0.0.1:1/mcp');
    expect((error as Error).message).not.toContain(SECRET);
  });
});

describe('mcpTools: a stdio server cwd', () => {
  it.each([
    ['a folder that does not exist', '/nonexistent/loopchart-mcp-cwd'],
    ['a file', fileURLToPath(import.meta.url)],
  ])('%s is an InvalidConfigError naming cwd, before anything starts (before: "the command was not found (spawn … ENOENT)")', async (_, cwd) => {
    const error = await startError({ ...fixtureServer(), cwd });
    expect(error).toBeInstanceOf(InvalidConfigError);
    expect((error as Error).message).toMatch(/MCP server: cwd: no folder at /);
  });

  it('an existing folder still starts the server there', async () => {
    const handle = await mcpTools({ ...fixtureServer(), cwd: tmpdir() });
    handles.push(handle);
    expect(handle.tools.length).toBeGreaterThan(0);
  });
});

describe('mcpTools: a stdio server command line and environment', () => {
  it.each([
    ['a NUL in the command (before: McpServerStartError "did not complete the MCP handshake")', { command: 'no\0de' }, /MCP server: command: must not hold a NUL character/],
    ['a NUL in an argument (same)', { args: ['a\0b'] }, /MCP server: args\.0: must not hold a NUL character/],
    ['a NUL in an environment value (same)', { env: { TEAM: 'a\0b' } }, /MCP server: env\.TEAM: must not hold a NUL character/],
    ['a NUL in cwd (same)', { cwd: '/tmp\0x' }, /MCP server: cwd: must not hold a NUL character/],
    ['an environment name with = (before: accepted, spawn got the entry A=B=x)', { env: { 'A=B': 'x' } }, /MCP server: env: .*a variable name must be non-empty, without = or NUL/],
    ['an empty environment name (before: accepted)', { env: { '': 'x' } }, /MCP server: env: .*a variable name must be non-empty, without = or NUL/],
  ])('%s is an InvalidConfigError naming it', async (_, fields, problem) => {
    const error = await startError({ ...fixtureServer(), ...fields });
    expect(error).toBeInstanceOf(InvalidConfigError);
    expect((error as Error).message).toMatch(problem);
  });
});

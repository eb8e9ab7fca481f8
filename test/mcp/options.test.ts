/**
 * mcpTools' `prefix` starts every tool name, which providers hold to 1-64 characters of a-z, A-Z,
 * 0-9, _ or -: a prefix outside that rule is refused before the server is started. Before, it
 * was accepted, the server started, and every tool it listed was skipped (a handle with no tools).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { InvalidConfigError } from '../../src/errors.js';
import { mcpTools, type McpTools } from '../../src/mcp.js';
import { fixtureServer } from './support.js';

const handles: McpTools[] = [];
afterEach(async () => {
  await Promise.all(handles.splice(0).map((handle) => handle.close()));
});

describe('mcpTools: prefix', () => {
  it.each([['fs.'], ['my tools_'], ['fs/'], ['x'.repeat(64)]])('%j is refused before the server starts', async (prefix) => {
    const error = await mcpTools(fixtureServer(), { prefix }).then(
      (handle) => {
        handles.push(handle);
        return `accepted: ${handle.tools.length} tools, ${handle.skipped.length} skipped`;
      },
      (e: unknown) => e,
    );
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

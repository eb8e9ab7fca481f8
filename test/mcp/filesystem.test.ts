/**
 * A third-party server: `@modelcontextprotocol/server-filesystem` (a dev dependency, run with this
 * Node), started over stdio. A whole agent run with the scripted model lists a fixture folder
 * through it and answers from what it read.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runAgent, type ModelRequest } from '../../src/index.js';
import { mcpTools, type McpTools } from '../../src/mcp.js';
import { scriptedModel } from '../../src/testing.js';
import { FILESYSTEM_SERVER, FIXTURE_FOLDER } from './support.js';

let fs: McpTools;
beforeAll(async () => {
  fs = await mcpTools({ command: process.execPath, args: [FILESYSTEM_SERVER, FIXTURE_FOLDER] }, { prefix: 'fs_' });
});
afterAll(() => fs?.close());

describe('@modelcontextprotocol/server-filesystem', () => {
  it('offers its tools under the prefix, every one with a schema the validator takes', () => {
    const names = fs.tools.map((tool) => tool.name);
    expect(names).toEqual(expect.arrayContaining(['fs_list_directory', 'fs_read_text_file', 'fs_directory_tree']));
    expect(fs.skipped).toEqual([]);
  });

  it('an agent run lists the fixture folder through it and answers from the listing', async () => {
    const seen: string[] = [];
    const model = scriptedModel([
      { toolCalls: [{ id: 'ls', name: 'fs_list_directory', args: { path: FIXTURE_FOLDER } }] },
      (request: ModelRequest) => {
        const listing = request.messages.at(-1)!;
        seen.push(listing.content);
        return { text: `The folder holds: ${listing.content.split('\n').join(', ')}` };
      },
    ]);
    const { outcome, messages } = await runAgent({ model, toolSources: [fs], prompt: 'What is in the fixture folder?' });
    expect(seen).toHaveLength(1);
    expect(seen[0]!.split('\n').sort()).toEqual(['[DIR] notes', '[FILE] README.md', '[FILE] data.csv']);
    expect(outcome).toEqual({ type: 'Completed', finalText: expect.stringContaining('[DIR] notes') });
    expect(messages.filter((m) => m.role === 'tool')).toHaveLength(1);
  });

  it('a path outside its allowed folder is the call error result the server gives; the run goes on', async () => {
    const model = scriptedModel([{ toolCalls: [{ id: 'x', name: 'fs_read_text_file', args: { path: '/etc/passwd' } }] }, { text: 'refused' }]);
    const { outcome, messages } = await runAgent({ model, tools: fs.tools, prompt: 'read /etc/passwd' });
    expect(outcome).toEqual({ type: 'Completed', finalText: 'refused' });
    expect(messages.find((m) => m.role === 'tool')).toMatchObject({ isError: true, content: expect.stringContaining('outside allowed directories') });
  });
});

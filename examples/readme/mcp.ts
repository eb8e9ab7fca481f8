// examples/readme/mcp.ts
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { defineTool, runAgent } from 'loopchart';
import { mcpTools } from 'loopchart/mcp';
import { scriptedModel } from 'loopchart/testing';

// Any MCP server: a command started over stdio (here the official filesystem server, allowed to
// read one folder), or { url: 'http://…/mcp' } for Streamable HTTP. The folder is this repository's
// examples/fixtures: in your project, name a folder of yours (the listing is then its own).
const folder = fileURLToPath(new URL('../fixtures', import.meta.url));
const server = createRequire(import.meta.url).resolve('@modelcontextprotocol/server-filesystem/dist/index.js');
const fs = await mcpTools({ command: process.execPath, args: [server, folder] }, { prefix: 'fs_' });
try {
  const model = scriptedModel([
    { toolCalls: [{ name: 'fs_list_directory', args: { path: folder } }] },
    (request) => ({ text: `I see: ${request.messages.at(-1)!.content.split('\n').sort().join(', ')}` }),
  ]);
  // toolSources: listed again at the start of every run (tools: fs.tools would fix the list).
  const { text } = await runAgent({ model, toolSources: [fs], prompt: 'What is in the folder?' });
  console.log(text); // I see: [DIR] notes, [FILE] README.md, [FILE] orders.csv, [FILE] service.log
} finally {
  await fs.close(); // ends the server process (so does this process's exit)
}

// A JSON Schema input, as MCP tools have: shown to the model as given, enforced before execute.
const shout = defineTool({
  name: 'shout',
  description: 'Upper-cases a text.',
  inputSchema: { type: 'object', properties: { text: { type: 'string', minLength: 1 } }, required: ['text'] },
  execute: (args) => String(args.text).toUpperCase(),
});
console.log(JSON.stringify(shout.definition.inputSchema.required)); // ["text"]

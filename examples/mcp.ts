/**
 * `npx tsx examples/mcp.ts [folder]`: the demo agent with an MCP server's tools instead of its
 * own. The official filesystem server (`@modelcontextprotocol/server-filesystem`, started here
 * from node_modules over stdio) is allowed to read one folder (default examples/fixtures); the
 * agent lists it and reads up to three of its files through the server, then answers with line
 * counts built from what the tools returned, printing each call as it goes. Offline: the scripted
 * model's replies are functions of the conversation, so another folder gives another answer.
 *
 * Needs `npm install @modelcontextprotocol/sdk` in a project of your own (plus the server:
 * `npx -y @modelcontextprotocol/server-filesystem DIR` runs it without installing).
 * Exits 0 when the run is Completed, 1 otherwise.
 */
import { statSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { streamAgent, type ModelRequest, type ToolMessage } from '../src/index.js';
import { mcpTools } from '../src/mcp.js';
import { scriptedModel, type ScriptedReply } from '../src/testing.js';

const folder = path.resolve(process.argv[2] ?? fileURLToPath(new URL('./fixtures', import.meta.url)));
if (!statSync(folder, { throwIfNoEntry: false })?.isDirectory()) {
  console.error(`not a directory: ${folder}`);
  process.exit(2);
}

const server = createRequire(import.meta.url).resolve('@modelcontextprotocol/server-filesystem/dist/index.js');
const fs = await mcpTools({ command: process.execPath, args: [server, folder] }, { prefix: 'fs_' });
console.log(`MCP server started: ${fs.tools.length} tools (${fs.tools.map((tool) => tool.name).join(', ')})`);

/** The tool results so far, newest last. */
const results = (request: ModelRequest) => request.messages.filter((m): m is ToolMessage => m.role === 'tool');

/**
 * The scripted model: list the folder, read up to three files (fs_list_directory prints one
 * `[FILE] name` or `[DIR] name` line per entry), then answer from the files it read.
 */
let reading: string[] = [];
const model = scriptedModel([
  () => ({ toolCalls: [{ id: 'ls', name: 'fs_list_directory', args: { path: folder } }] }),
  (request): ScriptedReply => {
    const listing = results(request)[0]!.content.split('\n');
    // Sorted: the server lists in the order the file system gives.
    reading = listing.flatMap((line) => (line.startsWith('[FILE] ') ? [line.slice('[FILE] '.length)] : [])).sort().slice(0, 3);
    if (reading.length === 0) return { text: 'The folder has no files.' };
    return { toolCalls: reading.map((name, i) => ({ id: `read-${i}`, name: 'fs_read_text_file', args: { path: path.join(folder, name) } })) };
  },
  (request): ScriptedReply => {
    const byId = new Map(results(request).map((result) => [result.toolCallId, result]));
    const counts = reading.map((name, i) => {
      const read = byId.get(`read-${i}`);
      return { name, lines: !read || read.isError ? 0 : read.content.split('\n').filter(Boolean).length };
    });
    const largest = counts.reduce((a, b) => (b.lines > a.lines ? b : a));
    return { text: `${counts.map((c) => `${c.name}: ${c.lines} non-empty lines`).join(', ')}. The longest is ${largest.name}.` };
  },
]);

let exitCode = 1;
try {
  for await (const event of streamAgent({
    model,
    // Listed again at the start of every run: a server whose tools change is seen at the next run.
    toolSources: [fs],
    instructions: 'You answer questions about the files of one folder, with the filesystem tools.',
    prompt: 'How many lines do the files in this folder have, and which one is the largest?',
    signal: AbortSignal.timeout(60_000),
  })) {
    if (event.type === 'tool.started') console.log(`→ ${event.call.name} ${JSON.stringify(event.call.args).replaceAll(folder, '<folder>')}`);
    if (event.type === 'tool.finished') console.log(`  ${event.result.isError ? 'error' : 'ok'}: ${event.result.content.split('\n')[0]!.slice(0, 60)}`);
    if (event.type === 'done') {
      // A failed run says why (event.result.error: the cause and what to check), on stderr.
      if (event.result.error) console.error(`${event.result.outcome.type}: ${event.result.error.message}`);
      else console.log(`${event.result.outcome.type}: ${event.result.text}`);
      exitCode = event.result.outcome.type === 'Completed' ? 0 : 1;
    }
  }
} finally {
  await fs.close();
}
process.exit(exitCode);

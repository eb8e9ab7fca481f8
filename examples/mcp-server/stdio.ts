// examples/mcp-server/stdio.ts
// An agent served over stdio, the way Claude Desktop, Cursor and VS Code start a local MCP server.
// Calls run as durable sessions in .loopchart/mcp.db; log to stderr only (stdout is the protocol).
import { createAgentMachine, defineTool, openSessionStore } from 'loopchart';
import { serveStdio } from 'loopchart/mcp-server';
import { scriptedModel } from 'loopchart/testing';
import { z } from 'zod';

const store = await openSessionStore(process.env.LOOPCHART_STORE ?? '.loopchart/mcp.db');
const wordCount = defineTool({
  name: 'word_count',
  description: 'Counts the words of a text.',
  input: z.object({ text: z.string() }),
  execute: ({ text }) => text.split(/\s+/).filter(Boolean).length,
});
// Offline: a scripted model. Swap in openAICompatibleModel(...) or aiSdkModel(...) for a real one.
const counter = createAgentMachine({
  model: scriptedModel([
    (request) => ({ toolCalls: [{ name: 'word_count', args: { text: String(request.messages.at(-1)?.content) } }] }),
    (request) => ({ text: `That text has ${String(request.messages.at(-1)?.content)} words.` }),
  ]),
  tools: [wordCount],
});

const serving = await serveStdio({
  agents: [{ agent: counter, name: 'count_words', description: 'Counts the words of a task text.' }],
  store,
});
process.stderr.write('loopchart MCP server on stdio\n');
await serving.closed;
await store.close();

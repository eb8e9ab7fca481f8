// examples/readme/mcp-server.ts
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createAgentMachine, MemorySessionStore, runAgent } from 'loopchart';
import { toNodeListener } from 'loopchart/http';
import { mcpTools } from 'loopchart/mcp';
import { createMcpHandler } from 'loopchart/mcp-server';
import { scriptedModel } from 'loopchart/testing';
import { z } from 'zod';

// The served agent: a city in, a structured answer out (the tool's outputSchema).
const forecaster = createAgentMachine({
  model: scriptedModel([(request) => ({ text: JSON.stringify({ city: String(request.messages.at(-1)?.content).slice(12), celsius: 21 }) })]),
});
const mcp = createMcpHandler({
  agents: [
    {
      agent: forecaster,
      name: 'forecast',
      description: 'The weather of a city.',
      input: z.object({ city: z.string() }),
      prompt: ({ city }: { city: string }) => `Weather for ${city}`,
      output: z.object({ city: z.string(), celsius: z.number() }),
    },
  ],
  store: new MemorySessionStore(), // each call a durable session in it
  allowedOrigins: [], // a browser page from any origin is refused (403)
});
const server = createServer(toNodeListener(mcp));
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`;

// Another loopchart agent uses it as a tool, over MCP.
const team = await mcpTools({ url });
const { text } = await runAgent({
  model: scriptedModel([{ toolCalls: [{ name: 'forecast', args: { city: 'Lisbon' } }] }, (request) => ({ text: `Forecast: ${String(request.messages.at(-1)?.content)}` })]),
  toolSources: [team],
  prompt: 'How warm is Lisbon?',
});
console.log(text); // Forecast: {"city":"Lisbon","celsius":21}

await team.close();
await mcp.close();
server.close();

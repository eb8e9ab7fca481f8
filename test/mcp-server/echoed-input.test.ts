/**
 * What a protocol error says back of what the client sent, over Streamable HTTP on 127.0.0.1 with
 * the SDK's own client: a tool name or argument keys of any size, with control characters (a
 * terminal's escape sequences, a NUL), come back short and escaped, never as sent.
 */
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ErrorCode, type McpError } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createAgentMachine } from '../../src/index.js';
import type { McpAgent } from '../../src/mcp-server.js';
import { scriptedModel } from '../../src/testing.js';
import { client, serveHttp, type ServedHttp } from './support.js';

const open: { close(): Promise<void> }[] = [];
afterEach(async () => {
  for (const made of open.splice(0).reverse()) await made.close();
});
const strict: McpAgent = {
  agent: createAgentMachine({ model: scriptedModel([{ text: 'ok' }]) }),
  name: 'strict',
  description: 'Takes a city and nothing else.',
  input: z.strictObject({ city: z.string() }),
} as McpAgent;
const refusal = (call: Promise<unknown>) => call.then(() => null, (error: unknown) => error as McpError);
// C0 controls but tab and newline (the messages' own layout), DEL, C1 controls.
const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/;

describe('what the client sent, in a protocol error', () => {
  it('an unknown tool name, or argument keys a strict schema refuses: escaped and bounded', async () => {
    const served: ServedHttp = await serveHttp({ agents: [strict] });
    open.push(served);
    const { client: mcp } = client();
    await mcp.connect(new StreamableHTTPClientTransport(served.url));
    open.push(mcp);
    const hostile = `x\u0000\u001b]0;owned\u0007\u001b[2J${'y'.repeat(200_000)}`;
    const unknown = await refusal(mcp.callTool({ name: hostile, arguments: {} }));
    expect(unknown?.code).toBe(ErrorCode.InvalidParams);
    // Before: 200,105 characters, the escape sequences as sent.
    expect(unknown!.message.length).toBeLessThan(2_000);
    expect(unknown!.message).not.toMatch(CONTROL);
    expect(unknown!.message).toMatch(/unknown tool 'x\\u0000\\u001b\]0;owned/);
    const keys = await refusal(mcp.callTool({ name: 'strict', arguments: { city: 'Oslo', [hostile]: 1 } }));
    expect(keys?.code).toBe(ErrorCode.InvalidParams);
    expect(keys!.message.length).toBeLessThan(4_000);
    expect(keys!.message).not.toMatch(CONTROL);
  });
});

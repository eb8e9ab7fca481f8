/**
 * Two callers that name the same new session at once, over Streamable HTTP on 127.0.0.1 with the
 * SDK's own client. A name is kept in its caller's namespace, so the two get a session each, and
 * neither reads the other's; before, the one whose ownership check ran before the other's session
 * existed was told the session was busy (InvalidRequest) or, once it had ended, 'belongs to
 * another scope' (InternalError), and after the first fix InvalidParams: a refusal either way.
 */
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, describe, expect, it } from 'vitest';
import { createAgentMachine, MemorySessionStore, type ModelRequest } from '../../src/index.js';
import { scriptedModel } from '../../src/testing.js';
import { client, namedSessionId, serveHttp, until, type ServedHttp } from './support.js';

const heard = (request: ModelRequest) => request.messages.filter((m) => m.role === 'user').map((m) => m.content).join(' | ');
const notes = () => ({
  agent: createAgentMachine({ model: scriptedModel(Array.from({ length: 10 }, () => (request: ModelRequest) => ({ text: `I know: ${heard(request)}`, delayMs: Number(process.env.NOTES_MS ?? 0) }))) }),
  name: 'notes',
  description: 'Keeps notes.',
});
const byToken = (request: Request) => ({ caller: `user:${/^Bearer (\w+)$/.exec(request.headers.get('authorization') ?? '')?.[1] ?? 'nobody'}` });

const open: { close(): Promise<void> }[] = [];
afterEach(async () => {
  for (const made of open.splice(0).reverse()) await made.close();
  delete process.env.NOTES_MS;
});
async function serve(store: MemorySessionStore): Promise<ServedHttp> {
  const served = await serveHttp({ agents: [notes()], store, authorize: byToken });
  open.push(served);
  return served;
}
async function connect(served: ServedHttp, user: string) {
  const { client: mcp } = client();
  await mcp.connect(new StreamableHTTPClientTransport(served.url, { requestInit: { headers: { authorization: `Bearer ${user}` } } }));
  open.push(mcp);
  return mcp;
}
const named = (task: string) => ({ name: 'notes', arguments: { task }, _meta: { 'loopchart/sessionId': 'trip' } });
const text = (result: unknown) => ((result as CallToolResult).content[0] as { text: string }).text;
const sessionIdOf = (result: unknown) => (result as CallToolResult)._meta?.['loopchart/sessionId'] as string;

describe('a name two callers send at once is a session of each', () => {
  it("while the first call still runs: each call runs in its caller's own session and answers its own question", async () => {
    process.env.NOTES_MS = '500';
    const store = new MemorySessionStore();
    const served = await serve(store);
    const [ann, bob] = [await connect(served, 'ann'), await connect(served, 'bob')];
    const anns = ann.callTool(named('my passport is P1234567'));
    expect(await until(async () => (await store.load(namedSessionId('notes', 'user:ann', 'trip'))) !== undefined)).toBe(true);
    const bobs = bob.callTool(named('what do you know?'));
    expect(text(await bobs)).toBe('I know: what do you know?');
    expect(text(await anns)).toBe('I know: my passport is P1234567');
    expect(sessionIdOf(await anns)).not.toBe(sessionIdOf(await bobs));
    expect(await store.load('trip')).toBeUndefined();
  });
});

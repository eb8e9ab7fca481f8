/**
 * Two callers that name the same new session at once, over Streamable HTTP on 127.0.0.1 with the
 * SDK's own client: the one whose ownership check ran before the other's session existed must
 * still get the one answer for another caller's session (InvalidParams, the same message), not a
 * busy signal or an error that says the session exists.
 */
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ErrorCode, type McpError } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, describe, expect, it } from 'vitest';
import { createAgentMachine, MemorySessionStore, type ModelRequest, type StoredSession } from '../../src/index.js';
import { scriptedModel } from '../../src/testing.js';
import { client, serveHttp, until, type ServedHttp } from './support.js';

/**
 * A store (in memory) whose next load of one session reads it at once and hands the read back only
 * when the test says: what a slow database does to a check that reads, then acts on what it read.
 */
class HeldLoadStore extends MemorySessionStore {
  #gate: { sessionId: string; open: Promise<void> } | undefined;
  holdNextLoad(sessionId: string): { taken: () => boolean; release: () => void } {
    let release!: () => void;
    this.#gate = { sessionId, open: new Promise((resolve) => (release = resolve)) };
    return { taken: () => this.#gate === undefined, release };
  }
  override async load(sessionId: string): Promise<StoredSession | undefined> {
    const read = await super.load(sessionId);
    const gate = this.#gate;
    if (gate?.sessionId === sessionId) {
      this.#gate = undefined;
      await gate.open;
    }
    return read;
  }
}

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
const refusal = (call: Promise<unknown>) => call.then(() => null, (error: unknown) => error as McpError);

describe("a session two callers name at once is the first one's", () => {
  it("the other's check passed before the session existed, and the first call still runs in it: InvalidParams, as for any session of another caller", async () => {
    process.env.NOTES_MS = '1000';
    const store = new HeldLoadStore();
    const served = await serve(store);
    const [ann, bob] = [await connect(served, 'ann'), await connect(served, 'bob')];
    const held = store.holdNextLoad('trip');
    const bobs = refusal(bob.callTool(named('what do you know?')));
    expect(await until(held.taken)).toBe(true);
    const anns = ann.callTool(named('my passport is P1234567'));
    anns.catch(() => {});
    expect(await until(async () => (await store.load('trip')) !== undefined)).toBe(true);
    held.release();
    const answer = await bobs;
    // Before: InvalidRequest, "session 'trip' is running another call; wait for it to end".
    expect(answer?.code).toBe(ErrorCode.InvalidParams);
    expect(answer?.message).toBe((await refusal(bob.callTool(named('again'))))?.message);
    await anns;
    expect((await store.load('trip'))?.messages.filter((m) => m.role === 'user').map((m) => m.content)).toEqual(['my passport is P1234567']);
  });

  it("the other's check passed before the session existed, and the first call has ended: InvalidParams, nothing of it read", async () => {
    const store = new HeldLoadStore();
    const served = await serve(store);
    const [ann, bob] = [await connect(served, 'ann'), await connect(served, 'bob')];
    const held = store.holdNextLoad('trip');
    const bobs = refusal(bob.callTool(named('what do you know?')));
    expect(await until(held.taken)).toBe(true);
    await ann.callTool(named('my passport is P1234567'));
    held.release();
    const answer = await bobs;
    // Before: InternalError, "session 'trip' belongs to another scope".
    expect(answer?.code).toBe(ErrorCode.InvalidParams);
    expect(answer?.message).toBe((await refusal(bob.callTool(named('again'))))?.message);
    expect((await store.load('trip'))?.messages.map((m) => m.content)).toEqual(['my passport is P1234567', 'I know: my passport is P1234567']);
  });
});

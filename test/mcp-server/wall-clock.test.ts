/**
 * A call's time limit (`callTimeoutMs`) is counted on the process's monotonic clock, not the wall
 * clock: a wall clock that steps (NTP, a VM resumed) while a call starts does not cut the call short
 * or stretch it. Before, what was left of the limit was `started + callTimeoutMs - Date.now()`:
 * a step forward of two hours while the call read its session gave the run 1 ms, and a call that
 * takes 50 ms answered "the agent's run took longer than 60000 ms and was cancelled".
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { MemorySessionStore } from '../../src/index.js';
import { createMcpServer } from '../../src/mcp-server.js';
import { AGENTS } from './fixtures/agents.js';

// The slow agent's one model call: 50 ms, far within the limit.
const slowMs = process.env.SLOW_MS;
process.env.SLOW_MS = '50';
afterEach(() => {
  vi.restoreAllMocks();
});
afterAll(() => {
  if (slowMs === undefined) delete process.env.SLOW_MS;
  else process.env.SLOW_MS = slowMs;
});

describe('a wall clock that steps while a call starts', () => {
  it('forward two hours: the call still has its whole callTimeoutMs and answers', async () => {
    const realNow = Date.now.bind(Date);
    let offset = 0;
    vi.spyOn(Date, 'now').mockImplementation(() => realNow() + offset);
    /** The store the call reads its named session from: the wall clock steps forward during that read. */
    class SteppingStore extends MemorySessionStore {
      override async load(sessionId: string) {
        offset = 2 * 3_600_000;
        return super.load(sessionId);
      }
    }
    const [serverSide, clientSide] = InMemoryTransport.createLinkedPair();
    const server = createMcpServer({ agents: AGENTS, store: new SteppingStore(), callTimeoutMs: 60_000 });
    await server.connect(serverSide);
    const client = new Client({ name: 'test-client', version: '1' });
    await client.connect(clientSide);
    try {
      // A session the client names: the server reads the store to check it is this caller's.
      const result = (await client.callTool({ name: 'slow', arguments: { task: 'plum' }, _meta: { 'loopchart/sessionId': 'my-notes' } })) as CallToolResult;
      expect(offset).toBeGreaterThan(0);
      expect((result.content[0] as { text: string }).text).toBe('finally done');
      expect(result.isError).toBeFalsy();
    } finally {
      await client.close();
      await server.close();
    }
  });
});

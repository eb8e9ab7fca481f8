/**
 * A call's progress notifications reach the client before its result, however slowly the
 * transport writes them: the SDK's client drops progress that arrives after the response, and a
 * notification written without waiting for it could be overtaken by the result (seen in CI under
 * load: one progress of two).
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { createMcpServer } from '../../src/mcp-server.js';
import { AGENTS } from './fixtures/agents.js';

describe('progress before the result', () => {
  it('every turn is heard, though the transport takes its time with each notification', async () => {
    const [serverSide, clientSide] = InMemoryTransport.createLinkedPair();
    // The server's writes: a progress notification takes 30 ms, everything else goes at once.
    const send = serverSide.send.bind(serverSide);
    serverSide.send = async (message: JSONRPCMessage, options) => {
      if ('method' in message && message.method === 'notifications/progress') await new Promise((resolve) => setTimeout(resolve, 30));
      return send(message, options);
    };
    const server = createMcpServer({ agents: AGENTS });
    await server.connect(serverSide);
    const client = new Client({ name: 'test-client', version: '1' });
    await client.connect(clientSide);
    try {
      const progress: unknown[] = [];
      await client.callTool({ name: 'echo', arguments: { task: 'apple' } }, undefined, { onprogress: (p) => progress.push(p) });
      expect(progress).toEqual([
        { progress: 1, message: 'turn 1 finished' },
        { progress: 2, message: 'turn 2 finished' },
      ]);
    } finally {
      await client.close();
      await server.close();
    }
  });
});

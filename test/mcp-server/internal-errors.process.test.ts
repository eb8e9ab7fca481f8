/**
 * What an MCP client reads of a store that fails, over stdio: the fixture server
 * (fixtures/failing-store-server.ts) is a real child process on a SQLite file whose store's read
 * or write throws an error holding a connection string with its password, and the SDK's own
 * client calls it. Before, the call's JSON-RPC error carried the store's message to the client
 * (the editor, and its logs); now it reads a fixed sentence and a reference, and the error is on
 * the server's stderr under that reference. The HTTP side: internal-errors.test.ts.
 */
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { until, useStdioServer } from './support.js';

const SECRET = 'postgres://admin:hunter2-s3cret@db.internal:5432/prod';
const stdio = useStdioServer(fileURLToPath(new URL('./fixtures/failing-store-server.ts', import.meta.url)));

describe('a failing store, over stdio', () => {
  for (const [what, fails] of [
    ['a store read', 'load'],
    ['a store write', 'apply'],
  ] as const) {
    it(`${what} that throws: the client reads a sentence and a reference, the server's stderr has the error under it`, async () => {
      const server = await stdio.start(join(stdio.dir, `${fails}.db`), { STORE_FAILS: fails, STORE_SECRET: SECRET });
      try {
        const answer = await server.client.callTool({ name: 'echo', arguments: { task: 'pear' } }, undefined, { timeout: 10_000 }).catch((error: unknown) => error);
        expect(answer).toBeInstanceOf(McpError);
        const { code, message } = answer as McpError;
        expect(code).toBe(ErrorCode.InternalError);
        expect(message).not.toContain('hunter2');
        const reference = /the MCP server failed to answer the call \(reference ([0-9a-f]{8})\)/.exec(message)?.[1];
        expect(reference).toBeDefined();
        // Written before the answer was sent; read once it has come through the pipe.
        expect(await until(() => server.stderr().includes(`reference ${reference}`), 5_000)).toBe(true);
        expect(server.stderr()).toMatch(new RegExp(`loopchart MCP server: tools/call of 'echo' failed \\(reference ${reference}\\):[^\\n]*${SECRET.replace(/[.]/g, '\\.')}`));
      } finally {
        await server.client.close();
      }
    }, 30_000);
  }
});

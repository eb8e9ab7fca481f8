/**
 * A store that fails while a decision is written: the stdio fixture server (a real child process
 * on a SQLite file) asks its client to approve a call, and the client, before it answers, has
 * another connection hold the file's write lock past the server's busy timeout (what a second
 * process mid-write, or a backup, does). The decision cannot be stored: the call answers an
 * error (a reference, not the store's error, which names the file: that is on the server's
 * stderr under the reference), and the server process stays up for the next call.
 */
import { join } from 'node:path';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { McpError, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openSqlite } from '../../src/stores/sqlite-driver.js';
import { SqliteSessionStore } from '../../src/sqlite.js';
import { bundledCommand, type NodeCommand } from '../sessions/fixtures/processes.js';
import { client, scratchDir, STDIO_SERVER, until } from './support.js';

const scratch = scratchDir();
const db = join(scratch.dir, 'mcp.db');
let server: NodeCommand;
beforeAll(async () => {
  server = await bundledCommand(STDIO_SERVER);
  // The file and its tables exist before the lock is taken.
  await new SqliteSessionStore({ path: db }).close();
});
afterAll(() => {
  server?.dispose();
  scratch.remove();
});

describe('the store fails as a decision is written', () => {
  it('the call answers an error and the server process goes on', async () => {
    let release = () => {};
    const { client: mcp, asked } = client(() => {
      const locker = openSqlite(db, { busyTimeoutMs: 1_000 });
      locker.exec('BEGIN IMMEDIATE');
      // Held past the server's busy timeout (5 s), released once the call has answered.
      release = () => {
        release = () => {};
        locker.exec('COMMIT');
        locker.close();
      };
      return { action: 'accept', content: { approve: true } };
    });
    const transport = new StdioClientTransport({ command: process.execPath, args: [...server.args, db], env: { PATH: process.env.PATH ?? '' }, stderr: 'pipe' });
    let stderr = '';
    transport.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    let exited = false;
    await mcp.connect(transport);
    transport.onclose = () => (exited = true);
    try {
      const answer = await mcp.callTool({ name: 'guarded', arguments: { task: 'tidy' } }, undefined, { timeout: 30_000 }).catch((error: unknown) => error);
      release();
      expect(asked).toHaveLength(1);
      expect(answer).toBeInstanceOf(McpError);
      // The store's error names the database file: the client reads a reference to it, the server's stderr the error.
      const { message } = answer as McpError;
      expect(message).not.toContain(db);
      const reference = /\(reference ([0-9a-f]{8})\)/.exec(message)?.[1];
      expect(reference).toBeDefined();
      expect(await until(() => stderr.includes(`reference ${reference}`), 5_000)).toBe(true);
      expect(stderr).toMatch(/stayed locked by another writer/);
      // Before: the decision's failed write was an unhandled rejection, and the server process died of it (StoreBusyError on its stderr) just after answering.
      expect(await until(() => exited, 1_000)).toBe(false);
      // Reported once, under the reference, by the call that failed: not by an unhandled rejection.
      expect(stderr.match(/StoreBusyError/g)).toHaveLength(1);
      const next = (await mcp.callTool({ name: 'echo', arguments: { task: 'still here' } }, undefined, { timeout: 10_000 })) as CallToolResult;
      expect((next.content[0] as { text: string }).text).toBe('echo: still here (still here is a word)');
    } finally {
      release();
      await mcp.close();
    }
  }, 60_000);
});

/**
 * What the stdio server answers to JSON that is no valid JSON-RPC message, written raw to the
 * fixture server's stdin (a real child process): a request whose id can be read gets an error
 * answer to that id instead of nothing, which left its client waiting for its own timeout.
 */
import { spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bundledCommand, type NodeCommand } from '../sessions/fixtures/processes.js';
import { STDIO_SERVER, until } from './support.js';

let server: NodeCommand;
beforeAll(async () => {
  server = await bundledCommand(STDIO_SERVER);
});
afterAll(() => server?.dispose());

interface Answer {
  id: unknown;
  result?: unknown;
  error?: { code: number; message: string };
}

describe('a message the JSON-RPC schema refuses', () => {
  it('a request with a readable id is answered InvalidRequest to that id; a malformed response is not answered; the server goes on', async () => {
    const child = spawn(process.execPath, server.args, { env: { PATH: process.env.PATH ?? '' }, stdio: ['pipe', 'pipe', 'inherit'] });
    const answers: Answer[] = [];
    let buffered = '';
    child.stdout.on('data', (chunk: Buffer) => {
      buffered += chunk.toString();
      const lines = buffered.split('\n');
      buffered = lines.pop()!;
      for (const line of lines.filter(Boolean)) answers.push(JSON.parse(line) as Answer);
    });
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    const send = (message: object) => child.stdin.write(`${JSON.stringify(message)}\n`);
    try {
      send({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } });
      send({ jsonrpc: '2.0', method: 'notifications/initialized' });
      send({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: null });
      send({ jsonrpc: '2.0', id: 'three', method: 'tools/call', params: { name: 'echo', arguments: { task: 'x' }, _meta: { progressToken: { not: 'a token' } } } });
      // A response the server never asked for, malformed: answering it would speak to an id of the client's own.
      send({ jsonrpc: '2.0', id: 77, result: 5, extra: true });
      send({ jsonrpc: '2.0', id: 4, method: 'tools/list' });
      expect(await until(() => answers.some((answer) => answer.id === 4), 20_000)).toBe(true);
      const byId = new Map(answers.map((answer) => [answer.id, answer]));
      // Before: no answer at all to 2 and 'three' (the SDK drops a message it cannot read as a request).
      for (const id of [2, 'three']) {
        expect(byId.get(id)?.error?.code).toBe(-32_600);
        expect(byId.get(id)?.error?.message).toMatch(/not a valid JSON-RPC message/);
      }
      expect(byId.has(77)).toBe(false);
      expect(byId.get(4)?.result).toMatchObject({ tools: expect.any(Array) });
      child.stdin.end();
      expect(await exited).toBe(0);
    } finally {
      child.kill('SIGKILL');
    }
  }, 40_000);
});

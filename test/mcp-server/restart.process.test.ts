/**
 * A call that names a session whose run was left in flight by a server that died: the fixture
 * server (test/mcp-server/fixtures/restart-server.ts) is a real child process on a SQLite file,
 * killed during a run; a second process on the same file gets a new call in that session.
 */
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { SqliteSessionStore } from '../../src/sqlite.js';
import { until, useStdioServer } from './support.js';

const server = useStdioServer(fileURLToPath(new URL('./fixtures/restart-server.ts', import.meta.url)));

/** A server process on `db` (answers after `answerMs`) and a client to it; `modelCalls` counts this process's model calls. */
async function start(db: string, answerMs: number) {
  const started = await server.start(db, { ANSWER_MS: String(answerMs) });
  return { ...started, modelCalls: () => started.stderr().split('model called').length - 1 };
}

const ask = (question: string, sessionId: string) => ({ name: 'oracle', arguments: { task: question }, _meta: { 'loopchart/sessionId': sessionId } });
const text = (result: CallToolResult) => (result.content[0] as { text: string }).text;

describe('a new call in a session whose run a dead server left in flight', () => {
  it('drives that run to its end, then runs its own question and answers it (never the earlier question\'s answer)', async () => {
    const db = join(server.dir, 'restart.db');
    const first = await start(db, 60_000);
    const killed = first.client.callTool(ask('what is the capital of France?', 'trip')).catch(() => 'gone');
    expect(await until(() => first.modelCalls() === 1, 20_000)).toBe(true);
    process.kill(first.pid, 'SIGKILL');
    expect(await killed).toBe('gone');
    await first.client.close();

    const second = await start(db, 200);
    try {
      const result = (await second.client.callTool(ask('how tall is Mont Blanc?', 'trip'), undefined, { timeout: 30_000 })) as CallToolResult;
      // Before: 'answer to: what is the capital of France?', the earlier run's answer, as this call's own.
      expect(result.isError).toBeFalsy();
      expect(text(result)).toBe('answer to: how tall is Mont Blanc?');
      expect(second.modelCalls()).toBe(2);
      const sessionId = result._meta?.['loopchart/sessionId'] as string;
      const store = new SqliteSessionStore({ path: db });
      try {
        const messages = (await store.load(sessionId))!.messages.map((m) => `${m.role}: ${String(m.content)}`);
        expect(messages).toEqual([
          'user: what is the capital of France?',
          'assistant: answer to: what is the capital of France?',
          'user: how tall is Mont Blanc?',
          'assistant: answer to: how tall is Mont Blanc?',
        ]);
      } finally {
        await store.close();
      }
    } finally {
      await second.client.close();
    }
  }, 60_000);
});

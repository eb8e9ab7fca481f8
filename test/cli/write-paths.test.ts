/**
 * A file the CLI is told to write (`view export -o FILE`) that cannot be written, in process: a
 * folder, a folder that does not exist. One line naming the path and why, never "unexpected error".
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAgentMachine } from '../../machines/agent.machine.js';
import { main } from '../../src/cli/main.js';
import { scriptedModel } from '../../src/models/scripted.js';
import { DurableSession } from '../../src/sessions/durable-session.js';
import { SqliteSessionStore } from '../../src/stores/sqlite.js';

const dir = mkdtempSync(join(tmpdir(), 'loopchart-cli-write-'));
const db = join(dir, 'sessions.db');
beforeAll(async () => {
  const store = new SqliteSessionStore({ path: db });
  const session = await DurableSession.open({ machine: createAgentMachine({ model: scriptedModel([{ text: 'Done.' }]) }), store, sessionId: 'one' });
  session.send({ type: 'input', message: 'Hello.' });
  await session.whenIdle();
  await session.close();
  await store.close();
  mkdirSync(join(dir, 'a-folder'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function cli(...argv: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await main(argv, { out: (line) => out.push(line), err: (line) => err.push(line) });
  return { code, out: out.join('\n'), err: err.join('\n') };
}

describe('view export -o FILE that cannot be written', () => {
  it.each([
    ['a folder', 'a-folder', 'illegal operation on a directory (EISDIR)'],
    ['in a folder that does not exist', 'missing/run.html', 'no such file or directory (ENOENT)'],
  ])('%s: one line naming it and why, exit 1', async (_, target, why) => {
    const path = join(dir, target);
    const { code, out, err } = await cli('view', 'export', 'one', '-o', path, '--store', db);
    expect(out).toBe('');
    expect(err).toBe(`loopchart: cannot open ${path}: ${why}`);
    expect(code).toBe(1);
  });
});

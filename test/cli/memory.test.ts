/**
 * `loopchart memory list | export | delete` (issue 45's privacy controls on the command line), in
 * process on a real SQLite file: a scope's memory listed, exported as JSON, and forgotten (search
 * index included: the scope's words leave the FTS vocabulary), others kept.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createAgentMachine } from '../../machines/agent.machine.js';
import { main } from '../../src/cli/main.js';
import { agentMemory } from '../../src/memory.js';
import { scriptedModel } from '../../src/models/scripted.js';
import { DurableSession } from '../../src/sessions/durable-session.js';
import { SqliteSessionStore } from '../../src/stores/sqlite.js';

const root = mkdtempSync(join(tmpdir(), 'loopchart-cli-memory-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

async function cli(...argv: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await main(argv, { out: (line) => out.push(line), err: (line) => err.push(line) });
  return { code, out: out.join('\n'), err: err.join('\n') };
}

async function remember(path: string, scope: string, sessionId: string, said: string) {
  const store = new SqliteSessionStore({ path });
  const machine = createAgentMachine({ model: scriptedModel([{ text: `Noted: ${said}` }]), operations: [agentMemory({ store })] });
  const session = await DurableSession.open({ machine, store, sessionId, scope });
  session.send({ type: 'input', message: said });
  await session.whenIdle();
  await session.close();
  await store.close();
}

describe('loopchart memory', () => {
  it('lists the scopes, exports one as JSON, and deletes it only with --yes', async () => {
    const path = join(root, 'memory.db');
    await remember(path, 'user:ada', 'ada-1', 'I work on the Lovelace engine.');
    await remember(path, 'user:bob', 'bob-1', 'I like tea.');
    const listed = await cli('memory', 'list', '--store', path);
    expect(listed.code).toBe(0);
    expect(listed.out.split('\n').map((line) => line.split('  ')[0]).sort()).toEqual(['user:ada', 'user:bob']);
    expect(listed.out).toMatch(/user:ada {2}working 0 chars {2}2 entries from 1 sessions/);

    const exported = await cli('memory', 'export', 'user:ada', '--store', path);
    expect(exported.code).toBe(0);
    const data = JSON.parse(exported.out) as { scope: string; entries: { text: string }[] };
    expect(data.scope).toBe('user:ada');
    expect(data.entries.map((entry) => entry.text)).toEqual(['I work on the Lovelace engine.', 'Noted: I work on the Lovelace engine.']);

    const unsure = await cli('memory', 'delete', 'user:ada', '--store', path);
    expect(unsure.code).toBe(2);
    expect(unsure.err).toContain('run again with --yes');
    const deleted = await cli('memory', 'delete', 'user:ada', '--yes', '--store', path);
    expect(deleted.out).toBe('forgot 2 entries and the working memory of user:ada');
    expect(JSON.parse((await cli('memory', 'export', 'user:ada', '--store', path)).out).entries).toEqual([]);
    expect((await cli('memory', 'list', '--store', path)).out.split('\n').map((line) => line.split('  ')[0])).toEqual(['user:bob']);
  });

  it('refuses a scope that cannot be one, an unknown command, and a store that does not exist', async () => {
    const path = join(root, 'refuse.db');
    await remember(path, 'user:ada', 'ada-1', 'hello');
    const bad = await cli('memory', 'export', 'a\u0007b', '--store', path);
    expect(bad.code).not.toBe(0);
    expect(bad.err).toContain('invalid memory scope: must not contain control characters');
    expect((await cli('memory', 'forget', 'x', '--store', path)).err).toContain("unknown command 'memory forget'");
    expect((await cli('memory', 'list', '--store', join(root, 'nothing.db'))).code).not.toBe(0);
  });
});

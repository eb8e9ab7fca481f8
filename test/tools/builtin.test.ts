import { mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PendingToolCall } from '../../src/schemas.js';
import { calculatorTool, DirListingSchema, listDirTool, readFileTool, writeFileTool } from '../../src/tools/builtin.js';
import { ToolSet } from '../../src/tools/define-tool.js';
import { PathOutsideRootError } from '../../src/tools/errors.js';
import { runToolCalls } from '../../src/tools/run-tools.js';

let base: string;
let root: string;
let outside: string;

beforeAll(async () => {
  base = await mkdtemp(path.join(tmpdir(), 'loopchart-builtin-'));
  root = path.join(base, 'root');
  outside = path.join(base, 'outside');
  await mkdir(path.join(root, 'docs'), { recursive: true });
  await mkdir(outside);
  await writeFile(path.join(root, 'b.txt'), 'bravo\n');
  await writeFile(path.join(root, 'a.txt'), 'alpha');
  await writeFile(path.join(root, 'docs', 'readme.md'), '# Readme\nhello');
  await writeFile(path.join(root, 'blob.bin'), Buffer.from([1, 2, 0, 3]));
  await writeFile(path.join(outside, 'secret.txt'), 'top secret');
  await symlink(outside, path.join(root, 'escape'));
  await symlink(path.join(root, 'a.txt'), path.join(root, 'alias.txt'));
  // Link chains, resolved hop by hop: one ends outside, one ends inside after a detour.
  await mkdir(path.join(root, 'chain'));
  await symlink('hop2', path.join(root, 'chain', 'hop1'));
  await symlink('../chain/hop3', path.join(root, 'chain', 'hop2'));
  await symlink('../../outside/secret.txt', path.join(root, 'chain', 'hop3'));
  await symlink('../docs/../b.txt', path.join(root, 'chain', 'home'));
});

afterAll(async () => {
  await rm(base, { recursive: true, force: true });
});

const ctx = () => ({ signal: new AbortController().signal, toolCallId: 't1', idempotencyKey: 'k' });

/** Runs one call through the real runner, as the driver will. */
async function call(tools: ToolSet, name: string, args: unknown) {
  const calls: PendingToolCall[] = [{ call: { id: 'c1', name, args } }];
  const [result] = await runToolCalls(calls, tools, { idempotencyKey: (c) => c.id });
  return result!;
}

describe('list_dir', () => {
  it('lists entries sorted by name, with types and file sizes, as JSON', async () => {
    const tools = new ToolSet([listDirTool({ root })]);
    const result = await call(tools, 'list_dir', {});
    expect(result.isError).toBeUndefined();
    expect(DirListingSchema.parse(JSON.parse(result.content))).toEqual({
      path: '.',
      entries: [
        { name: 'a.txt', type: 'file', size: 5 },
        { name: 'alias.txt', type: 'symlink' },
        { name: 'b.txt', type: 'file', size: 6 },
        { name: 'blob.bin', type: 'file', size: 4 },
        { name: 'chain', type: 'directory' },
        { name: 'docs', type: 'directory' },
        { name: 'escape', type: 'symlink' },
      ],
    });
  });

  it('lists a subdirectory and says how many entries it left out', async () => {
    const sub = await listDirTool({ root }).execute({ path: 'docs' }, ctx());
    expect(sub).toEqual({ path: 'docs', entries: [{ name: 'readme.md', type: 'file', size: 14 }] });
    const capped = await listDirTool({ root, maxEntries: 2 }).execute({ path: '.' }, ctx());
    expect(capped.entries.map((e) => e.name)).toEqual(['a.txt', 'alias.txt']);
    expect(capped.omitted).toBe(5);
  });

  it('refuses paths outside the root: parent, absolute, symlinked, sneaking back out', async () => {
    for (const p of ['..', '../outside', outside, 'escape', 'docs/../../outside']) {
      await expect(listDirTool({ root }).execute({ path: p }, ctx())).rejects.toBeInstanceOf(PathOutsideRootError);
    }
  });

  it('reports a missing directory with the path the model gave, not the host path', async () => {
    const result = await call(new ToolSet([listDirTool({ root })]), 'list_dir', { path: 'nope' });
    expect(result).toMatchObject({ isError: true, content: 'nope: no such file or directory' });
  });
});

describe('read_file', () => {
  const tools = () => new ToolSet([readFileTool({ root })]);

  it('reads a text file, also through a symlink that stays inside the root', async () => {
    expect(await call(tools(), 'read_file', { path: 'docs/readme.md' })).toMatchObject({ content: '# Readme\nhello' });
    expect(await call(tools(), 'read_file', { path: 'alias.txt' })).toMatchObject({ content: 'alpha' });
    expect(await call(tools(), 'read_file', { path: path.join(root, 'a.txt') })).toMatchObject({ content: 'alpha' });
  });

  it('refuses paths outside the root, lexically or through a symlink, as an error result', async () => {
    for (const p of ['../outside/secret.txt', path.join(outside, 'secret.txt'), 'escape/secret.txt']) {
      const result = await call(tools(), 'read_file', { path: p });
      expect(result).toMatchObject({ isError: true, content: `path "${p}" is outside the allowed root directory` });
    }
  });

  it('follows a link chain hop by hop: refused when it ends outside, read when it ends inside', async () => {
    expect(await call(tools(), 'read_file', { path: 'chain/hop1' })).toMatchObject({
      isError: true,
      content: 'path "chain/hop1" is outside the allowed root directory',
    });
    expect(await call(tools(), 'read_file', { path: 'chain/home' })).toMatchObject({ content: 'bravo\n' });
  });

  it('cuts a long file at maxBytes without splitting a character, and says so', async () => {
    await writeFile(path.join(root, 'long.txt'), 'ab€cd'); // € is 3 bytes: a b [3] c d = 7 bytes
    const tool = readFileTool({ root, maxBytes: 4 });
    expect(await tool.execute({ path: 'long.txt' }, ctx())).toBe('ab\n[truncated: showed the first 4 of 7 bytes]');
    expect(await readFileTool({ root, maxBytes: 7 }).execute({ path: 'long.txt' }, ctx())).toBe('ab€cd');
  });

  it('refuses binary files and directories with a plain message', async () => {
    expect(await call(tools(), 'read_file', { path: 'blob.bin' })).toMatchObject({
      isError: true,
      content: 'blob.bin: binary file (4 bytes), not shown',
    });
    expect(await call(tools(), 'read_file', { path: 'docs' })).toMatchObject({
      isError: true,
      content: 'docs: is a directory; use list_dir',
    });
  });

  it('names the zod issue when the path is missing', async () => {
    const result = await call(tools(), 'read_file', {});
    expect(result.isError).toBe(true);
    expect(result.content).toContain('- path: Invalid input: expected string, received undefined');
  });
});

describe('write_file', () => {
  const tools = () => new ToolSet([writeFileTool({ root })]);

  it('creates a file and its missing parent directories', async () => {
    const result = await call(tools(), 'write_file', { path: 'out/new/report.txt', content: 'total: 11 bytes €' });
    expect(result).toMatchObject({ content: 'wrote 19 bytes to out/new/report.txt' });
    expect(await readFile(path.join(root, 'out/new/report.txt'), 'utf8')).toBe('total: 11 bytes €');
  });

  it('refuses to write outside the root, also through a symlinked directory, and writes nothing', async () => {
    for (const p of ['../outside/pwned.txt', 'escape/pwned.txt', 'escape/deeper/pwned.txt']) {
      const result = await call(tools(), 'write_file', { path: p, content: 'x' });
      expect(result).toMatchObject({ isError: true, content: `path "${p}" is outside the allowed root directory` });
    }
    await expect(readFile(path.join(outside, 'pwned.txt'))).rejects.toMatchObject({ code: 'ENOENT' });
    await expect(readFile(path.join(outside, 'deeper', 'pwned.txt'))).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('does not overwrite a file outside through a chain of links that each look local', async () => {
    const result = await call(tools(), 'write_file', { path: 'chain/hop1', content: 'overwritten' });
    expect(result.isError).toBe(true);
    expect(await readFile(path.join(outside, 'secret.txt'), 'utf8')).toBe('top secret');
  });
});

describe('calculator', () => {
  it('evaluates through the runner and reports mistakes as error results', async () => {
    const tools = new ToolSet([calculatorTool()]);
    expect(await call(tools, 'calculator', { expression: '(5 + 6) * 2 ^ 2' })).toEqual({
      role: 'tool',
      toolCallId: 'c1',
      toolName: 'calculator',
      content: '44',
    });
    expect(await call(tools, 'calculator', { expression: '1 / (2 - 2)' })).toMatchObject({
      isError: true,
      content: 'division by zero at position 2',
    });
  });

  it('exports a JSON Schema the model can follow', () => {
    expect(calculatorTool().definition.inputSchema).toMatchObject({
      type: 'object',
      properties: { expression: { type: 'string' } },
      required: ['expression'],
    });
  });
});

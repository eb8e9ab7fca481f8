import { mkdir, mkdtemp, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ToolMessage } from '../../src/schemas.js';
import { readFileTool, writeFileTool } from '../../src/tools/builtin.js';
import { ToolSet } from '../../src/tools/define-tool.js';
import { runToolCalls } from '../../src/tools/run-tools.js';

let base: string;
let root: string;
let out: string;
let tools: ToolSet;

beforeAll(async () => {
  base = await mkdtemp(path.join(tmpdir(), 'loopchart-files-'));
  root = path.join(base, 'root');
  out = path.join(base, 'out');
  await mkdir(path.join(root, 'sub'), { recursive: true });
  await mkdir(out);
  await writeFile(path.join(out, 'secret.txt'), 'top secret');
  await writeFile(path.join(root, 'inside.txt'), 'inside');
  // Dangling links whose targets would be created outside the root.
  await symlink('../out/new.txt', path.join(root, 'dangling'));
  await symlink(path.join(out, 'abs-new.txt'), path.join(root, 'dangling-abs'));
  await symlink('../missing-dir/new.txt', path.join(root, 'dangling-dir'));
  // A chain whose every hop but the last stays inside.
  await symlink('hop-dangling2', path.join(root, 'hop-dangling1'));
  await symlink('../out/chain-new.txt', path.join(root, 'hop-dangling2'));
  // A loop is an error, not a hang.
  await symlink('loop-b', path.join(root, 'loop-a'));
  await symlink('loop-a', path.join(root, 'loop-b'));
  // A directory link pointing outside, used as a parent.
  await symlink('../out', path.join(root, 'outdir'));
  tools = new ToolSet([readFileTool({ root }), writeFileTool({ root })]);
});

afterAll(async () => {
  await rm(base, { recursive: true, force: true });
});

async function call(name: string, args: unknown): Promise<ToolMessage> {
  const [result] = await runToolCalls([{ call: { id: 'c1', name, args } }], tools, { idempotencyKey: (c) => c.id });
  return result!;
}

async function exists(file: string): Promise<boolean> {
  return stat(file).then(
    () => true,
    () => false,
  );
}

describe('write_file cannot leave its root through a symlink, dangling or chained', () => {
  it.each(['dangling', 'dangling-abs', 'dangling-dir', 'hop-dangling1', 'outdir/made.txt'])(
    'refuses %s and creates nothing outside',
    async (link) => {
      const result = await call('write_file', { path: link, content: 'escaped' });
      expect(result).toMatchObject({ isError: true, content: `path "${link}" is outside the allowed root directory` });
      for (const file of ['new.txt', 'abs-new.txt', 'chain-new.txt', 'made.txt']) expect(await exists(path.join(out, file))).toBe(false);
      expect(await exists(path.join(base, 'missing-dir'))).toBe(false);
    },
  );
});

describe('file-tool errors never show a host path', () => {
  const cases: Array<[string, string, Record<string, unknown>]> = [
    ['a symlink loop (ELOOP)', 'read_file', { path: 'loop-a' }],
    ['a write through a symlink loop', 'write_file', { path: 'loop-a', content: 'x' }],
    ['a name too long (ENAMETOOLONG)', 'read_file', { path: 'x'.repeat(300) }],
    ['a write with a name too long', 'write_file', { path: `sub/${'y'.repeat(300)}`, content: 'x' }],
    ['a NUL byte', 'read_file', { path: 'inside\u0000.txt' }],
    ['a NUL byte in a write', 'write_file', { path: 'a\u0000b', content: 'x' }],
  ];
  it.each(cases)('%s', async (_, tool, args) => {
    const result = await call(tool, args);
    expect(result.isError).toBe(true);
    expect(result.content).not.toContain(base);
    expect(result.content).not.toContain(tmpdir());
    expect(result.content).not.toMatch(/\/[^\s"]*\/[^\s"]*\//); // no absolute-looking path at all
  });

  it('says what went wrong in plain words', async () => {
    expect((await call('read_file', { path: 'loop-a' })).content).toBe('loop-a: too many levels of symbolic links');
    expect((await call('read_file', { path: 'x'.repeat(300) })).content).toBe(`${'x'.repeat(300)}: file name too long`);
    expect((await call('read_file', { path: 'a\u0000b' })).content).toBe('a\u0000b: invalid path: it contains a NUL character');
  });
});

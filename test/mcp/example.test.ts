/** examples/mcp.ts: the demo agent on the filesystem MCP server's tools, offline, end to end. */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bundledCommand, type NodeCommand } from '../sessions/fixtures/processes.js';

const REPO = fileURLToPath(new URL('../../', import.meta.url));
/** The example as a bundle (see bundledCommand: a third of tsx's start-up CPU). */
let example: NodeCommand;
beforeAll(async () => {
  example = await bundledCommand(join(REPO, 'examples/mcp.ts'));
});
afterAll(() => example?.dispose());

function run(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...example.args, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

describe('examples/mcp.ts', () => {
  it('lists and reads the fixture folder through the MCP server and answers with the real counts of non-empty lines', async () => {
    const { code, stdout, stderr } = await run([]);
    expect(code, stderr).toBe(0);
    const fixtures = join(REPO, 'examples/fixtures');
    const lines = (name: string) => readFileSync(join(fixtures, name), 'utf8').split('\n').filter(Boolean).length;
    expect(stdout).toContain('→ fs_list_directory');
    expect(stdout).toContain(
      `Completed: README.md: ${lines('README.md')} non-empty lines, orders.csv: ${lines('orders.csv')} non-empty lines, service.log: ${lines('service.log')} non-empty lines.`,
    );
  });

  it('another folder gives another answer', async () => {
    const { code, stdout } = await run([fileURLToPath(new URL('./fixtures/folder/notes', import.meta.url))]);
    expect(code).toBe(0);
    expect(stdout).toContain('Completed: todo.md: 1 non-empty lines. The longest is todo.md.');
  });
});

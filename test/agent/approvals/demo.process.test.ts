/**
 * `npm start -- --approve` (issue 6): the demo adds write_file, rooted in a scratch folder and
 * needing approval; the scripted model writes its answer to report.md there before answering.
 * With stdin not a terminal, the answers are read from stdin lines, so the test pipes them.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPO, runChild } from './fixtures/processes.js';
import { bundledCommand, type NodeCommand } from '../../sessions/fixtures/processes.js';

const DEMO = fileURLToPath(new URL('../../../examples/demo.ts', import.meta.url));
const root = mkdtempSync(join(tmpdir(), 'loopchart-hitl-demo-'));
let command: NodeCommand;
beforeAll(async () => {
  command = await bundledCommand(DEMO);
});
afterAll(() => {
  command?.dispose();
  rmSync(root, { recursive: true, force: true });
});
// The demo runs in the checkout: its sessions go to this temporary store, never to .loopchart/.
const STORE = join(root, 'demo.db');

/** The demo as `npm start -- <args>` runs it, offline whatever the environment says. */
const demo = async (args: string[], stdin: string) => {
  const run = await runChild(command, args, {
    stdin,
    env: { OPENAI_BASE_URL: undefined, OPENAI_API_KEY: undefined, LOOPCHART_MODEL: undefined, LOOPCHART_STORE: STORE },
    timeoutMs: 40_000,
  });
  expect(run.stdout).toContain(`stored in ${STORE})`);
  return run;
};

const QUESTION = /^approve write_file\(\{"path":"report\.md","content":".*\)\? \[y\/N\/a\(lways\)\] /m;

describe('npm start -- --approve', () => {
  it('answering y on stdin: the write is approved, report.md is written in the scratch folder, exit 0', async () => {
    const out = join(root, 'yes');
    const run = await demo(['--approve', '--out', out], 'y\n');
    expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(0);
    expect(run.stdout).toMatch(QUESTION);
    expect(run.stdout).toContain('✓ write_file approved');
    expect(run.stdout).toMatch(/← write_file .*wrote \d+ bytes to report\.md/);
    expect(run.stdout).toContain('The report is in report.md.');
    expect(run.stdout).toMatch(/✓ Completed/);
    const report = readFileSync(join(out, 'report.md'), 'utf8');
    expect(report).toContain('examples/fixtures holds 3 files');
    expect(report).toContain('27 lines in all');
    expect(run.stdout.match(/approve write_file/g)).toHaveLength(1);
  });

  it('answering n on stdin: the denial is in the trace, nothing is written, the model answers without the file, exit 0', async () => {
    const out = join(root, 'no');
    const run = await demo(['--approve', '--out', out], 'n\n');
    expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(0);
    expect(run.stdout).toMatch(QUESTION);
    // The model read the denial (an isError result) and answered without writing.
    expect(run.stdout).toContain('I did not write report.md (denied: the user said no on the terminal).');
    expect(run.stdout).toContain('27 lines in all');
    expect(run.stdout).toMatch(/✓ Completed/);
    // The trace shows the denial as the call's result; the tool itself never ran.
    expect(run.stdout).toMatch(/✗ write_file .*denied: the user said no on the terminal/);
    expect(existsSync(join(out, 'report.md'))).toBe(false);
  });

  it('without --out the scratch folder is a new temporary one (never the repository); no answer on stdin counts as no', async () => {
    const run = await demo(['--approve'], '');
    expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(0);
    const scratch = /^writes: +(.+)$/m.exec(run.stdout)?.[1];
    expect(scratch).toBeDefined();
    try {
      expect(relative(REPO, scratch!).startsWith('..')).toBe(true);
      expect(relative(tmpdir(), scratch!).startsWith('..')).toBe(false);
      expect(run.stdout).toMatch(/✗ write_file .*denied: no answer \(stdin closed\)/);
      expect(existsSync(join(scratch!, 'report.md'))).toBe(false);
    } finally {
      rmSync(scratch!, { recursive: true, force: true });
    }
    expect(existsSync(join(REPO, 'report.md'))).toBe(false);
    expect(existsSync(join(REPO, 'examples', 'fixtures', 'report.md'))).toBe(false);
  });
});

/**
 * An option given with an empty value (`--store ""`, `--store=`, `--agent "$AGENT"` with AGENT
 * unset) is bad usage naming the option, in process: it was read as if the option were left
 * out, so a script's empty variable sent the command to the default store or the demo's agent.
 */
import { rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { main } from '../../src/cli/main.js';

/** Where `eval record` would write, had it run (it did: an empty dataset folder). */
const dataset = join(tmpdir(), `loopchart-empty-values-${process.pid}`);
afterAll(() => rmSync(dataset, { recursive: true, force: true }));

async function cli(...argv: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await main(argv, { out: (line) => out.push(line), err: (line) => err.push(line) });
  return { code, out: out.join('\n'), err: err.join('\n') };
}

describe('an option with an empty value', () => {
  it.each([
    ['--store', ['sessions', 'list', '--store', '']],
    ['--store', ['sessions', 'list', '--store=']],
    ['--agent', ['sessions', 'send', 'demo-empty-agent', 'Hello.', '--agent', '', '--store', 'memory:']],
    ['--schema', ['sessions', 'list', '--store', 'memory:', '--schema', '']],
    ['--store', ['schedules', 'list', '--store', '']],
    ['--store', ['memory', 'list', '--store', '']],
    ['--prefix', ['eval', 'record', dataset, '--store', 'memory:', '--prefix', '']],
    ['--agents', ['scheduler', '--agents', '', '--store', 'memory:']],
  ])('%s in %j is bad usage, exit 2, nothing run', async (flag, argv) => {
    const { code, out, err } = await cli(...argv);
    expect(out).toBe('');
    expect(err.split('\n')[0]).toBe(`loopchart: ${flag} is empty: give it a value, or leave it out`);
    expect(code).toBe(2);
  });
});

/**
 * `loopchart eval` prints what a recording and a run hold (tool arguments, reasons, names) on a
 * terminal: control characters, escape sequences and bidi overrides in them are shown as visible
 * escapes, as every other command shows stored text.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { main } from '../../src/cli/main.js';
import { saveCases } from '../../src/evals/dataset.js';
import { recordCase } from '../../src/evals/record.js';
import { MemorySessionStore } from '../../src/stores/memory.js';
import { recordSession, supportAgent } from './support.js';

const dir = mkdtempSync(join(tmpdir(), 'loopchart-eval-cli-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** What a terminal acts on rather than shows: C0 and C1 controls (0x9b is a one-byte CSI), bidi overrides and isolates. */
const UNSAFE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/;

describe('loopchart eval', () => {
  it('shows a recorded tool argument with a one-byte CSI and a bidi override as visible escapes in the table', async () => {
    const order = 'A1\u009b2J\u202eevil';
    const store = new MemorySessionStore();
    await recordSession(store, 'hostile', supportAgent([{ toolCalls: [{ name: 'lookup', args: { order } }] }, { text: 'Delivered.' }]));
    const dataset = join(dir, 'dataset');
    await saveCases(dataset, [await recordCase(store, 'hostile')]);
    const module = join(dir, 'agent.ts');
    writeFileSync(module, `import { supportAgent } from ${JSON.stringify(fileURLToPath(new URL('./support.ts', import.meta.url)))};\nexport const agent = () => supportAgent([{ text: 'It is on its way.' }]);\n`);
    const out: string[] = [];
    const err: string[] = [];
    const code = await main(['eval', dataset, '--agent', module, '--results', join(dir, 'results.jsonl')], { out: (line) => out.push(line), err: (line) => err.push(line) });
    expect(code).toBe(0);
    const text = out.join('\n');
    // The case decides otherwise at the tool call: the recorded side shows its arguments.
    expect(text).toContain('recorded: call tools lookup({"order":"A1\\x9b2J\\u202eevil"})');
    expect(text).not.toMatch(UNSAFE);
    expect(err.join('\n')).not.toMatch(UNSAFE);
  });

  it.each([
    ['--timeout', '3000000000', "--timeout must be a whole number from 1 to 2147483647 (ms), got '3000000000'"],
    ['--concurrency', '99999999999999999999', "--concurrency must be a whole number from 1 to 9007199254740991, got '99999999999999999999'"],
    ['--max-failed', '99999999999999999999', "--max-failed must be a whole number from 0 to 9007199254740991, got '99999999999999999999'"],
  ])('a flag out of range (%s %s) is bad usage, exit 2, before any case runs: not a failed gate', async (flag, value, message) => {
    const err: string[] = [];
    const out: string[] = [];
    const code = await main(['eval', join(dir, 'none'), '--agent', join(dir, 'agent.ts'), flag, value], { out: (line) => out.push(line), err: (line) => err.push(line) });
    expect(err.join('\n')).toContain(message);
    expect(code).toBe(2);
  });
});

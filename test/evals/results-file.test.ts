/**
 * The results file resumes an evaluation that was interrupted, and only that: the next
 * evaluation after one that finished (the agent changed since, say) runs every case again, and a
 * case whose file changed since its result was stored runs again.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { main } from '../../src/cli/main.js';
import { saveCases } from '../../src/evals/dataset.js';
import { recordCase } from '../../src/evals/record.js';
import { runEval } from '../../src/evals/run-eval.js';
import { sameDecisions, textContains, toolCalls, withinBudget } from '../../src/evals/scorers.js';
import { MemorySessionStore } from '../../src/stores/memory.js';
import { recordSession, supportAgent } from './support.js';

const root = mkdtempSync(join(tmpdir(), 'loopchart-evals-results-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** A dataset of two recorded cases (the support agent looks order A1 up, then answers). */
async function dataset(name: string): Promise<string> {
  const store = new MemorySessionStore();
  for (const id of ['one', 'two']) await recordSession(store, id);
  const folder = join(root, name);
  await saveCases(folder, await Promise.all(['one', 'two'].map((id) => recordCase(store, id))));
  return folder;
}

const SUPPORT = JSON.stringify(join(import.meta.dirname, 'support.ts'));

describe('the results file', () => {
  it('loopchart eval of a changed agent after one of the unchanged agent reports the changed one: its gate fails (exit 1), no case is skipped', async () => {
    const folder = await dataset('cli');
    const write = (name: string, script: string) => {
      writeFileSync(join(root, name), `import { supportAgent } from ${SUPPORT};\nexport const agent = () => supportAgent(${script});\n`);
      return join(root, name);
    };
    writeFileSync(join(root, 'scorers.ts'), `import { sameDecisions } from ${JSON.stringify(join(import.meta.dirname, '../../src/evals/scorers.ts'))};\nexport const scorers = [sameDecisions({ threshold: 1 })];\n`);
    const run = async (agent: string) => {
      const out: string[] = [];
      const err: string[] = [];
      const code = await main(['eval', folder, '--agent', agent, '--scorers', join(root, 'scorers.ts')], { out: (line) => out.push(line), err: (line) => err.push(line) });
      return { code, out: out.join('\n'), err: err.join('\n') };
    };
    const unchanged = await run(write('agent.ts', ''));
    expect(unchanged.code).toBe(0);
    // The default results file is DATASET/.results.jsonl: the next evaluation finds it there.
    expect(readFileSync(join(folder, '.results.jsonl'), 'utf8')).toContain('"caseId":"one"');
    const changed = await run(write('agent-v2.ts', "[{ text: 'It is on its way.' }]"));
    expect(changed.err).not.toContain('skipped');
    expect(changed.out).toContain('gate: FAILED');
    expect(changed.code).toBe(1);
  });

  it('an interrupted evaluation resumes: the cases it stored are not run again, unless their file changed since', async () => {
    const folder = await dataset('resume');
    const resultsFile = join(root, 'resume.jsonl');
    let runs: string[] = [];
    const agent = (evalCase: { id: string }) => (runs.push(evalCase.id), supportAgent());
    await runEval({ dataset: folder, agent, model: 'recorded', resultsFile, scorers: [sameDecisions()] });
    expect(runs.sort()).toEqual(['one', 'two']);
    // Interrupted after the first case: the file holds its line only.
    const first = readFileSync(resultsFile, 'utf8').split('\n')[0]!;
    writeFileSync(resultsFile, `${first}\n`);
    runs = [];
    await runEval({ dataset: folder, agent, model: 'recorded', resultsFile, scorers: [sameDecisions()] });
    const stored = JSON.parse(first).caseId as string;
    expect(runs).toEqual([stored === 'one' ? 'two' : 'one']);
    // Interrupted again, and the stored case's file edited meanwhile (a new expectation): it runs again.
    writeFileSync(resultsFile, `${first}\n`);
    const file = join(folder, `${stored}.json`);
    writeFileSync(file, readFileSync(file, 'utf8').replace('"outcome": "Completed"', '"outcome": "Completed",\n    "text": { "contains": "nowhere" }'));
    runs = [];
    const report = await runEval({ dataset: folder, agent, model: 'recorded', resultsFile, scorers: [textContains('delivered')] });
    expect(runs.sort()).toEqual(['one', 'two']);
    expect(report.cases.map((c) => c.caseId)).toEqual(['one', 'two']);
  });

  it("a stored line whose run this version does not read (wrong shape, wrong types, nested past the bound, a prototype key) is not reused: its case runs again, and the line is reported once", async () => {
    const folder = await dataset('garbage');
    const resultsFile = join(root, 'garbage.jsonl');
    const scorers = [sameDecisions(), textContains('delivered'), toolCalls([{ name: 'lookup', args: { order: 'A1' } }]), withinBudget({ maxTurns: 5 })];
    let runs: string[] = [];
    const agent = (evalCase: { id: string }) => (runs.push(evalCase.id), supportAgent());
    // Scorers added since the line was stored score its stored run.
    await runEval({ dataset: folder, agent, model: 'recorded', resultsFile, scorers: [sameDecisions()] });
    const lines = readFileSync(resultsFile, 'utf8').split('\n');
    const stored = (id: string) => JSON.parse(lines.find((line) => line.includes(`"caseId":"${id}"`))!) as { run: Record<string, unknown> };
    const one = stored('one');
    const keep = JSON.stringify(stored('two'));
    // Each keeps the line's case id and its case file's digest: only the run is garbage.
    const deep = `${'['.repeat(20_000)}${']'.repeat(20_000)}`;
    const garbage: Record<string, string> = {
      shape: JSON.stringify({ ...one, run: 'garbage' }),
      types: JSON.stringify({ ...one, run: { ...one.run, text: 7, turns: '2', outcome: { type: 'Completed', finalText: null } } }),
      deep: JSON.stringify({ ...one, run: { ...one.run, toolCalls: [{ name: 'lookup', args: '@deep', content: '{}', isError: false, source: 'recorded' }] } }).replace('"@deep"', deep),
      huge: JSON.stringify({ ...one, run: { ...one.run, turns: 1 } }).replace('"turns":1', '"turns":1e400'),
      proto: JSON.stringify({ ...one, run: { ...one.run, text: 'x' } }).replace('"text":"x"', '"__proto__":{"text":"Order A1 was delivered."}'),
    };
    for (const [name, line] of Object.entries(garbage)) {
      writeFileSync(resultsFile, `${keep}\n${line}\n`);
      runs = [];
      const unreadable: Error[] = [];
      const report = await runEval({ dataset: folder, agent, model: 'recorded', resultsFile, scorers, onUnreadable: (error) => unreadable.push(error) });
      expect(runs, name).toEqual(['one']);
      const result = report.cases.find((c) => c.caseId === 'one')!;
      expect(Object.values(result.scores).filter((score) => score.error), name).toEqual([]);
      expect(report.passed, name).toBe(true);
      expect(unreadable.map((error) => [error.name, error.message.split(': ')[0]]), name).toEqual([['ResultsFileError', `results file ${resultsFile}:2 (case 'one')`]]);
    }
    // Without onUnreadable, a process warning says so, once.
    writeFileSync(resultsFile, `${keep}\n${garbage.shape}\n`);
    const warnings: Error[] = [];
    const warned = (warning: Error) => warnings.push(warning);
    process.on('warning', warned);
    try {
      await runEval({ dataset: folder, agent, model: 'recorded', resultsFile, scorers });
      await new Promise((resolve) => setImmediate(resolve));
    } finally {
      process.off('warning', warned);
    }
    expect(warnings.map((warning) => [warning.name, warning.message.split(': ')[0]])).toEqual([['ResultsFileError', `results file ${resultsFile}:2 (case 'one')`]]);
  });
});

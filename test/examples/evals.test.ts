/**
 * examples/evals run by the suite: the recorded dataset in the repository, scored against the
 * agent that recorded it (passes, nothing outside reached) and against the one whose model script
 * changed (the gate fails at the first differing decision); the vitest helpers over the dataset;
 * and the CLI: `loopchart eval` exit codes, `sessions replay ID --against MODULE`.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agent, reached } from '../../examples/evals/agent.js';
import { agent as changed } from '../../examples/evals/agent-v2.js';
import { scorers } from '../../examples/evals/scorers.js';
import { main } from '../../src/cli/main.js';
import { caseJson, loadDataset, type EvalCase } from '../../src/evals/dataset.js';
import { evalCases, expectToPass } from '../../src/evals/helpers.js';
import { runCase } from '../../src/evals/run-case.js';
import { runEval } from '../../src/evals/run-eval.js';
import { outcomeIs, sameDecisions } from '../../src/evals/scorers.js';
import { SqliteSessionStore } from '../../src/stores/sqlite.js';
import { recordSession, supportAgent } from '../evals/support.js';

const DATASET = fileURLToPath(new URL('../../examples/evals/dataset', import.meta.url));
const EXAMPLE = fileURLToPath(new URL('../../examples/evals/', import.meta.url));
const { cases, problems } = await loadDataset(DATASET);
const root = mkdtempSync(join(tmpdir(), 'loopchart-evals-example-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

async function cli(...argv: string[]): Promise<{ code: number; out: string; err: string }> {
  const out: string[] = [];
  const err: string[] = [];
  const code = await main(argv, { out: (line) => out.push(line), err: (line) => err.push(line) });
  return { code, out: out.join('\n'), err: err.join('\n') };
}

describe('examples/evals', () => {
  it('the dataset in the repository reads, each file in the stable form saveCases writes', () => {
    expect(problems).toEqual([]);
    expect(cases.map((c) => c.id)).toEqual(['missing-order', 'order-a1']);
    for (const c of cases) expect(readFileSync(join(DATASET, `${c.id}.json`), 'utf8')).toBe(caseJson(c));
  });

  it('the agent that recorded it passes its gate, its tools never reached', async () => {
    reached.lookup = 0;
    const report = await runEval({ dataset: DATASET, agent, scorers });
    expect(report.gateFailures).toEqual([]);
    expect(reached.lookup).toBe(0);
  });

  it('the changed model script fails the gate at the first differing decision', async () => {
    const report = await runEval({ dataset: DATASET, agent: changed, scorers });
    expect(report.passed).toBe(false);
    expect(report.gateFailures).toContain('same decisions: mean 0.000 is below its threshold 1');
    expect(report.cases.find((c) => c.caseId === 'order-a1')!.run!.difference).toMatchObject({
      step: 2,
      recorded: { what: 'call tools lookup({"order":"A1"})', rule: 'brain: CallTools (the reply asked for tools)' },
      got: { what: 'done: Completed', rule: 'brain: the reply asked for no tool (the run completes)' },
    });
  });

  describe.each(evalCases(cases))('vitest helper: case %s', (_id, evalCase: EvalCase) => {
    it('passes its expectations against the recording agent', async () => {
      await expectToPass(evalCase, await runCase(evalCase, agent), [outcomeIs('Completed'), sameDecisions()]);
    });
  });

  it('expectToPass names what failed', async () => {
    const evalCase = cases.find((c) => c.id === 'order-a1')!;
    await expect(expectToPass(evalCase, await runCase(evalCase, changed), [sameDecisions()])).rejects.toThrow(
      "case 'order-a1' failed 1 scorer(s):\n  same decisions: 0 (step 2: recorded call tools lookup({\"order\":\"A1\"}), got done: Completed)",
    );
  });
});

describe('the CLI', () => {
  const store = join(root, 'sessions.db');
  const strict = join(root, 'strict-agent.ts');
  beforeAll(async () => {
    const sqlite = new SqliteSessionStore({ path: store });
    await recordSession(sqlite, 'support-7');
    await sqlite.close();
    writeFileSync(strict, `import { supportAgent } from ${JSON.stringify(fileURLToPath(new URL('../evals/support.ts', import.meta.url)))};\nexport const agent = supportAgent([], { policy: { maxTurns: 1 } });\n`);
  });

  it('loopchart eval exits 0 when the gate holds, 1 when it fails, with the report on stdout and progress on stderr', async () => {
    const ok = await cli('eval', DATASET, '--agent', join(EXAMPLE, 'agent.ts'), '--scorers', join(EXAMPLE, 'scorers.ts'), '--results', join(root, 'ok.jsonl'));
    expect(ok.code).toBe(0);
    expect(ok.out).toContain('gate: passed');
    expect(ok.err).toMatch(/\[2\/2\] \S+ ok/);
    const failed = await cli('eval', DATASET, '--agent', join(EXAMPLE, 'agent-v2.ts'), '--scorers', join(EXAMPLE, 'scorers.ts'), '--results', join(root, 'v2.jsonl'), '--format', 'junit', '-o', join(root, 'v2.xml'));
    expect(failed.code).toBe(1);
    expect(failed.out).toContain('recorded: call tools lookup({"order":"A1"})  [brain: CallTools (the reply asked for tools)]');
    expect(readFileSync(join(root, 'v2.xml'), 'utf8')).toContain('<failure type="same decisions"');
  });

  it('an agent module that fails to load fails every case with a typed error naming it', async () => {
    const result = await cli('eval', DATASET, '--agent', join(root, 'nope.ts'), '--results', join(root, 'nope.jsonl'));
    expect(result.code).toBe(1);
    expect(result.out).toMatch(/order-a1: did not run \(agent\): case 'order-a1': the agent could not be had: cannot load the agent module/);
    expect(result.out).toMatch(/missing-order: did not run \(agent\)/);
  });

  it('sessions replay ID --against MODULE prints the first differing decision with the rule on each side', async () => {
    const same = await cli('sessions', 'replay', 'support-7', '--store', store, '--against', join(root, 'same-agent.ts'));
    expect(same.code).toBe(1); // the module does not exist yet
    writeFileSync(join(root, 'same-agent.ts'), readFileSync(strict, 'utf8').replace("supportAgent([], { policy: { maxTurns: 1 } })", 'supportAgent([])'));
    const unchanged = await cli('sessions', 'replay', 'support-7', '--store', store, '--against', join(root, 'same-agent.ts'));
    expect(unchanged).toMatchObject({ code: 0, out: expect.stringContaining('no difference: the agent decides as the recording did') });
    const result = await cli('sessions', 'replay', 'support-7', '--store', store, '--against', strict);
    expect(result.code).toBe(1);
    expect(result.out.split('\n').slice(1)).toEqual([
      'first difference at decision 3 (run 1):',
      '  recorded: call the model (turn 2) offering [lookup, refund]  [brain: CallLLM (no stop or compaction guard held); driver: the tools offered]',
      '  now:      done: MaxTurnsExceeded  [brain: turnLimitReached (policy.maxTurns)]',
    ]);
    void supportAgent;
  });
});

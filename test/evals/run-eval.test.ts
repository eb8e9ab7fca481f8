import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentConfig } from '../../src/agent/core/config.js';
import { saveCases } from '../../src/evals/dataset.js';
import { judge } from '../../src/evals/judge.js';
import { recordCase } from '../../src/evals/record.js';
import { formatJUnit, formatTable } from '../../src/evals/report.js';
import { EvalOptionsError } from '../../src/evals/errors.js';
import { runCase } from '../../src/evals/run-case.js';
import { runEval, scoreCase, summarizeReport } from '../../src/evals/run-eval.js';
import { scriptedModel } from '../../src/models/scripted.js';
import { outcomeIs, scorer, sameDecisions, textContains, toolCalls } from '../../src/evals/scorers.js';
import type { Model } from '../../src/model.js';
import { MemorySessionStore } from '../../src/stores/memory.js';
import { lookup, recordSession, supportAgent } from './support.js';

const root = mkdtempSync(join(tmpdir(), 'loopchart-evals-run-'));
const dataset = join(root, 'dataset');
afterAll(() => rmSync(root, { recursive: true, force: true }));

beforeAll(async () => {
  const store = new MemorySessionStore();
  for (const id of ['a', 'b', 'c', 'd']) await recordSession(store, id);
  await saveCases(dataset, await Promise.all(['a', 'b', 'c', 'd'].map((id) => recordCase(store, id))));
  await saveCases(dataset, [{ format: 1, id: 'hand', input: ['Where is order A1?'], expect: { outcome: 'Completed' }, toolResults: [{ name: 'lookup', content: '{"status":"lost"}' }] }]);
  writeFileSync(join(dataset, 'torn.json'), '{ "format": 1, "id": "torn", ');
});

/** An agent per case: fresh model; case c has lost its tool, case d cannot be configured. */
const agent = (evalCase: { id: string }): AgentConfig => {
  if (evalCase.id === 'd') throw new Error('no credentials for d');
  return supportAgent(evalCase.id === 'hand' ? [{ toolCalls: [{ name: 'lookup', args: { order: 'A1' } }] }, { text: 'It is lost.' }] : [], evalCase.id === 'c' ? { tools: [] } : {});
};

describe('runEval', () => {
  it('bad input fails its own case with a typed error; the others run; the report and gate say which and why', async () => {
    const report = await runEval({ dataset, agent, model: 'recorded', scorers: [outcomeIs('Completed', { threshold: 1 }), sameDecisions()], maxFailedCases: 5 });
    const errors = Object.fromEntries(report.cases.map((c) => [c.caseId, c.error?.problem ?? 'ok']));
    // The hand-written case has no recording: a dry run cannot answer its model.
    expect(errors).toEqual({ torn: 'dataset', a: 'ok', b: 'ok', c: 'tools', d: 'agent', hand: 'recording' });
    expect(report.cases.find((c) => c.caseId === 'c')!.error!.message).toBe("case 'c': the recording calls tools the agent no longer has: lookup");
    expect(report.scorers[0]).toMatchObject({ name: 'outcome is Completed', cases: 6, passed: 2, mean: 2 / 6, gate: false });
    expect(report.passed).toBe(false);
    const table = formatTable(report);
    expect(table).toContain("d: did not run (agent): case 'd': the agent could not be had: no credentials for d");
    expect(table).toMatch(/torn: did not run \(dataset\): dataset file .*torn\.json:1 \(case 'torn'\): not JSON/);
    const junit = formatJUnit(report);
    expect(junit).toContain('<testsuite name="loopchart eval" tests="6" failures="0" errors="4"');
    expect(junit).toContain('<error type="EvalCaseFailed" message="case &apos;d&apos;: the agent could not be had: no credentials for d"/>');
  });

  it('a live run of a hand-written case answers its tools from the case; concurrency is bounded; the results file resumes', async () => {
    const resultsFile = join(root, 'results.jsonl');
    let running = 0;
    let most = 0;
    let runs = 0;
    const counted = async (evalCase: { id: string }) => {
      runs++;
      running++;
      most = Math.max(most, running);
      await new Promise((resolve) => setTimeout(resolve, 20));
      running--;
      return agent(evalCase);
    };
    const progress: string[] = [];
    const first = await runEval({ dataset, agent: counted, scorers: [textContains('lost')], concurrency: 2, resultsFile, maxFailedCases: 5, onProgress: (p) => progress.push(`${p.done}/${p.total} ${p.caseId} ${p.status}`) });
    expect(most).toBe(2);
    expect(first.cases.find((c) => c.caseId === 'hand')!.run!.toolCalls).toEqual([{ name: 'lookup', args: { order: 'A1' }, content: '{"status":"lost"}', isError: false, source: 'recorded' }]);
    expect(progress).toHaveLength(6);
    // A line per case that ran, then the line that says the evaluation ran to its end.
    expect(readFileSync(resultsFile, 'utf8').trim().split('\n')).toHaveLength(6);
    expect(readFileSync(resultsFile, 'utf8').trim().split('\n').at(-1)).toBe('{"finished":true}');
    // Interrupted after three cases: keep only the first three lines, and a torn fourth.
    const lines = readFileSync(resultsFile, 'utf8').trim().split('\n');
    writeFileSync(resultsFile, `${lines.slice(0, 3).join('\n')}\n${lines[3]!.slice(0, 20)}`);
    runs = 0;
    const resumed = await runEval({ dataset, agent: counted, scorers: [textContains('lost'), outcomeIs('Completed')], resultsFile, maxFailedCases: 5 });
    // The two cases past the cut run, and so does every stored case that did not run.
    const storedFailures = lines.slice(0, 3).filter((line) => JSON.parse(line).error).length;
    expect(runs).toBe(2 + storedFailures);
    expect(resumed.cases.map((c) => c.caseId)).toEqual(first.cases.map((c) => c.caseId));
    // A scorer added since is computed from the stored run of a skipped case.
    for (const c of resumed.cases.filter((c) => c.run)) {
      expect(c.scores['outcome is Completed'], c.caseId).toMatchObject({ score: c.run!.outcome.type === 'Completed' ? 1 : 0 });
    }
    expect(resumed.cases.find((c) => c.caseId === 'hand')!.scores['outcome is Completed']).toMatchObject({ score: 1, pass: true });
  });

  it('a judge that throws, hangs or answers nonsense fails that case\'s score only; one that answers is read', async () => {
    const answers = new Map<string, () => Promise<string>>([
      ['a', async () => '{"score": 0.8, "reason": "clear"}'],
      ['b', async () => { throw new Error('judge down'); }],
      ['c', () => new Promise<string>(() => {})],
      ['d', async () => 'Verdict: {"score": 1}'],
      ['hand', async () => 'looks fine to me'],
    ]);
    const judgeModel: Model = {
      name: 'judge',
      async generate(request) {
        const id = request.idempotencyKey.split(':')[1]!;
        return { message: { role: 'assistant', content: await answers.get(id)!() }, finishReason: 'stop' };
      },
    };
    const report = await runEval({
      dataset,
      agent: (c) => supportAgent(c.id === 'hand' ? [{ toolCalls: [{ name: 'lookup', args: { order: 'A1' } }] }, { text: 'x' }] : [{ toolCalls: [{ name: 'lookup', args: { order: 'A1' } }] }, { text: 'y' }]),
      scorers: [judge({ model: judgeModel, rubric: 'Says where the order is.', timeoutMs: 200 }), toolCalls([{ name: 'lookup' }])],
      maxFailedCases: 5,
    });
    const judged = Object.fromEntries(report.cases.map((c) => [c.caseId, c.scores.judge!]));
    expect(judged.a).toEqual({ score: 0.8, pass: true, reason: 'clear' });
    expect(judged.d).toEqual({ score: 1, pass: true });
    expect(judged.b!.error).toBe("case 'b', scorer 'judge': threw: judge down");
    expect(judged.c!.error).toBe("case 'c', scorer 'judge': did not answer within 200 ms");
    expect(judged.hand!.error).toMatch(/^case 'hand', scorer 'judge': threw: the judge answered no JSON object/);
    // The other scorer scored every case that ran.
    expect(report.cases.filter((c) => !c.error).every((c) => c.scores['tool calls (inOrder)']!.pass)).toBe(true);
    expect(report.scorers[0]).toMatchObject({ name: 'judge', errors: 3 + report.failedCases });
  });

  it('a scorer returning something that is not a score is a ScorerError for that case', async () => {
    const report = await runEval({ dataset, agent, model: 'recorded', scorers: [scorer('broken', () => 7 as never)], maxFailedCases: 5 });
    expect(report.cases.find((c) => c.caseId === 'a')!.scores.broken!.error).toMatch(/^case 'a', scorer 'broken': returned no score/);
    void lookup;
  });

  it('a resume runs again a case that did not run, and a case that did not run counts 0 for a scorer added since', async () => {
    const resultsFile = join(root, 'resume-failed.jsonl');
    const cases = [
      { format: 1 as const, id: 'good', input: ['hi'] },
      { format: 1 as const, id: 'flaky', input: ['hi'] },
    ];
    let broken = true;
    const flakyAgent = (c: { id: string }): AgentConfig => {
      if (c.id === 'flaky' && broken) throw new Error('no credentials yet');
      return { model: scriptedModel([{ text: 'hello' }]) };
    };
    const first = await runEval({ dataset: { cases, problems: [] }, agent: flakyAgent, scorers: [scorer('a', () => 1, { threshold: 1 })], resultsFile });
    expect(first.failedCases).toBe(1);
    // A scorer added since: the case that ran is scored from its stored run; the one that did not has no score of it.
    const stored = first.cases.map((c) => (c.error ? c : { ...c, scores: { ...c.scores, 'added since': { score: 1, pass: true } } }));
    const report = summarizeReport(stored, [scorer('a', () => 1, { threshold: 1 }), scorer('added since', () => 1, { threshold: 1 })], 1, 0);
    expect(report.scorers[1]).toMatchObject({ name: 'added since', cases: 2, mean: 0.5, errors: 1, gate: false });

    broken = false;
    const resumed = await runEval({ dataset: { cases, problems: [] }, agent: flakyAgent, scorers: [scorer('a', () => 1, { threshold: 1 }), scorer('added since', () => 1, { threshold: 1 })], resultsFile });
    expect(resumed.failedCases).toBe(0);
    expect(resumed.cases.find((c) => c.caseId === 'flaky')!.scores).toMatchObject({ a: { score: 1 }, 'added since': { score: 1 } });
    expect(resumed.passed).toBe(true);
  });

  it('options out of range are a typed error naming the option, before any case runs', async () => {
    let runs = 0;
    const error = await runEval({ dataset, agent: () => (runs++, supportAgent([])), concurrency: Number('four') }).catch((e: unknown) => e);
    expect(EvalOptionsError.isInstance(error)).toBe(true);
    expect(error).toMatchObject({ code: 'InvalidConfig', option: 'concurrency', message: expect.stringMatching(/^runEval option 'concurrency': .*got NaN$/) });
    expect(runs).toBe(0);
    await expect(runEval({ dataset, agent, scorers: [outcomeIs('Completed', { threshold: 2 })] })).rejects.toMatchObject({ option: 'scorers[0].threshold' });
  });

  it("the judge's idempotency key names the case and a digest of what it grades", async () => {
    const keys: string[] = [];
    const judgeModel: Model = {
      name: 'judge',
      async generate(request) {
        keys.push(request.idempotencyKey);
        return { message: { role: 'assistant', content: '{"score": 1}' }, finishReason: 'stop' };
      },
    };
    const evalCase = { format: 1 as const, id: 'refund', input: ['I want a refund'] };
    const run = await runCase(evalCase, { model: scriptedModel([{ text: 'one' }]) });
    const grade = judge({ model: judgeModel, rubric: 'good' });
    await scoreCase(evalCase, run, [grade]);
    await scoreCase(evalCase, { ...run, text: 'another answer' }, [grade]);
    await scoreCase(evalCase, run, [grade]);
    expect(keys[0]).toMatch(/^judge:refund:[0-9a-f]{32}$/);
    expect(keys[1]).not.toBe(keys[0]);
    expect(keys[2]).toBe(keys[0]);
  });
});

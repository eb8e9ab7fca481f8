/**
 * A case file whose JSON nests deeper than any case needs (a hostile or broken file) is refused
 * where it is read, a DatasetError naming the file and the case: the evaluation reports the case
 * as not run, never as the agent's failure.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { MAX_CASE_DEPTH, loadDataset } from '../../src/evals/dataset.js';
import { DatasetError } from '../../src/evals/errors.js';
import { runEval } from '../../src/evals/run-eval.js';
import { scriptedModel } from '../../src/models/scripted.js';

const root = mkdtempSync(join(tmpdir(), 'loopchart-evals-deep-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const nested = (depth: number) => `${'['.repeat(depth)}${']'.repeat(depth)}`;

describe('a case nested too deep', () => {
  it('is a DatasetError naming the file and the case; a case just within the bound and the others load and run', async () => {
    writeFileSync(join(root, 'deep.json'), `{"format":1,"id":"deep","input":["a"],"toolResults":[{"name":"lookup","content":"y","args":${nested(20_000)}}]}`);
    writeFileSync(join(root, 'within.json'), `{"format":1,"id":"within","input":["a"],"toolResults":[{"name":"lookup","content":"y","args":${nested(MAX_CASE_DEPTH - 4)}}]}`);
    writeFileSync(join(root, 'ok.json'), '{"format":1,"id":"ok","input":["a"],"expect":{"outcome":"Completed"}}');
    const dataset = await loadDataset(root);
    expect(dataset.cases.map((c) => c.id)).toEqual(['ok', 'within']);
    expect(dataset.problems).toHaveLength(1);
    expect(DatasetError.isInstance(dataset.problems[0])).toBe(true);
    expect(dataset.problems[0]!.message).toBe(`dataset file ${join(root, 'deep.json')} (case 'deep'): JSON nested deeper than ${MAX_CASE_DEPTH} levels`);
    const report = await runEval({ dataset, agent: () => ({ model: scriptedModel([{ text: 'hi' }]) }) });
    expect(report.cases.map((c) => [c.caseId, c.error?.problem ?? c.run!.outcome.type])).toEqual([
      ['deep', 'dataset'],
      ['ok', 'Completed'],
      ['within', 'Completed'],
    ]);
  });
});

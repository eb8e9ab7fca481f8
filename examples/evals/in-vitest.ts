/** A dataset as vitest cases, one test per case: the support agent must decide as it recorded. */
import { evalCases, expectToPass, loadDataset, outcomeIs, runCase, sameDecisions } from 'loopchart/evals';
import { describe, it } from 'vitest';
import { agent } from './agent.js';

const { cases } = await loadDataset(new URL('./dataset', import.meta.url).pathname);
describe.each(evalCases(cases))('case %s', (_id, evalCase) => {
  it('decides as recorded', async () => {
    await expectToPass(evalCase, await runCase(evalCase, agent), [outcomeIs('Completed'), sameDecisions()]);
  });
});

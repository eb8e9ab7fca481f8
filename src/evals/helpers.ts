import type { SessionStore } from '../stores/session-store.js';
import type { EvalCase } from './dataset.js';
import { recordCase } from './record.js';
import { runCase, type CaseRun, type EvalAgent } from './run-case.js';
import { scoreCase } from './run-eval.js';
import type { Scorer } from './scorers.js';

/**
 * A dataset's cases as `[id, case]` rows for a test runner's `describe.each` / `it.each`.
 *
 * @example
 * ```ts
 * const { cases } = await loadDataset('evals/support');
 * // it.each(evalCases(cases))('%s', async (_id, evalCase) => { ... });
 * const rows = evalCases(cases);
 * ```
 */
export function evalCases(cases: readonly EvalCase[]): [string, EvalCase][] {
  return cases.map((evalCase) => [evalCase.id, evalCase]);
}

/**
 * Scores a run and throws an Error listing every scorer it failed (score, reason or error): an
 * expectation for any test runner (`await expectToPass(evalCase, run, scorers)`).
 *
 * @example
 * ```ts
 * const { cases } = await loadDataset('evals/support');
 * const evalCase = cases[0]!;
 * const run = await runCase(evalCase, config, { model: 'recorded' });
 * await expectToPass(evalCase, run, [outcomeIs('Completed'), sameDecisions()]);
 * ```
 */
export async function expectToPass(evalCase: EvalCase, run: CaseRun, scorers: readonly Scorer[]): Promise<void> {
  const scores = await scoreCase(evalCase, run, scorers);
  const failed = Object.entries(scores).filter(([, score]) => !score.pass);
  if (failed.length === 0) return;
  const lines = failed.map(([name, score]) => `  ${name}: ${score.error ?? `${score.score} (${score.reason ?? 'no reason given'})`}`);
  throw new Error(`case '${evalCase.id}' failed ${failed.length} scorer(s):\n${lines.join('\n')}`);
}

/**
 * The decision diff of a stored session against another agent: the recorded replies and results
 * fed through the new config's brain and driver (its tools quarantined, its model, compactions
 * and guardrails answered from the recording: nothing is called), and the first decision that
 * differs, with the rule on each side. A tool the agent no longer has shows as a difference (what
 * it is offered), not an error. A tool source's listing and an operation hook, which no recording
 * holds, run as they are (the agent's own code; the listed tools' calls are quarantined).
 *
 * @example
 * ```ts
 * const run = await replayAgainst(store, 'support-42', { model, tools, policy: { maxTurns: 3 } });
 * if (run.difference) console.log(run.difference.step, run.difference.recorded?.what, '→', run.difference.got?.what);
 * ```
 */
export async function replayAgainst(store: SessionStore, sessionId: string, agent: EvalAgent): Promise<CaseRun> {
  const evalCase = await recordCase(store, sessionId);
  return runCase(evalCase, agent, { model: 'recorded', allowMissingTools: true });
}

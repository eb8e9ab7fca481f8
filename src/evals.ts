/**
 * `loopchart/evals`: record sessions as cases, run a dataset against an agent with its tools
 * quarantined (the model live, or recorded for a dry run), score the runs, gate CI on the scores,
 * and find the first decision a changed agent takes otherwise than a recording.
 */
export {
  loadDataset,
  saveCases,
  parseCase,
  caseJson,
  EvalCaseSchema,
  ExpectationsSchema,
  CASE_FORMAT,
  type Dataset,
  type EvalCase,
  type EvalCaseInput,
  type Expectations,
  type Recording,
} from './evals/dataset.js';
export { recordCase, recordCases, type SessionSelection } from './evals/record.js';
export { runCase, type CaseRun, type EvalAgent, type RunCaseOptions, type RunToolCall } from './evals/run-case.js';
export { decisionsOf, firstDifference, type Decision, type DecisionDifference, type DecisionKind } from './evals/decisions.js';
export {
  scorer,
  outcomeIs,
  textEquals,
  textContains,
  textMatches,
  outputValid,
  outputEquals,
  toolCalls,
  toolsWithin,
  withinBudget,
  latencyUnder,
  noGuardrailTrips,
  sameDecisions,
  expectations,
  type Scorer,
  type ScoreValue,
  type ExpectedCall,
} from './evals/scorers.js';
export { judge, type JudgeOptions } from './evals/judge.js';
export { runEval, scoreCase, type RunEvalOptions, type EvalReport, type CaseResult, type CaseScore, type ScorerSummary, type EvalProgress } from './evals/run-eval.js';
export { formatTable, formatJson, formatJUnit, comparePath, type TableOptions } from './evals/report.js';
export { evalCases, expectToPass, replayAgainst } from './evals/helpers.js';
export { DatasetError, EvalCaseError, EvalOptionsError, ResultsFileError, ScorerError, type EvalCaseProblem } from './evals/errors.js';

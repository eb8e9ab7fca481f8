import { LoopchartError } from '../errors.js';

/**
 * A dataset file that cannot be read as a case: not JSON (with the line and column), or a case
 * the schema refuses (with the path of the first problem). Names the file and, when its name or
 * content says, the case. The other cases of the dataset still load.
 *
 * @example
 * ```ts
 * const { problems } = await loadDataset('evals/support');
 * for (const problem of problems) console.error(DatasetError.isInstance(problem) && problem.file, problem.message);
 * ```
 */
export class DatasetError extends LoopchartError {
  readonly file: string;
  readonly caseId: string | undefined;
  readonly line: number | undefined;
  constructor(file: string, problem: string, options: { caseId?: string | undefined; line?: number | undefined; cause?: unknown } = {}) {
    super('InvalidDataset', `dataset file ${file}${options.line !== undefined ? `:${options.line}` : ''}${options.caseId ? ` (case '${options.caseId}')` : ''}: ${problem}`, { cause: options.cause });
    this.file = file;
    this.caseId = options.caseId;
    this.line = options.line;
  }
}

/**
 * A line of a results file (`runEval`'s `resultsFile`) this version does not read: not JSON (but
 * the last, which an interruption may cut), nested past the bound, or not a stored result (a run,
 * scores or an error of another shape). It is not reused: its case runs again. Told to
 * `onUnreadable` once per line; names the file, the line and, when the line says, the case.
 *
 * @example
 * ```ts
 * const report = await runEval({ dataset: 'evals/support', agent: config, resultsFile: 'evals/support/.results.jsonl', onUnreadable: (error) => console.error(`${error.file}:${error.line}`, error.message) });
 * ```
 */
export class ResultsFileError extends LoopchartError {
  readonly file: string;
  readonly line: number;
  readonly caseId: string | undefined;
  constructor(file: string, line: number, problem: string, options: { caseId?: string | undefined; cause?: unknown } = {}) {
    super('InvalidResultsFile', `results file ${file}:${line}${options.caseId ? ` (case '${options.caseId}')` : ''}: ${problem}`, { cause: options.cause });
    this.file = file;
    this.line = line;
    this.caseId = options.caseId;
  }
}

/** Why one case could not be run: the others still run, and the report names it. */
export type EvalCaseProblem =
  /** The recording cannot be used (a trace entry or row this build does not read, no run in it). */
  | 'recording'
  /** The recording calls tools the agent no longer has. */
  | 'tools'
  /** The agent (its module, or the function giving the case's config) could not be had. */
  | 'agent'
  /**
   * A dry run met an effect the recording has no answer for, a compaction or guardrail it does
   * not record: the run fails with this error (its outcome names it) and its decisions still diff.
   * A tool source's listing and an operation hook, which no recording holds, run as they are.
   */
  | 'unrecorded'
  /** The run itself broke (its session failed, or it did not finish within the case's time). */
  | 'run'
  /** The dataset file of the case is corrupt. */
  | 'dataset';

/**
 * One case of an evaluation could not be run or recorded; `problem` says which part failed.
 *
 * @example
 * ```ts
 * const report = await runEval({ dataset: 'evals/support', agent: config });
 * for (const result of report.cases) if (result.error) console.error(result.caseId, result.error.problem, result.error.message);
 * ```
 */
export class EvalCaseError extends LoopchartError {
  readonly caseId: string;
  readonly problem: EvalCaseProblem;
  constructor(caseId: string, problem: EvalCaseProblem, detail: string, options: { cause?: unknown } = {}) {
    super('EvalCaseFailed', `case '${caseId}': ${detail}`, options);
    this.caseId = caseId;
    this.problem = problem;
  }
}

/**
 * A scorer (a judge among them) threw, did not answer within its time, or answered something
 * that is not a score. Only that scorer of that case fails; the report names both.
 *
 * @example
 * ```ts
 * const report = await runEval({ dataset: 'evals/support', agent: config, scorers: [judge({ model, rubric: 'Answers the question.' })] });
 * const result = report.cases[0]!;
 * for (const [name, score] of Object.entries(result.scores)) if (score.error) console.error(name, score.error);
 * ```
 */
export class ScorerError extends LoopchartError {
  readonly caseId: string;
  readonly scorer: string;
  constructor(caseId: string, scorer: string, detail: string, options: { cause?: unknown } = {}) {
    super('ScorerFailed', `case '${caseId}', scorer '${scorer}': ${detail}`, options);
    this.caseId = caseId;
    this.scorer = scorer;
  }
}

/**
 * `runEval` or `runCase` was given an option out of range (a concurrency that is not a whole
 * number from 1, a timeout that is no positive number of ms, a scorer's gate outside 0..1):
 * thrown before any case runs, naming the option. Its code is `InvalidConfig`.
 *
 * @example
 * ```ts
 * try {
 *   await runEval({ dataset: 'evals/support', agent: config, concurrency: Number(process.env.EVAL_CONCURRENCY) });
 * } catch (error) {
 *   if (EvalOptionsError.isInstance(error)) console.error(`fix ${error.option}: ${error.message}`);
 * }
 * ```
 */
export class EvalOptionsError extends LoopchartError {
  readonly option: string;
  constructor(entry: 'runEval' | 'runCase', option: string, problem: string) {
    super('InvalidConfig', `${entry} option '${option}': ${problem}`);
    this.option = option;
  }
}

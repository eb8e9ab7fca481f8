import { createHash } from 'node:crypto';
import { appendFile, mkdir } from 'node:fs/promises';
import { dirname } from 'node:path';
import { z } from 'zod';
import { LoopchartError } from '../errors.js';
import { caseJson, loadDataset, type Dataset, type EvalCase } from './dataset.js';
import { DatasetError, EvalCaseError, ScorerError, type ResultsFileError } from './errors.js';
import { RunEvalOptionsSchema, checkOptions } from './options.js';
import { readResults, warnUnreadable, type StoredResult } from './results-file.js';
import { runCase, type CaseRun, type EvalAgent, type RunCaseOptions } from './run-case.js';
import { ScoreValueSchema, expectations, sameDecisions, type Scorer } from './scorers.js';

/** One scorer's verdict on one case: the score (null: does not apply), whether it passed, why, or the error that stopped it. */
export interface CaseScore {
  score: number | null;
  pass: boolean;
  reason?: string | undefined;
  error?: string | undefined;
}

/** One case's result: its run, or the typed error that stopped it (`code`, `problem`, `message`), and its scores. */
export interface CaseResult {
  caseId: string;
  run?: CaseRun | undefined;
  error?: { code: string; problem?: string | undefined; message: string } | undefined;
  scores: Record<string, CaseScore>;
}

/** One scorer over the dataset: mean score and pass rate over the cases it applies to, its errors, and its gate. */
export interface ScorerSummary {
  name: string;
  /** Cases the score applies to (cases that did not run count, as 0, for every scorer, one added since among them). */
  cases: number;
  mean: number;
  passed: number;
  errors: number;
  threshold?: number | undefined;
  /** False when the mean is below the threshold. */
  gate: boolean;
}

export interface EvalReport {
  cases: CaseResult[];
  scorers: ScorerSummary[];
  /** Cases that could not run (their typed errors are in `cases`). */
  failedCases: number;
  /** Why the gate fails, one line each; empty when it holds. */
  gateFailures: string[];
  passed: boolean;
  ms: number;
}

/** Progress of a dataset run, for a progress bar (the CLI writes it to stderr). */
export interface EvalProgress {
  done: number;
  total: number;
  caseId: string;
  status: 'ok' | 'error' | 'skipped';
  ms: number;
}

export interface RunEvalOptions extends Omit<RunCaseOptions, 'allowMissingTools' | 'sessionId'> {
  /** A dataset folder, or a loaded dataset. */
  dataset: string | Dataset;
  agent: EvalAgent;
  /** Default: `expectations()` and `sameDecisions()`. */
  scorers?: readonly Scorer[] | undefined;
  /** Cases run at once (default 4). */
  concurrency?: number | undefined;
  /**
   * A JSONL file each finished case is appended to as it finishes, so an interrupted evaluation
   * resumes: the cases that ran and are in it are not run again, unless their case file changed
   * since; a case stored as not run (its typed error) runs again. An evaluation that runs to its
   * end says so on the file's last line, and the next one starts the file over (its agent may
   * have changed: the stored runs are not its). Delete it to start over.
   */
  resultsFile?: string | undefined;
  /**
   * Told of each line of `resultsFile` this version does not read (a run, scores or an error of
   * another shape: edited by hand, written by another version), once: a `ResultsFileError` naming
   * the file, the line and the case. Its case runs again. Default: a process warning
   * (`process.emitWarning`), on one line with its control characters escaped.
   */
  onUnreadable?: ((error: ResultsFileError) => void) | undefined;
  /** Cases that may fail before the gate fails (default 0). */
  maxFailedCases?: number | undefined;
  onProgress?: ((progress: EvalProgress) => void) | undefined;
  /**
   * Names this evaluation's sessions, `eval-<runId>-<case id>` (default: the start time and a
   * random suffix, as `20261104T101500-3f2a`), so no two evaluations share one: in `store`, nor
   * in a provider's idempotency cache (the model calls' keys are made from the session id).
   */
  runId?: string | undefined;
}

const DEFAULT_SCORER_TIMEOUT_MS = 30_000;

/** What a case's result was run from: its file's content, as `saveCases` writes it. */
const caseDigest = (evalCase: EvalCase): string => createHash('sha256').update(caseJson(evalCase)).digest('hex');

/**
 * Runs every case of a dataset against an agent (see `runCase`: a new session per case, tools
 * quarantined, the model live or recorded), `concurrency` at a time, then scores each with every
 * scorer and sums up per scorer against its threshold. A case that cannot run (a corrupt file, a
 * recording this build cannot read, tools the agent lost, an agent that fails to load, a run that
 * breaks) is a typed error in its result and scores 0 with every scorer; a scorer that throws or
 * hangs fails only its score. The report's `passed` is the CI gate. Options are checked first: one
 * out of range is an `EvalOptionsError` naming it, and nothing runs.
 *
 * @example
 * ```ts
 * const report = await runEval({ dataset: 'evals/support', agent: config, model: 'recorded', scorers: [outcomeIs('Completed', { threshold: 1 })] });
 * console.log(formatTable(report));
 * process.exitCode = report.passed ? 0 : 1;
 * ```
 */
export async function runEval(options: RunEvalOptions): Promise<EvalReport> {
  checkOptions('runEval', RunEvalOptionsSchema, options);
  const started = performance.now();
  const dataset = typeof options.dataset === 'string' ? await loadDataset(options.dataset) : options.dataset;
  const scorers = options.scorers ?? [...expectations(), sameDecisions()];
  const names = new Set<string>();
  for (const s of scorers) {
    if (names.has(s.name)) throw new ScorerError('(all)', s.name, 'two scorers have this name: give one another name');
    names.add(s.name);
  }
  const previous = options.resultsFile ? await readResults(options.resultsFile, options.onUnreadable ?? warnUnreadable) : new Map<string, StoredResult>();
  const total = dataset.cases.length + dataset.problems.length;
  let done = 0;
  const progress = (caseId: string, status: EvalProgress['status'], ms: number) => options.onProgress?.({ done: ++done, total, caseId, status, ms });
  const record = async (result: CaseResult, evalCase: EvalCase) => {
    if (!options.resultsFile) return;
    await mkdir(dirname(options.resultsFile), { recursive: true });
    await appendFile(options.resultsFile, `${JSON.stringify({ ...result, caseDigest: caseDigest(evalCase) })}\n`);
  };

  const results = new Map<string, CaseResult>();
  const ids = new Set(dataset.cases.map((c) => c.id));
  /** A corrupt file's result is keyed by its case id, or its file when a readable case has that id. */
  const problemKey = (problem: DatasetError) => (problem.caseId && !ids.has(problem.caseId) ? problem.caseId : problem.file);
  for (const problem of dataset.problems) {
    const caseId = problemKey(problem);
    results.set(caseId, failed(caseId, problem, 'dataset', scorers));
    progress(caseId, 'error', 0);
  }
  // A stored case that did not run runs again: what stopped it (an agent, a tool, a deadline) may
  // be fixed since; so does one whose file changed since it ran.
  const kept = (evalCase: EvalCase): CaseResult | undefined => {
    const stored = previous.get(evalCase.id);
    if (!stored || stored.result.error || stored.caseDigest !== caseDigest(evalCase)) return undefined;
    return stored.result;
  };
  const queue = dataset.cases.filter((evalCase) => {
    const stored = kept(evalCase);
    if (!stored) return true;
    results.set(evalCase.id, stored);
    progress(evalCase.id, 'skipped', 0);
    return false;
  });
  // Scores of stored cases for scorers added since: computed from the stored run.
  for (const [caseId, result] of results) {
    const evalCase = dataset.cases.find((c) => c.id === caseId);
    if (evalCase && result.run) Object.assign(result.scores, await scoreCase(evalCase, result.run, scorers.filter((s) => !Object.hasOwn(result.scores, s.name))));
  }

  const runId = options.runId ?? `${new Date().toISOString().replace(/[-:]|\.\d+Z$/g, '')}-${Math.random().toString(16).slice(2, 6).padEnd(4, '0')}`;
  let next = 0;
  const worker = async () => {
    while (next < queue.length) {
      const evalCase = queue[next++]!;
      const t0 = performance.now();
      let result: CaseResult;
      try {
        const run = await runCase(evalCase, options.agent, { ...options, sessionId: `eval-${runId}-${evalCase.id}` });
        result = { caseId: evalCase.id, run, scores: await scoreCase(evalCase, run, scorers) };
      } catch (error) {
        result = failed(evalCase.id, error, 'run', scorers);
      }
      results.set(evalCase.id, result);
      await record(result, evalCase);
      progress(evalCase.id, result.error ? 'error' : 'ok', performance.now() - t0);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(options.concurrency ?? 4, queue.length)) }, worker));
  if (options.resultsFile) await appendFile(options.resultsFile, `${JSON.stringify({ finished: true })}\n`);

  const ordered = [...dataset.problems.map(problemKey), ...dataset.cases.map((c) => c.id)].map((id) => results.get(id)!);
  return summarizeReport(ordered, scorers, options.maxFailedCases ?? 0, performance.now() - started);
}

/** The score of every scorer on a case that did not run. */
const DID_NOT_RUN: CaseScore = { score: 0, pass: false, error: 'the case did not run' };

/** A case that did not run: its error, and every scorer's score 0 (failed). */
function failed(caseId: string, error: unknown, problem: string, scorers: readonly Scorer[]): CaseResult {
  const typed = LoopchartError.isInstance(error) ? error : new EvalCaseError(caseId, 'run', String((error as Error)?.message ?? error), { cause: error });
  const message = typed.message;
  return {
    caseId,
    error: { code: typed.code, problem: EvalCaseError.isInstance(typed) ? typed.problem : DatasetError.isInstance(typed) ? 'dataset' : problem, message },
    scores: Object.fromEntries(scorers.map((s) => [s.name, DID_NOT_RUN])),
  };
}

/** Every scorer on one run, each with its timeout: a throw, a hang or a bad value fails that score only. */
export async function scoreCase(evalCase: EvalCase, run: CaseRun, scorers: readonly Scorer[]): Promise<Record<string, CaseScore>> {
  const entries = await Promise.all(
    scorers.map(async (s): Promise<[string, CaseScore]> => {
      try {
        const value = ScoreValueSchema.safeParse(await timed(s, evalCase, run));
        if (!value.success) throw new ScorerError(evalCase.id, s.name, `returned no score (a number 0..1, a boolean, { score, reason } or null): ${z.prettifyError(value.error).split('\n').join(' ')}`);
        const v = value.data;
        if (v === null) return [s.name, { score: null, pass: true, reason: 'does not apply' }];
        const score = typeof v === 'boolean' ? (v ? 1 : 0) : typeof v === 'number' ? v : v.score;
        const reason = typeof v === 'object' ? v.reason : undefined;
        return [s.name, { score, pass: score >= (s.passAt ?? 1), ...(reason !== undefined && { reason }) }];
      } catch (error) {
        const typed = ScorerError.isInstance(error) ? error : new ScorerError(evalCase.id, s.name, `threw: ${(error as Error)?.message ?? String(error)}`, { cause: error });
        return [s.name, { score: 0, pass: false, error: typed.message }];
      }
    }),
  );
  return Object.fromEntries(entries);
}

/** One score, settled by its timeout (the scorer's signal aborts then; a scorer that ignores it is left behind). */
async function timed(s: Scorer, evalCase: EvalCase, run: CaseRun): Promise<unknown> {
  const ms = s.timeoutMs ?? DEFAULT_SCORER_TIMEOUT_MS;
  const controller = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const error = new ScorerError(evalCase.id, s.name, `did not answer within ${ms} ms`);
      controller.abort(error);
      reject(error);
    }, ms);
  });
  try {
    return await Promise.race([Promise.resolve().then(() => s.score(evalCase, run, { signal: controller.signal })), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** Aggregates per scorer and the gate. */
export function summarizeReport(cases: CaseResult[], scorers: readonly Scorer[], maxFailedCases: number, ms: number): EvalReport {
  const summaries = scorers.map((s): ScorerSummary => {
    // A case that did not run counts 0 for every scorer, one it holds no score of among them.
    const scores = cases.map((c) => c.scores[s.name] ?? (c.error ? DID_NOT_RUN : undefined)).filter((score): score is CaseScore => score !== undefined && score.score !== null);
    const mean = scores.length ? scores.reduce((sum, score) => sum + score.score!, 0) / scores.length : 1;
    return {
      name: s.name,
      cases: scores.length,
      mean,
      passed: scores.filter((score) => score.pass).length,
      errors: scores.filter((score) => score.error).length,
      ...(s.threshold !== undefined && { threshold: s.threshold }),
      gate: s.threshold === undefined || mean >= s.threshold,
    };
  });
  const failedCases = cases.filter((c) => c.error).length;
  const gateFailures = [
    ...summaries.filter((s) => !s.gate).map((s) => `${s.name}: mean ${s.mean.toFixed(3)} is below its threshold ${s.threshold}`),
    ...(failedCases > maxFailedCases ? [`${failedCases} case(s) could not run (at most ${maxFailedCases} may)`] : []),
  ];
  return { cases, scorers: summaries, failedCases, gateFailures, passed: gateFailures.length === 0, ms };
}

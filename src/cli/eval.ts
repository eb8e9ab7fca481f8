import { writeFile } from 'node:fs/promises';
import type { AgentConfig } from '../agent/core/config.js';
import type { EvalCase } from '../evals/dataset.js';
import { saveCases } from '../evals/dataset.js';
import { recordCases } from '../evals/record.js';
import { formatJUnit, formatJson, formatTable } from '../evals/report.js';
import { runEval } from '../evals/run-eval.js';
import type { EvalAgent } from '../evals/run-case.js';
import type { Scorer } from '../evals/scorers.js';
import type { SessionStore } from '../stores/session-store.js';
import { DEFAULT_VIEWER_PORT, VIEWER_HOST } from '../viewer/server.js';
import { exportOf, importAgentModule } from './agent.js';
import { CliError, UsageError } from './errors.js';
import { escapeLine } from './escape.js';
import { refuseDatabaseAsOutput } from './output-file.js';
import { noStore, withStore, type Io } from './sessions.js';
import { parseCommandArgs, storeCommandOptions } from './args.js';
import { MAX_TIMER_MS } from '../timer-bound.js';

export const EVAL_USAGE = `usage: loopchart eval DATASET --agent MODULE [options]
       loopchart eval record DATASET [--store LOCATION] [--session ID ...] [--prefix P]

  eval DATASET      run every case of the dataset folder (one JSON file per case) against the agent,
                    score the runs and print the report; exit 1 when the gate fails
  eval record DATASET
                    write sessions of a store into the dataset folder as recorded cases

options:
  --agent MODULE    a module exporting \`agent\`: an AgentConfig, or a function (case) => AgentConfig
  --scorers MODULE  a module exporting \`scorers\` (Scorer[]; default: the cases' expectations and
                    same decisions as the recording)
  --dry-run         answer the model, compactions and guardrails from the recording too
                    (nothing is called)
  --live-tools A,B  these tools run for real; every other call is answered from the recording
  --concurrency N   cases run at once (default 4)
  --results FILE    each finished case is appended here, so an interrupted evaluation
                    resumes: a rerun skips the cases it holds that ran; after one that ran
                    to its end the file starts over (default DATASET/.results.jsonl;
                    --fresh starts over)
  --format F        table (default), json or junit
  -o, --out FILE    write the report there (the table still goes to stdout)
  --timeout MS      each case's runs must end within this (default 120000)
  --max-failed N    cases that may fail to run before the gate fails (default 0)
  --keep-runs       keep each new run as a session in the store (--store, or LOOPCHART_STORE):
                    a case that decides otherwise than its recording prints its side-by-side
                    page, served by loopchart view from the same store
  --store, --schema, --session ID (repeatable), --prefix P: record: where and which sessions

exit codes: 0 gate passed, 1 gate failed or an error, 2 bad usage`;

/** `loopchart eval`'s own options (besides the store's and the help). */
const EVAL_ARGS = {
  agent: { type: 'string' },
  scorers: { type: 'string' },
  'dry-run': { type: 'boolean' },
  'live-tools': { type: 'string' },
  concurrency: { type: 'string' },
  results: { type: 'string' },
  fresh: { type: 'boolean' },
  format: { type: 'string' },
  out: { type: 'string', short: 'o' },
  timeout: { type: 'string' },
  'max-failed': { type: 'string' },
  'keep-runs': { type: 'boolean' },
  session: { type: 'string', multiple: true },
  prefix: { type: 'string' },
} as const;

const parse = (argv: string[]) => parseCommandArgs(argv, EVAL_ARGS);

/** The longest delay a Node timer keeps (a longer one fires at once): the most `--timeout` may be. */
const MAX_TIMEOUT_MS = MAX_TIMER_MS;

/**
 * A flag's whole number from `min` to `max`; anything else is bad usage (exit 2), never an
 * option error from the evaluation (exit 1, which reads as a failed gate).
 */
const wholeNumber = (name: string, text: string | undefined, fallback: number, min = 0, max = Number.MAX_SAFE_INTEGER, unit = ''): number => {
  if (text === undefined) return fallback;
  if (!/^\d+$/.test(text) || Number(text) < min || Number(text) > max) throw new UsageError(`${name} must be a whole number from ${min} to ${max}${unit}, got '${text}'`);
  return Number(text);
};

/** `loopchart eval …` (argv after `eval`). */
export async function evalCommand(argv: string[], io: Io): Promise<number> {
  const { values, positionals } = parse(argv);
  if (values.help || positionals.length === 0) {
    io.out(EVAL_USAGE);
    return values.help ? 0 : 2;
  }
  if (positionals[0] === 'record') {
    if (positionals.length !== 2) throw new UsageError('usage: loopchart eval record DATASET [--store LOCATION] [--session ID ...] [--prefix P]');
    return record(positionals[1]!, values, io);
  }
  if (positionals.length !== 1) throw new UsageError('usage: loopchart eval DATASET --agent MODULE');
  if (!values.agent) throw new UsageError('loopchart eval needs --agent MODULE (a module exporting `agent`)');
  const format = values.format ?? 'table';
  if (!['table', 'json', 'junit'].includes(format)) throw new UsageError(`--format must be table, json or junit, got '${format}'`);
  const dataset = positionals[0]!;
  const resultsFile = values.results ?? `${dataset}/.results.jsonl`;
  refuseDatabaseAsOutput(resultsFile, '--results');
  if (values.out) refuseDatabaseAsOutput(values.out, '-o');
  if (values.fresh) await writeFile(resultsFile, '').catch(() => {});
  const scorers = values.scorers ? await loadScorers(values.scorers) : undefined;
  const agentModule = values.agent;
  const evaluate = async (store?: SessionStore) => {
    const report = await runEval({
      dataset,
      agent: agentOf(agentModule),
      ...(scorers && { scorers }),
      ...(store && { store }),
      model: values['dry-run'] ? 'recorded' : 'live',
      liveTools: values['live-tools'] ? values['live-tools'].split(',').map((name) => name.trim()).filter(Boolean) : [],
      concurrency: wholeNumber('--concurrency', values.concurrency, 4, 1),
      timeoutMs: wholeNumber('--timeout', values.timeout, 120_000, 1, MAX_TIMEOUT_MS, ' (ms)'),
      maxFailedCases: wholeNumber('--max-failed', values['max-failed'], 0),
      resultsFile,
      onUnreadable: (error) => io.err(`warning: ${escapeLine(error.message)}`),
      onProgress: ({ done, total, caseId, status, ms }) => io.err(`[${done}/${total}] ${escapeLine(caseId)} ${status}${status === 'skipped' ? ' (in the results file)' : ` ${Math.round(ms)} ms`}`),
    });
    const table = formatTable(report, { viewerUrl: `http://${VIEWER_HOST}:${DEFAULT_VIEWER_PORT}` });
    const text = format === 'json' ? formatJson(report) : format === 'junit' ? formatJUnit(report, dataset) : table;
    if (values.out) {
      await writeFile(values.out, text);
      io.out(table);
    } else io.out(text);
    return report.passed ? 0 : 1;
  };
  if (!values['keep-runs']) return evaluate();
  // The new runs go beside the recordings, so one viewer serves both sides of a case.
  const options = storeCommandOptions(values, io);
  return withStore(options, evaluate, noStore(options.location));
}

/**
 * The agent of the module, loaded once on first use: a module that fails to load fails every
 * case with that error (typed, naming the case), and the report says so.
 */
function agentOf(modulePath: string): EvalAgent {
  let loaded: Promise<unknown> | undefined;
  return async (evalCase: EvalCase) => {
    loaded ??= importAgentModule(modulePath).then((module) => exportOf(module, 'agent') ?? module.default);
    const agent = await loaded;
    const config = typeof agent === 'function' ? await (agent as (c: EvalCase) => unknown)(evalCase) : agent;
    if (!config || typeof config !== 'object' || !('model' in config)) throw new Error(`${modulePath} must export \`agent\`: an AgentConfig or a function (case) => AgentConfig`);
    return config as AgentConfig;
  };
}

async function loadScorers(modulePath: string): Promise<Scorer[]> {
  const module = await importAgentModule(modulePath);
  const scorers = exportOf(module, 'scorers') ?? module.default;
  if (!Array.isArray(scorers) || !scorers.every((s) => s && typeof s.name === 'string' && typeof s.score === 'function')) {
    throw new CliError(`${modulePath} must export \`scorers\`: an array of scorers ({ name, score(case, run) })`);
  }
  return scorers as Scorer[];
}

async function record(dataset: string, values: ReturnType<typeof parse>['values'], io: Io): Promise<number> {
  if (!values.session && values.prefix === undefined) throw new UsageError('loopchart eval record needs --session ID (repeatable) or --prefix P');
  const options = storeCommandOptions(values, io);
  return withStore(
    options,
    async (store) => {
      const { cases, problems } = await recordCases(store, { ...(values.session && { ids: values.session }), ...(values.prefix !== undefined && { prefix: values.prefix }) });
      const files = await saveCases(dataset, cases);
      for (const file of files) io.out(`recorded ${escapeLine(file)}`);
      for (const problem of problems) io.err(`not recorded: ${escapeLine(problem.message)}`);
      io.out(`${files.length} case(s) recorded, ${problems.length} not`);
      return problems.length === 0 ? 0 : 1;
    },
    noStore(options.location),
  );
}

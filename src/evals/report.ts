import type { EvalReport } from './run-eval.js';

/*
 * An evaluation's report as a terminal table, JSON, or JUnit XML (one testsuite per evaluation,
 * one testcase per case, a failure per scorer it failed, an error for a case that did not run).
 */

/**
 * The viewer's page showing a case's recorded run and its new run side by side, decision by
 * decision, the first difference marked: both sessions must be in the store the viewer serves
 * (the new run is kept there by `runEval`'s `store`).
 *
 * @example
 * ```ts
 * const report = await runEval({ dataset: 'evals/support', agent: config, store });
 * for (const { run } of report.cases) {
 *   if (run?.sessionId && run.recordedSessionId) console.log(`http://127.0.0.1:4317${comparePath(run.recordedSessionId, run.sessionId)}`);
 * }
 * ```
 */
export const comparePath = (recordedSessionId: string, newSessionId: string): string => `/compare/${encodeURIComponent(recordedSessionId)}/${encodeURIComponent(newSessionId)}`;

/** How `formatTable` prints a report. */
export interface TableOptions {
  /** The viewer's address (`http://127.0.0.1:4317`): each kept run's side-by-side page is printed under it. Default: the page's path alone. */
  viewerUrl?: string | undefined;
}

const pad = (text: string, width: number) => (text.length > width ? `${text.slice(0, width - 1)}…` : text.padEnd(width));

/**
 * The report as text: one line per scorer (mean, passed, errors, gate), the cases that failed a
 * scorer or did not run with why, the first differing decision of each case that has one (with
 * its side-by-side page in the viewer when the new run was kept in a store), and the gate.
 *
 * @example
 * ```ts
 * console.log(formatTable(await runEval({ dataset: 'evals/support', agent: config }), { viewerUrl: 'http://127.0.0.1:4317' }));
 * ```
 */
export function formatTable(report: EvalReport, options: TableOptions = {}): string {
  const lines: string[] = [];
  lines.push(`${report.cases.length} case(s), ${report.failedCases} could not run, ${(report.ms / 1000).toFixed(1)} s`);
  lines.push('');
  lines.push(`${pad('scorer', 28)} ${'mean'.padStart(6)} ${'passed'.padStart(9)} ${'errors'.padStart(6)}  gate`);
  for (const s of report.scorers) {
    const gate = s.threshold === undefined ? '-' : `${s.gate ? 'ok' : 'FAIL'} (>= ${s.threshold})`;
    lines.push(`${pad(s.name, 28)} ${(s.cases ? s.mean.toFixed(3) : '-').padStart(6)} ${`${s.passed}/${s.cases}`.padStart(9)} ${String(s.errors).padStart(6)}  ${gate}`);
  }
  const failing = report.cases.filter((c) => c.error || Object.values(c.scores).some((score) => !score.pass));
  if (failing.length) {
    lines.push('', 'cases that failed:');
    for (const c of failing) {
      if (c.error) {
        lines.push(`  ${c.caseId}: did not run (${c.error.problem ?? c.error.code}): ${c.error.message}`);
        continue;
      }
      for (const [name, score] of Object.entries(c.scores)) {
        if (!score.pass) lines.push(`  ${c.caseId}: ${name} ${score.error ? `error: ${score.error}` : `${score.score?.toFixed(2)}${score.reason ? ` (${score.reason})` : ''}`}`);
      }
    }
  }
  const differing = report.cases.filter((c) => c.run?.difference);
  if (differing.length) {
    lines.push('', 'first decision that differs from the recording:');
    for (const c of differing) {
      const d = c.run!.difference!;
      lines.push(`  ${c.caseId}: step ${d.step} (run ${(d.recorded ?? d.got)!.run + 1})`);
      lines.push(`    recorded: ${d.recorded ? `${d.recorded.what}  [${d.recorded.rule}]` : '(the recording ends here)'}`);
      lines.push(`    now:      ${d.got ? `${d.got.what}  [${d.got.rule}]` : '(the new run ends here)'}`);
      const { sessionId, recordedSessionId } = c.run!;
      if (sessionId && recordedSessionId) lines.push(`    side by side: ${(options.viewerUrl ?? '').replace(/\/$/, '')}${comparePath(recordedSessionId, sessionId)}`);
    }
  }
  lines.push('', report.passed ? 'gate: passed' : `gate: FAILED\n${report.gateFailures.map((f) => `  ${f}`).join('\n')}`);
  return lines.join('\n');
}

/**
 * The report as JSON (the runs' conversations left out: the results file has them).
 *
 * @example
 * ```ts
 * const report = await runEval({ dataset: 'evals/support', agent: config });
 * console.log(formatJson(report));
 * ```
 */
export function formatJson(report: EvalReport): string {
  return JSON.stringify(
    { ...report, cases: report.cases.map((c) => (c.run ? { ...c, run: { ...c.run, messages: undefined } } : c)) },
    null,
    2,
  );
}

const xml = (text: string) =>
  text.replace(/[&<>"']/g, (ch) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&apos;' })[ch]!).replace(/[\u0000-\u0008\u000b\u000c\u000e-\u001f]/g, '');

/**
 * The report as JUnit XML, for a CI system's test view: a testcase per case, a `<failure>` per
 * scorer it failed, an `<error>` when it did not run.
 *
 * @example
 * ```ts
 * const report = await runEval({ dataset: 'evals/support', agent: config });
 * console.log(formatJUnit(report, 'support evals'));
 * ```
 */
export function formatJUnit(report: EvalReport, suite = 'loopchart eval'): string {
  const failures = report.cases.filter((c) => !c.error && Object.values(c.scores).some((s) => !s.pass)).length;
  const cases = report.cases.map((c) => {
    const time = ((c.run?.ms ?? 0) / 1000).toFixed(3);
    const open = `  <testcase classname="${xml(suite)}" name="${xml(c.caseId)}" time="${time}">`;
    if (c.error) return `${open}\n    <error type="${xml(c.error.code)}" message="${xml(c.error.message)}"/>\n  </testcase>`;
    const failed = Object.entries(c.scores).filter(([, s]) => !s.pass);
    if (!failed.length) return `${open}</testcase>`;
    const body = failed.map(([name, s]) => `    <failure type="${xml(name)}" message="${xml(`${name}: ${s.error ?? `${s.score?.toFixed(2)} ${s.reason ?? ''}`.trim()}`)}"/>`).join('\n');
    return `${open}\n${body}\n  </testcase>`;
  });
  return [
    '<?xml version="1.0" encoding="UTF-8"?>',
    `<testsuite name="${xml(suite)}" tests="${report.cases.length}" failures="${failures}" errors="${report.failedCases}" time="${(report.ms / 1000).toFixed(3)}">`,
    ...cases,
    '</testsuite>',
    '',
  ].join('\n');
}

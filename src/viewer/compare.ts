import { decisionsOf, firstDifference, type Decision } from '../evals/decisions.js';
import { comparePath } from '../evals/report.js';
import type { ReadTraceEntry, TraceEntry } from '../sessions/trace.js';
import { describeOutcome } from './load.js';
import { document, escapeHtml, SCHEDULES_PATH, sessionPath } from './page.js';

/*
 * An eval case's recorded run and its new run side by side, decision by decision, the first
 * difference marked. The decisions and the difference are the evals' own (`decisionsOf`,
 * `firstDifference`): the page shows what `loopchart eval` reports, never a diff of its own.
 * Rendered on the server, every stored text escaped, no script.
 */

/** The two session ids of a compare page's path `/compare/<recorded>/<new>`, or null when the path is not one (or not valid percent-encoding). */
export function comparePaths(pathname: string): { recorded: string; got: string } | null {
  const match = /^\/compare\/([^/]+)\/([^/]+)$/.exec(pathname);
  if (!match) return null;
  try {
    return { recorded: decodeURIComponent(match[1]!), got: decodeURIComponent(match[2]!) };
  } catch {
    return null;
  }
}

/** One side of the page: a session and its trace as the store gave it. */
export interface CompareSide {
  sessionId: string;
  trace: readonly ReadTraceEntry[];
}

interface SideView {
  sessionId: string;
  decisions: Decision[];
  outcome: string;
  /** Trace entries this build cannot read: left out of the decisions, and said so. */
  unreadable: number;
}

function sideView(side: CompareSide): SideView {
  const entries = side.trace.flatMap((record): TraceEntry[] => ('entry' in record ? [record.entry] : []));
  const finished = entries.findLast((entry): entry is Extract<TraceEntry, { type: 'finished' }> => entry.type === 'finished');
  return {
    sessionId: side.sessionId,
    decisions: decisionsOf(entries),
    outcome: finished ? describeOutcome(finished.outcome) : 'no finished run',
    unreadable: side.trace.length - entries.length,
  };
}

const cell = (decision: Decision | null, endsHere: string) =>
  decision
    ? `<td class="decision"><span class="kind">run ${decision.run + 1} · ${escapeHtml(decision.kind)}</span><div class="what">${escapeHtml(decision.what)}</div><div class="rule">${escapeHtml(decision.rule)}</div></td>`
    : `<td class="decision ended">${endsHere}</td>`;

const sessionFacts = (label: string, side: SideView) =>
  `<div><dt>${label}</dt><dd><a href="${escapeHtml(sessionPath(side.sessionId))}">${escapeHtml(side.sessionId)}</a> · ${side.decisions.length} decisions · ${escapeHtml(side.outcome)}${
    side.unreadable ? ` · <span class="error">${side.unreadable} trace entries this build cannot read, left out</span>` : ''
  }</dd></div>`;

/**
 * The side-by-side page: one row per decision step, the recorded run's decision and rule on the
 * left, the new run's on the right; the first step where they part is marked (`#first-difference`)
 * and the steps after it are shown dimmed, as they no longer line up.
 */
export function comparePage(recorded: CompareSide, got: CompareSide): string {
  const a = sideView(recorded);
  const b = sideView(got);
  const difference = firstDifference(a.decisions, b.decisions);
  const steps = Math.max(a.decisions.length, b.decisions.length);
  const rows: string[] = [];
  for (let i = 0; i < steps; i++) {
    const step = i + 1;
    const first = difference?.step === step;
    const after = difference !== null && step > difference.step;
    rows.push(
      `<tr id="${first ? 'first-difference' : `step-${step}`}"${first ? ' class="first-difference"' : after ? ' class="after-difference"' : ''}>
<td class="step">${step}${first ? '<div class="marker">first difference</div>' : ''}</td>
${cell(a.decisions[i] ?? null, 'the recording ends here')}
${cell(b.decisions[i] ?? null, 'the new run ends here')}
</tr>`,
    );
  }
  const verdict = difference
    ? `The runs part at <a href="#first-difference">step ${difference.step}</a> (run ${(difference.recorded ?? difference.got)!.run + 1}).`
    : `The runs decide alike at every step (${steps} decisions).`;
  return document(
    `loopchart · ${a.sessionId} vs ${b.sessionId}`,
    `<nav>loopchart view · <a href="/">sessions</a> · <a href="${SCHEDULES_PATH}">schedules</a></nav>
<main class="home compare">
<h1>Recorded run and new run, decision by decision</h1>
<dl class="facts">${sessionFacts('recorded', a)}${sessionFacts('new', b)}</dl>
<p id="verdict">${verdict}</p>
<div class="table"><table id="compare"><thead><tr><th>step</th><th>recorded: decision and rule</th><th>new: decision and rule</th></tr></thead>
<tbody>
${rows.join('\n')}
</tbody></table></div>
<p class="hint">A decision is compared by what it decided alone: ids, times and keys never differ. The link to this page: <code>${escapeHtml(comparePath(a.sessionId, b.sessionId))}</code>.</p>
</main>`,
  );
}

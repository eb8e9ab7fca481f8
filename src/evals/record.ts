import { isChildSessionId } from '../agent/subagents/subagents.js';
import { LoopchartError } from '../errors.js';
import type { Message } from '../schemas.js';
import { decodeRow } from '../sessions/session-row.js';
import { readSessionTrace, type TraceEntry } from '../sessions/trace.js';
import type { SessionStore, SessionSummary } from '../stores/session-store.js';
import { CASE_FORMAT, CASE_ID, type EvalCase } from './dataset.js';
import { EvalCaseError } from './errors.js';

/** Which sessions of a store become cases: by id, by id prefix, or any test on the summary. All given must hold. */
export interface SessionSelection {
  ids?: readonly string[] | undefined;
  prefix?: string | undefined;
  filter?: ((summary: SessionSummary) => boolean) | undefined;
}

/**
 * An entry repeated after a crash (an effect recorded again, a run's start or end) counts once:
 * the later one is what the run used (as replay reads a trace).
 */
export function lastOfEach(trace: readonly TraceEntry[]): TraceEntry[] {
  const keyOf = (entry: TraceEntry): string | null =>
    entry.type === 'model' || entry.type === 'compaction' || entry.type === 'tool' ? `${entry.type}:${entry.key}` : entry.type === 'run' || entry.type === 'finished' ? `${entry.type}:${entry.run}` : null;
  const last = new Map<string, number>();
  trace.forEach((entry, i) => {
    const key = keyOf(entry);
    if (key !== null) last.set(key, i);
  });
  return trace.filter((entry, i) => {
    const key = keyOf(entry);
    return key === null || last.get(key) === i;
  });
}

/** A case id made from a session id (characters a file name may not carry become `-`). */
export function caseIdOf(sessionId: string): string {
  const id = sessionId.replace(/[^A-Za-z0-9._-]/g, '-').replace(/^[^A-Za-z0-9]+/, '').slice(0, 128);
  return CASE_ID.test(id) ? id : `session-${id || 'x'}`;
}

/**
 * A stored session as a case: its runs' prompts as the input, its trace as the recording, its last
 * outcome type as the expectation (edit the file to expect more). A row of an older version is
 * read through its migrations; a row or trace entry this build cannot read, or a session that
 * never ran, is an `EvalCaseError` naming the session.
 *
 * @example
 * ```ts
 * const evalCase = await recordCase(store, 'support-42');
 * await saveCases('evals/support', [evalCase]);
 * ```
 */
export async function recordCase(store: SessionStore, sessionId: string, caseId = caseIdOf(sessionId)): Promise<EvalCase> {
  const stored = await store.load(sessionId);
  if (!stored) throw new EvalCaseError(caseId, 'recording', `session '${sessionId}' does not exist`);
  if (!store.readTrace) throw new EvalCaseError(caseId, 'recording', 'this store keeps no trace');
  const rowVersion = (stored.state as { rowVersion?: unknown } | null)?.rowVersion;
  try {
    decodeRow(sessionId, stored.state, stored.messages);
  } catch (error) {
    throw new EvalCaseError(caseId, 'recording', `its stored row cannot be read: ${LoopchartError.isInstance(error) ? error.message : String(error)}`, { cause: error });
  }
  const trace: TraceEntry[] = [];
  for (const record of await readSessionTrace(store, sessionId)) {
    if ('invalid' in record) throw new EvalCaseError(caseId, 'recording', `trace entry ${record.seq} is not one this build reads: ${record.invalid.split('\n').join(' ')}`);
    trace.push(record.entry);
  }
  const runs = lastOfEach(trace).filter((entry): entry is Extract<TraceEntry, { type: 'run' }> => entry.type === 'run');
  if (runs.length === 0) throw new EvalCaseError(caseId, 'recording', `session '${sessionId}' records no run`);
  const history = forkedPrefix(caseId, trace, stored.messages);
  const finished = trace.findLast((entry): entry is Extract<TraceEntry, { type: 'finished' }> => entry.type === 'finished');
  return {
    format: CASE_FORMAT,
    id: caseId,
    description: `recorded from session ${sessionId}`,
    input: runs.map((run) => run.prompt),
    ...(history && { history }),
    ...(finished && { expect: { outcome: finished.outcome.type } }),
    recording: { sessionId, rowVersion: typeof rowVersion === 'number' ? rowVersion : 0, trace },
  };
}

/** A forked session starts from the original's prefix, which its trace does not hold: taken from the log while it is still there. */
function forkedPrefix(caseId: string, trace: readonly TraceEntry[], log: readonly Message[]): Message[] | undefined {
  const forked = trace.find((entry) => entry.type === 'forked');
  if (!forked || forked.messages === 0) return undefined;
  if (trace.some((entry) => (entry.type === 'compaction' && entry.rewritten) || (entry.type === 'event' && entry.event.type === 'rewind'))) {
    throw new EvalCaseError(caseId, 'recording', 'a forked session whose log was rewritten since (compacted or rewound): the prefix it started from is gone');
  }
  return log.slice(0, forked.messages);
}

/**
 * The sessions of a store a selection names, as cases (see `recordCase`), most recently updated
 * first; a session that cannot be recorded is in `problems`, the others are recorded. A
 * subagent's session (`<parent>/run-<r>:turn-<t>:<call id>`) is part of its parent's case and is
 * left out, unless `ids` names it.
 *
 * @example
 * ```ts
 * const { cases, problems } = await recordCases(store, { prefix: 'support-', filter: (s) => s.messageCount > 2 });
 * await saveCases('evals/support', cases);
 * ```
 */
export async function recordCases(store: SessionStore, selection: SessionSelection): Promise<{ cases: EvalCase[]; problems: EvalCaseError[] }> {
  const ids = selection.ids ? new Set(selection.ids) : null;
  // A subagent's session is a part of its parent's run (the agent tool's call, whose result the
  // parent's case holds), run by the agent tool's agent: only an id names it as a case of its own.
  const chosen = (await store.list()).filter(
    (summary) =>
      (ids ? ids.has(summary.sessionId) : !isChildSessionId(summary.sessionId)) &&
      (selection.prefix === undefined || summary.sessionId.startsWith(selection.prefix)) &&
      (!selection.filter || selection.filter(summary)),
  );
  const cases: EvalCase[] = [];
  const problems: EvalCaseError[] = [];
  for (const id of ids ?? []) if (!chosen.some((summary) => summary.sessionId === id)) problems.push(new EvalCaseError(caseIdOf(id), 'recording', `session '${id}' does not exist`));
  const taken = new Set<string>();
  for (const { sessionId } of chosen) {
    let caseId = caseIdOf(sessionId);
    for (let n = 2; taken.has(caseId); n++) caseId = `${caseIdOf(sessionId).slice(0, 120)}-${n}`;
    taken.add(caseId);
    try {
      cases.push(await recordCase(store, sessionId, caseId));
    } catch (error) {
      if (!EvalCaseError.isInstance(error)) throw error;
      problems.push(error);
    }
  }
  return { cases, problems };
}

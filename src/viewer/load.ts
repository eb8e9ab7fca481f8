import { runInFlight } from '../agent/protocol/actor-types.js';
import type { Outcome } from '../schemas.js';
import { decodeRow } from '../sessions/session-row.js';
import { readSessionTrace, type ReadTraceEntry } from '../sessions/trace.js';
import type { SessionStore, SessionSummary, StoredSession } from '../stores/session-store.js';
import { errorView, type ErrorView } from './failure.js';
import type { SessionView } from './page-model.js';
import { waitingIn } from './row-kinds.js';

export const describeOutcome = (outcome: Outcome): string =>
  outcome.type === 'Failed' ? `Failed (${outcome.error.type})` : outcome.type === 'Sealed' ? `Sealed: ${outcome.reason}` : outcome.type;

/** The driver's last stored IO state, from the trace's last step entry ('' when there is none). */
export const lastIo = (trace: readonly ReadTraceEntry[]): string => {
  for (let i = trace.length - 1; i >= 0; i--) {
    const record = trace[i]!;
    if ('entry' in record && record.entry.type === 'step') return record.entry.io;
  }
  return '';
};

/** Reads a session's validated trace after entry `afterSeq` (a viewer's `TraceCache`, or straight from the store). */
export type TraceReader = (sessionId: string, afterSeq?: number) => Promise<ReadTraceEntry[]>;

/**
 * Everything the session page shows, or undefined for a session that does not exist. A row
 * this build cannot read (corrupt, from a newer loopchart) is not a failure of the page: the
 * view carries its typed error, and the log and trace when they can be read. A store that fails
 * (its database, its driver) is shown as a reference only: `errorView` reports its error on the server.
 */
export async function loadSessionView(store: SessionStore, sessionId: string, readTrace: TraceReader = (id) => readSessionTrace(store, id)): Promise<SessionView | undefined> {
  let trace: ReadTraceEntry[] = [];
  let traceError: unknown;
  try {
    trace = await readTrace(sessionId);
  } catch (error) {
    traceError = error;
  }
  const summaries = await store.list();
  const head = await loadSessionHead(store, sessionId, lastIo(trace), summaries.find((s) => s.sessionId === sessionId));
  if (!head) return undefined;
  const children = summaries.map((s) => s.sessionId).filter((id) => id.startsWith(`${sessionId}/`));
  return { ...head, error: head.error ?? (traceError === undefined ? null : errorView(traceError, `reading the trace of session '${sessionId}'`)), trace, ...(children.length > 0 && { children }) };
}

/** A session page's head: the row's state and the log, without the trace. */
export type SessionHead = Omit<SessionView, 'trace'>;

/**
 * The session's row and log as the page shows them (`io` is the driver state from the trace),
 * or undefined for a session that does not exist; an unreadable row or log is its typed error.
 */
export async function loadSessionHead(store: SessionStore, sessionId: string, io: string, listed?: SessionSummary): Promise<SessionHead | undefined> {
  let stored;
  try {
    stored = await loadStored(store, sessionId, listed);
  } catch (error) {
    // A corrupt log or row: its typed error, shown on the page; a failing store: a reference to its error, reported here.
    return { sessionId, version: 0, messageCount: 0, updatedAt: null, error: errorView(error, `reading session '${sessionId}'`), state: null, messages: [] };
  }
  if (!stored) return undefined;
  const base = { sessionId, version: stored.version, messageCount: stored.messages.length, updatedAt: null, messages: stored.messages };
  try {
    return { ...base, error: null, state: { ...decodedState(store, sessionId, stored), io } };
  } catch (error) {
    return { ...base, error: errorView(error, `decoding session '${sessionId}'`), state: null };
  }
}

/** Sessions whose stored row and log are kept, per store (a 10,000-turn log is a large thing to hold). */
const STORED_KEPT = 4;
/** The last stored session read of each session, per store: keyed by session id (a Map), with the line of `list()` it matched. */
const storedKept = new WeakMap<SessionStore, Map<string, { summary: SessionSummary; stored: StoredSession }>>();
const sameSummary = (a: SessionSummary, b: SessionSummary) => a.version === b.version && a.messageCount === b.messageCount && a.updatedAt.getTime() === b.updatedAt.getTime();

/**
 * The session's row and log. A page load lists the store anyway (for the child sessions), and a
 * version is written once: when `listed` says the session is still at the version read last,
 * that read is used again. Reading and validating a 20,000-message log held the server's event
 * loop for a quarter second on every load of a session that had not changed.
 */
async function loadStored(store: SessionStore, sessionId: string, listed: SessionSummary | undefined): Promise<StoredSession | undefined> {
  let sessions = storedKept.get(store);
  if (!sessions) storedKept.set(store, (sessions = new Map()));
  const known = sessions.get(sessionId);
  if (listed && known && sameSummary(known.summary, listed) && known.stored.version === listed.version) return known.stored;
  const stored = await store.load(sessionId);
  sessions.delete(sessionId);
  if (stored && listed && stored.version === listed.version) sessions.set(sessionId, { summary: listed, stored });
  if (sessions.size > STORED_KEPT) sessions.delete(sessions.keys().next().value!);
  return stored;
}

type StateView = Omit<NonNullable<SessionView['state']>, 'io'>;
/** Sessions whose decoded state is kept, per store. */
const DECODED_KEPT = 64;
/** The last decoded state of each session, per store: keyed by session id (a Map), valid for one version. */
const decoded = new WeakMap<SessionStore, Map<string, { version: number; state: StateView }>>();

/**
 * The row's state as the page shows it. A stored version is written once and never changed, so
 * a row already decoded at this version is not decoded again: decoding validates the whole
 * conversation once more (20,000 messages on a long session), and a page load needs none of it.
 */
function decodedState(store: SessionStore, sessionId: string, stored: NonNullable<Awaited<ReturnType<SessionStore['load']>>>): StateView {
  let sessions = decoded.get(store);
  if (!sessions) decoded.set(store, (sessions = new Map()));
  const known = sessions.get(sessionId);
  if (known?.version === stored.version) return known.state;
  const state = stateView(decodeRow(sessionId, stored.state, stored.messages));
  sessions.delete(sessionId);
  sessions.set(sessionId, { version: stored.version, state });
  if (sessions.size > DECODED_KEPT) sessions.delete(sessions.keys().next().value!);
  return state;
}

function stateView(context: ReturnType<typeof decodeRow>): StateView {
  const brain = context.brain;
  const outcome = brain.context.outcome ?? context.lastRun?.outcome ?? null;
  const { operations } = context;
  return {
    brain: brain.value,
    inFlight: runInFlight(brain),
    runs: context.runIndex,
    turns: brain.context.turnsTaken,
    usage: context.sessionUsage,
    outcome: runInFlight(brain) ? null : outcome && describeOutcome(outcome),
    ...(context.agent && { agent: context.agent }),
    operations: {
      slices: operations.slices,
      point: operations.point && `${operations.point.hook} (${operations.point.next} done)`,
      waiting: operations.waiting && { operation: operations.waiting.operation, reason: operations.waiting.reason, payload: operations.waiting.payload },
    },
  };
}

/** One line of the home page. */
export interface SessionListing {
  sessionId: string;
  updatedAt: Date;
  runs: number | null;
  outcome: string;
  tokens: number | null;
  costUsd: number | null;
  error: ErrorView | null;
}

/**
 * The home page's list: each session's summary from its row, and its cost from the trace's
 * finished runs. A session whose row cannot be read is listed with its error (as `errorView` shows it).
 */
export async function listSessionViews(store: SessionStore): Promise<SessionListing[]> {
  const summaries: SessionSummary[] = await store.list();
  return Promise.all(
    summaries.map(async (summary): Promise<SessionListing> => {
      const listing = { sessionId: summary.sessionId, updatedAt: summary.updatedAt };
      try {
        const stored = await store.load(summary.sessionId);
        const context = decodeRow(summary.sessionId, stored!.state, stored!.messages);
        const trace = await readSessionTrace(store, summary.sessionId);
        let cost = 0;
        let priced = false;
        for (const record of trace) {
          if ('entry' in record && record.entry.type === 'finished' && record.entry.costUsd !== undefined) {
            cost += record.entry.costUsd;
            priced = true;
          }
        }
        const inFlight = runInFlight(context.brain);
        const last = trace.at(-1);
        const closed = last && 'entry' in last && last.entry.type === 'closed' ? `closed ${waitingIn(last.entry.io, last.entry.state)}` : null;
        const outcome = inFlight ? (closed ?? `in flight (${context.brain.value})`) : context.lastRun ? describeOutcome(context.lastRun.outcome) : 'no run yet';
        return {
          ...listing,
          runs: context.runIndex,
          outcome,
          tokens: context.sessionUsage.inputTokens + context.sessionUsage.outputTokens,
          costUsd: priced ? cost : null,
          error: null,
        };
      } catch (error) {
        return { ...listing, runs: null, outcome: 'unreadable', tokens: null, costUsd: null, error: errorView(error, `listing session '${summary.sessionId}'`) };
      }
    }),
  );
}

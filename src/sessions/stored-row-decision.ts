import type { AgentContext } from '../agent/core/context.js';
import { serviceKey } from '../agent/protocol/keys.js';
import { SessionBusyError, SessionNotFoundError } from '../stores/errors.js';
import type { SessionStore } from '../stores/session-store.js';
import { decodeRow, encodeRow } from './session-row.js';
import type { TraceEntry } from './trace.js';

/** What a person's decision does to a stored row: it is refused (traced, then thrown), or it writes the row. */
export type RowDecision = { refused: TraceEntry; error: Error } | { write: AgentContext; entry: TraceEntry };

/** Writes lost to another writer before this one gives up (each retry re-reads and re-checks). */
const MAX_ATTEMPTS = 8;

/**
 * Decides against a stored session from any process, without its agent: reads the row (with the
 * results journaled for a tool batch in flight, so a call that has one counts as run), lets
 * `decide` judge it, and writes the outcome with the row's version check. A writer that lost a
 * race reads again and decides again against what the row holds now. The approval and in-doubt
 * decisions (`decideStored`, `decideDoubtStored`) share it.
 */
export async function decideOnStoredRow(
  store: SessionStore,
  sessionId: string,
  decide: (context: AgentContext, decoded: AgentContext) => RowDecision,
): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    const stored = await store.load(sessionId);
    if (!stored) throw new SessionNotFoundError(sessionId);
    const decoded: AgentContext = decodeRow(sessionId, stored.state, stored.messages);
    const batch = decoded.brain.value === 'AwaitingTools' ? serviceKey(decoded, decoded.brain.context.turnsTaken, 'tools') : null;
    const context = batch ? { ...decoded, toolJournal: await store.journaledToolResults(sessionId, batch) } : decoded;
    const decision = decide(context, decoded);
    if ('refused' in decision) {
      await store.appendTrace?.(sessionId, [decision.refused]);
      throw decision.error;
    }
    try {
      await store.apply(sessionId, { expectedVersion: stored.version, state: encodeRow(decision.write), trace: [decision.entry] });
      return;
    } catch (error) {
      if (!SessionBusyError.isInstance(error) || attempt >= MAX_ATTEMPTS) throw error;
    }
  }
}

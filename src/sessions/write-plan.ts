import type { ToolMessage } from '../schemas.js';
import type { StepWrite } from '../stores/session-store.js';

/** A journal entry: a tool result (or an operation's effect) recorded under its batch or point key. */
export interface JournalWrite {
  kind: 'journal';
  turnKey: string;
  entry: ToolMessage;
}

/** What a durable session hands its store, in the order it decided it. */
export type QueuedWrite = { kind: 'step'; write: Omit<StepWrite, 'trace'> } | JournalWrite;

/**
 * A write to run: a journal entry on its own, or a step with the journal entries it made
 * unnecessary (`absorbed`), for the session to write on their own if the step is refused.
 */
export type PlannedWrite = { kind: 'step'; write: Omit<StepWrite, 'trace'>; absorbed: JournalWrite[] } | JournalWrite;

const clears = (write: Omit<StepWrite, 'trace'>, turnKey: string): boolean =>
  write.clearJournal === 'all' || (write.clearJournal?.includes(turnKey) ?? false);

/**
 * The writes to run for what was queued since the last drain, in the same order. A journal entry
 * queued right before a step that clears its key is not written: it is the result that ended
 * its batch, and that step holds it in its log and clears the key in one transaction (the entry
 * would be inserted and deleted in two). The result is durable exactly when the step is. Only
 * that one entry: results that arrived earlier are written on their own whether or not the
 * drain came before the batch ended, so what is written does not depend on timing.
 *
 * @example
 * ```ts
 * const result = { role: 'tool', toolCallId: 'c1', toolName: 'add', content: '3' } as const;
 * planWrites([
 *   { kind: 'journal', turnKey: 's:0:1:tools', entry: result },
 *   { kind: 'step', write: { expectedVersion: 4, state: {}, append: [result], clearJournal: ['s:0:1:tools'] } },
 * ]); // one step, the journal entry absorbed into it
 * ```
 */
export function planWrites(queued: readonly QueuedWrite[]): PlannedWrite[] {
  const planned: PlannedWrite[] = [];
  for (const write of queued) {
    if (write.kind === 'journal') {
      planned.push(write);
      continue;
    }
    const last = planned.at(-1);
    const absorbed = last?.kind === 'journal' && clears(write.write, last.turnKey) ? [last] : [];
    if (absorbed.length > 0) planned.pop();
    planned.push({ kind: 'step', write: write.write, absorbed });
  }
  return planned;
}

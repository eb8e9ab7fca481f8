import { z } from 'zod';
import type { SessionStore } from '../stores/session-store.js';

/**
 * Whether a tick taken over (its scheduler died, or gave it back) already sent its input: decided
 * from the tick's own evidence in the session, not from the session's run count, which anything
 * else that drives the session moves too (another schedule, a user). A tick records the run count
 * before its input (`tickBaseRun`), so its input starts run `tickBaseRun + 1`; the session's trace
 * records each run as it starts, with its prompt, in the same transaction as the step that stores
 * that input. So the input was sent exactly when the trace holds run `tickBaseRun + 1` started
 * with this input: a run another writer started there has another prompt (or is a later number).
 */

/** The trace entry a run's start writes (the fields read here; see `TraceEntrySchema`). */
const RunStartSchema = z.object({ type: z.literal('run'), run: z.number(), prompt: z.string() });

/**
 * True when run `baseRun + 1` of `sessionId` started with `input`. Every store that keeps
 * schedules keeps a trace; a store without one cannot tell, and the input is taken as not sent.
 */
export async function tickInputSent(store: SessionStore, sessionId: string, baseRun: number, input: string): Promise<boolean> {
  for (const { entry } of (await store.readTrace?.(sessionId)) ?? []) {
    const started = RunStartSchema.safeParse(entry);
    if (started.success && started.data.run === baseRun + 1) return started.data.prompt === input;
  }
  return false;
}

import { z } from 'zod';
import { StoreError } from '../stores/errors.js';

/**
 * A schedule as stored, beside the sessions: what it sends to which session and when, its
 * policies, where it is (next and last fire), and the lease of the scheduler firing it now.
 */

export const TimingSchema = z.discriminatedUnion('kind', [
  /** Once, at this instant (ms since epoch). */
  z.strictObject({ kind: z.literal('at'), at: z.number().int().nonnegative() }),
  /** Every `everyMs`, counted from `anchor` (the time it was made). */
  z.strictObject({ kind: z.literal('every'), everyMs: z.number().int().positive(), anchor: z.number().int().nonnegative() }),
  z.strictObject({ kind: z.literal('cron'), cron: z.string().min(1).max(200) }),
]);
export type Timing = z.infer<typeof TimingSchema>;

/** What the stored row holds, checked when read (a row another version wrote, or edited by hand, is refused). */
export const ScheduleRowSchema = z.strictObject({
  id: z.string().min(1).max(200),
  sessionId: z.string().min(1),
  agent: z.string().min(1).max(200),
  input: z.string().min(1),
  timing: TimingSchema,
  timezone: z.string().min(1).max(100),
  /** A tick found later than the scheduler's `missedAfterMs` (the processes were down): run it once, or skip to the next. */
  missed: z.enum(['run-once', 'skip']),
  /** A tick due while the schedule's last run still goes: skip it, or run it once that run ends. */
  overlap: z.enum(['skip', 'queue']),
  paused: z.boolean(),
  /** When it fires next; null once a one-off has fired (or a cron never matches again). */
  nextAt: z.number().int().nullable(),
  lastFiredAt: z.number().int().nullable(),
  /** How the last fired run ended (`Completed`, `Failed`, ..., `Skipped`, `Missed`), and its error if any. */
  lastOutcome: z.string().nullable(),
  lastError: z.string().nullable(),
  runs: z.number().int().nonnegative(),
  /** The tick in progress: its due time, and the session's run count before its input was sent (what tells a taken-over tick whether it was sent). */
  tickDue: z.number().int().nullable(),
  tickBaseRun: z.number().int().nullable(),
  leaseOwner: z.string().nullable(),
  leaseUntil: z.number().int().nullable(),
  createdAt: z.number().int(),
  updatedAt: z.number().int(),
});
export type ScheduleRow = z.infer<typeof ScheduleRowSchema>;

/**
 * A stored row read back, checked: a row another version wrote, or one edited by hand, is a
 * `StoreError` naming the store (`where`) and what is wrong, never a schedule half understood.
 */
export function decodeScheduleRow(text: string, where: string): ScheduleRow {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new StoreError(where, `a stored schedule is not JSON (${(error as Error).message})`, { cause: error });
  }
  const parsed = ScheduleRowSchema.safeParse(value);
  if (parsed.success) return parsed.data;
  const id = typeof (value as { id?: unknown } | null)?.id === 'string' ? `'${(value as { id: string }).id.slice(0, 200)}'` : '(no id)';
  throw new StoreError(where, `the stored schedule ${id} is not one this version reads: ${z.prettifyError(parsed.error)}`, { cause: parsed.error });
}

/** What a tick's holder writes when it ends the tick: where the schedule goes next. The lease is cleared. */
export interface TickEnd {
  nextAt: number | null;
  lastFiredAt: number | null;
  lastOutcome: string;
  lastError: string | null;
  /** Runs this tick added (0 when it was skipped). */
  ran: number;
}

/**
 * Where schedules live: one implementation per kind of session store, in the same database.
 * Every method is one transaction; the lease methods change a row only for the scheduler that
 * holds it (`owner`), so a scheduler whose lease expired cannot move a schedule another one took.
 */
export interface ScheduleBackend {
  /** False when a schedule with this id exists (nothing is written). */
  insert(row: ScheduleRow): Promise<boolean>;
  get(id: string): Promise<ScheduleRow | undefined>;
  list(): Promise<ScheduleRow[]>;
  setPaused(id: string, paused: boolean, nextAt: number | null, now: number): Promise<boolean>;
  delete(id: string): Promise<boolean>;
  /**
   * Takes the lease of up to `limit` schedules that are due (`nextAt <= now`), not paused, for one
   * of `agents`, and not leased (or whose lease has expired): each goes to one caller only.
   */
  claim(owner: string, now: number, leaseMs: number, agents: readonly string[], limit: number): Promise<ScheduleRow[]>;
  /** Extends the lease; false when it is no longer this owner's. */
  renew(id: string, owner: string, until: number): Promise<boolean>;
  /** Records the tick being fired and the session's run count before its input; false when the lease is lost. */
  startTick(id: string, owner: string, due: number, baseRun: number): Promise<boolean>;
  endTick(id: string, owner: string, end: TickEnd, now: number): Promise<boolean>;
  /**
   * Gives the lease back before the tick ends (a scheduler stopping): claimable at once, the tick
   * in progress kept, so the next claim takes it over as it would after a crash. False when the
   * lease is no longer this owner's.
   */
  release(id: string, owner: string, now: number): Promise<boolean>;
  /** Schedules for agents not among `agents` (what a scheduler reports at its start), read without decoding every row. */
  foreignAgents(agents: readonly string[]): Promise<{ id: string; agent: string }[]>;
  /** The earliest time something may be claimable for these agents: a due time, or a lease that ends. */
  nextWake(agents: readonly string[]): Promise<number | null>;
  close(): Promise<void>;
}

/** The row once its lease is given back mid-tick: the tick (`tickDue`, `tickBaseRun`) stays for the next holder. */
export const releasedLease = (row: ScheduleRow, now: number): ScheduleRow => ({ ...row, leaseOwner: null, leaseUntil: null, updatedAt: now });

/** The row once its tick ends: where it goes next, what the tick did, the lease given back. */
export function endedTick(row: ScheduleRow, end: TickEnd, now: number): ScheduleRow {
  return {
    ...row,
    nextAt: end.nextAt,
    lastFiredAt: end.lastFiredAt,
    lastOutcome: end.lastOutcome,
    lastError: end.lastError,
    runs: row.runs + end.ran,
    tickDue: null,
    tickBaseRun: null,
    leaseOwner: null,
    leaseUntil: null,
    updatedAt: now,
  };
}

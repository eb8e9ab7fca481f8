import { z } from 'zod';
import { ScopeSchema } from '../agent/protocol/scope.js';
import { StoreError } from '../stores/errors.js';

/**
 * A schedule as stored, beside the sessions: what it sends to which session and when, its
 * policies, where it is (next and last fire), and the lease of the scheduler firing it now.
 */

/** The last instant a `Date` can hold, in ms since epoch (+275760-09-13): past it `new Date(ms)` is an Invalid Date. */
export const MAX_DATE_MS = 8_640_000_000_000_000;

/** An instant a schedule keeps, in ms since epoch: from 1970 to the last one a `Date` holds, so every one reads back as a valid `Date`. */
export const InstantSchema = z.number().int().min(0).max(MAX_DATE_MS);

export const TimingSchema = z.discriminatedUnion('kind', [
  /** Once, at this instant (ms since epoch). */
  z.strictObject({ kind: z.literal('at'), at: InstantSchema }),
  /** Every `everyMs`, counted from `anchor` (the time it was made). */
  z.strictObject({ kind: z.literal('every'), everyMs: z.number().int().positive(), anchor: InstantSchema }),
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
  /**
   * The memory scope each tick opens the session with. Optional: a row stored before schedules
   * had one reads as a schedule without (its ticks open the session as they did). Checked as
   * every scope is: a hand-edited one with a lone surrogate would read another user's memory on PostgreSQL.
   */
  scope: ScopeSchema.optional(),
  /** When it fires next; null once a one-off has fired (or a cron never matches again). */
  nextAt: InstantSchema.nullable(),
  lastFiredAt: InstantSchema.nullable(),
  /** How the last fired run ended (`Completed`, `Failed`, ..., `Skipped`, `Missed`), and its error if any. */
  lastOutcome: z.string().nullable(),
  lastError: z.string().nullable(),
  runs: z.number().int().nonnegative(),
  /**
   * The tick in progress: its due time, and the session's run count before its input was sent.
   * The run its input starts is `tickBaseRun + 1`: a taken-over tick's input was sent when the
   * session's trace shows that run started with it (`tick-evidence.ts`), whoever else moved the count.
   */
  tickDue: InstantSchema.nullable(),
  tickBaseRun: z.number().int().nonnegative().nullable(),
  leaseOwner: z.string().nullable(),
  /** Until when the lease holds; once it is given back or lost, the time from which the row may be claimed (null when no tick is under way). */
  leaseUntil: InstantSchema.nullable(),
  createdAt: InstantSchema,
  updatedAt: InstantSchema,
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

/** Rows read back together: those this version reads, and a `StoreError` naming each one it does not. */
export interface RowsRead {
  rows: ScheduleRow[];
  unreadable: StoreError[];
}

/** Decodes each row on its own: one row another version wrote, or edited by hand, does not hide the others. */
export function decodeScheduleRows(texts: Iterable<string>, where: string): RowsRead {
  const read: RowsRead = { rows: [], unreadable: [] };
  for (const text of texts) {
    try {
      read.rows.push(decodeScheduleRow(text, where));
    } catch (error) {
      // decodeScheduleRow throws nothing but the StoreError naming the row.
      read.unreadable.push(error as StoreError);
    }
  }
  return read;
}

/**
 * What a claim and the idle loop need of a row, read leniently: a row this version does not
 * decode still tells, as far as its JSON goes, whose session it holds and when it is due, so it
 * neither hides a session another tick holds nor stops the other rows being read.
 */
const RowGistSchema = z.object({
  sessionId: ScheduleRowSchema.shape.sessionId.optional().catch(undefined),
  agent: ScheduleRowSchema.shape.agent.optional().catch(undefined),
  paused: ScheduleRowSchema.shape.paused.optional().catch(undefined),
  nextAt: ScheduleRowSchema.shape.nextAt.optional().catch(undefined),
  tickDue: ScheduleRowSchema.shape.tickDue.optional().catch(undefined),
  leaseUntil: ScheduleRowSchema.shape.leaseUntil.optional().catch(undefined),
});
export type RowGist = z.infer<typeof RowGistSchema>;

/** The gist of a stored row's text; undefined when the text is not a JSON object. */
export function gistOf(text: string): RowGist | undefined {
  try {
    const parsed = RowGistSchema.safeParse(JSON.parse(text));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
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

/** What a claim gives back. */
export interface Claim {
  /** The schedules now leased to the caller. */
  claimed: ScheduleRow[];
  /** Due rows this version does not read, each a `StoreError` naming it: passed over, the others claimed all the same. */
  unreadable: StoreError[];
  /** Due schedules passed over because a tick of another schedule holds their session (they are claimed once it ends). */
  waiting: number;
}

/**
 * Where schedules live: one implementation per kind of session store, in the same database.
 * Every method is one transaction; the lease methods change a row only for the scheduler that
 * holds it (`owner`), so a scheduler whose lease expired cannot move a schedule another one took.
 */
export interface ScheduleBackend {
  /** False when a schedule with this id exists (nothing is written). */
  insert(row: ScheduleRow): Promise<boolean>;
  /** The row, or undefined; a row this version does not read is a `StoreError` naming it. */
  get(id: string): Promise<ScheduleRow | undefined>;
  /** Every row, oldest first, each decoded on its own. */
  list(): Promise<RowsRead>;
  setPaused(id: string, paused: boolean, nextAt: number | null, now: number): Promise<boolean>;
  delete(id: string): Promise<boolean>;
  /**
   * Takes the lease of up to `limit` schedules that are due (`nextAt <= now`), not paused, for one
   * of `agents`, and not leased (or whose lease has expired): each goes to one caller only. Ticks
   * on one session take turns: a schedule whose session another schedule's tick holds is passed
   * over (`planClaim`), and so is a row this version does not read.
   */
  claim(owner: string, now: number, leaseMs: number, agents: readonly string[], limit: number): Promise<Claim>;
  /** Extends the lease; false when it is no longer this owner's. */
  renew(id: string, owner: string, until: number): Promise<boolean>;
  /** Records the tick being fired and the session's run count before its input; false when the lease is lost. */
  startTick(id: string, owner: string, due: number, baseRun: number): Promise<boolean>;
  endTick(id: string, owner: string, end: TickEnd, now: number): Promise<boolean>;
  /**
   * Gives the lease back before the tick ends (a scheduler stopping, a session another writer
   * moved): claimable from `at`, the tick in progress kept, so the next claim takes it over as it
   * would after a crash. False when the lease is no longer this owner's.
   */
  release(id: string, owner: string, now: number, at: number): Promise<boolean>;
  /** Schedules for agents not among `agents` (what a scheduler reports at its start), read without decoding every row. */
  foreignAgents(agents: readonly string[]): Promise<{ id: string; agent: string }[]>;
  /**
   * The earliest time after `now` something may be claimable for these agents: a due time, or a
   * lease that ends. What is claimable at `now` is the claim's to take or pass over: a due row it
   * passed over does not wake the loop again (it would wake it at once, for ever).
   */
  nextWake(agents: readonly string[], now: number): Promise<number | null>;
  close(): Promise<void>;
}

/** The row leased to `owner` until `now + leaseMs`. */
export const leasedRow = (row: ScheduleRow, owner: string, now: number, leaseMs: number): ScheduleRow => ({ ...row, leaseOwner: owner, leaseUntil: now + leaseMs, updatedAt: now });

/** The row once its lease is given back mid-tick, claimable from `at`: the tick (`tickDue`, `tickBaseRun`) stays for the next holder. */
export const releasedLease = (row: ScheduleRow, now: number, at: number): ScheduleRow => ({ ...row, leaseOwner: null, leaseUntil: at, updatedAt: now });

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

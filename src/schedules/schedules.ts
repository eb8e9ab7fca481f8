import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { ScopeSchema } from '../agent/protocol/scope.js';
import { isChildSessionId } from '../agent/subagents/subagents.js';
import { isMcpServerSessionId } from '../sessions/surface-ids.js';
import { parseOptions } from '../known-keys.js';
import { LoopchartError } from '../errors.js';
import { MemorySessionStore } from '../stores/memory.js';
import type { SessionStore } from '../stores/session-store.js';
import { SqliteSessionStore } from '../stores/sqlite.js';
import { sessionIdProblem } from '../stores/step.js';
import { nextCronTime, parseCron } from './cron.js';
import { MemoryScheduleBackend } from './memory-backend.js';
import { isPostgresTables } from '../stores/beside-sessions.js';
import { PostgresScheduleBackend } from './postgres-backend.js';
import type { StoreError } from '../stores/errors.js';
import { InstantSchema, MAX_DATE_MS, TimingSchema, type ScheduleBackend, type ScheduleRow, type Timing } from './row.js';
import { SqliteScheduleBackend } from './sqlite-backend.js';
import { checkTimeZone } from './time-zone.js';

/**
 * A schedule that cannot be made as asked: no timing or two, a session id the store refuses, an
 * interval under a second, a cron that never matches, an id that exists, a store that cannot hold
 * schedules.
 *
 * @example
 * ```ts
 * import { InvalidScheduleError, schedule } from 'loopchart/schedules';
 * try {
 *   await schedule(store, { session: 's', agent: 'a', input: 'Go.', every: 10 });
 * } catch (error) {
 *   if (InvalidScheduleError.isInstance(error)) console.error(error.message);
 * }
 * ```
 */
export class InvalidScheduleError extends LoopchartError {
  constructor(problem: string) {
    super('InvalidSchedule', `invalid schedule: ${problem}`);
  }
}

/**
 * No schedule has this id (it was deleted, or never made).
 *
 * @example
 * ```ts
 * import { pauseSchedule, ScheduleNotFoundError } from 'loopchart/schedules';
 * try {
 *   await pauseSchedule(store, 'nightly');
 * } catch (error) {
 *   if (ScheduleNotFoundError.isInstance(error)) console.error(error.message);
 * }
 * ```
 */
export class ScheduleNotFoundError extends LoopchartError {
  readonly scheduleId: string;
  constructor(scheduleId: string) {
    super('ScheduleNotFound', `no schedule '${scheduleId.slice(0, 200)}'`);
    this.scheduleId = scheduleId;
  }
}

/** The shortest interval of an `every` schedule. */
const MIN_EVERY_MS = 1_000;
const MAX_INPUT_CHARS = 100_000;

/** A schedule's options before the one-timing check (`loopchart/restate`'s schedules take them too, without the agent). */
export const ScheduleFieldsSchema = z.strictObject({
  /** The schedule's id; default a random UUID. */
  id: z.string().min(1).max(200).optional(),
  /** The session each tick starts or continues (created by the first tick). */
  session: z.string(),
  /** The agent's name among those `startScheduler` is given. */
  agent: z.string().min(1).max(200),
  /** The message each tick sends. */
  input: z.string().min(1).max(MAX_INPUT_CHARS),
  /**
   * Once, at this time (a Date, ms since epoch, or an ISO 8601 text with its offset), from 1970 to
   * the last instant a Date holds (ms 8.64e15, +275760-09-13): kept as ms since epoch, each form
   * checked as that number, so none is stored that reads back as an Invalid Date.
   */
  at: z
    .union([z.date(), z.number().int(), z.iso.datetime({ offset: true })])
    .refine((at) => InstantSchema.safeParse(new Date(at).getTime()).success, { error: `must be an instant from 1970-01-01T00:00:00Z to +275760-09-13T00:00:00Z (ms 0 to ${MAX_DATE_MS}), the range a Date holds` })
    .optional(),
  /** Every this many ms (at least 1000), from now. */
  every: z.number().int().min(MIN_EVERY_MS).max(366 * 86_400_000).optional(),
  /** A five-field cron expression, read on the wall clock of `timezone`. */
  cron: z.string().optional(),
  /** IANA time zone of `cron` (default UTC). */
  timezone: z.string().optional(),
  /** A tick the scheduler finds late (its processes were down): `run-once` (default) or `skip`. */
  missed: z.enum(['run-once', 'skip']).default('run-once'),
  /** A tick due while the last run still goes: `skip` it (default) or `queue` it (run once that run ends). */
  overlap: z.enum(['skip', 'queue']).default('skip'),
  /** Made paused (default false). */
  paused: z.boolean().default(false),
  /**
   * The memory scope each tick's session is opened with (`DurableSession.open({ scope })`): whose
   * memory the scheduled runs read and write. Checked as every scope is (`ScopeSchema`). Left out,
   * a new session has no memory and a stored one keeps its own.
   */
  scope: ScopeSchema.optional(),
});

/** Exactly one of `at`, `every`, `cron`: the refinement every schedule's options get. */
export const exactlyOneTiming = [
  (options: { at?: unknown; every?: unknown; cron?: unknown }) => [options.at, options.every, options.cron].filter((timing) => timing !== undefined).length === 1,
  { error: 'give exactly one of at, every or cron' },
] as const;

const ScheduleOptionsSchema = ScheduleFieldsSchema.refine(...exactlyOneTiming);

/**
 * What `schedule` takes: the session, the agent and the input of each tick, exactly one of `at`,
 * `every` or `cron` (with `timezone`), and the missed-tick and overlap policies.
 *
 * @example
 * ```ts
 * import type { ScheduleOptions } from 'loopchart/schedules';
 *
 * const nightly: ScheduleOptions = { session: 'report', agent: 'reporter', input: 'Write the nightly report.', cron: '0 2 * * *', timezone: 'Europe/Paris' };
 * ```
 */
export type ScheduleOptions = z.input<typeof ScheduleOptionsSchema>;

/**
 * A schedule as `listSchedules` shows it: what it does, when it fires next, how its last tick went.
 *
 * @example
 * ```ts
 * import { listSchedules, type ScheduleInfo } from 'loopchart/schedules';
 *
 * const all: ScheduleInfo[] = await listSchedules(store);
 * for (const s of all) console.log(s.id, s.nextAt?.toISOString() ?? 'done', s.lastOutcome);
 * ```
 */
export type ScheduleInfo = z.infer<typeof ScheduleInfoSchema>;

/**
 * A schedule as a list shows it, checked where a list comes from elsewhere (a `ScheduleSource`
 * the viewer is given).
 *
 * @example
 * ```ts
 * import { ScheduleInfoSchema } from 'loopchart/schedules';
 * const readable = ScheduleInfoSchema.array().safeParse(JSON.parse('[]')).success; // true
 * ```
 */
export const ScheduleInfoSchema = z.object({
  id: z.string(),
  session: z.string(),
  agent: z.string(),
  input: z.string(),
  timing: TimingSchema,
  timezone: z.string(),
  missed: z.enum(['run-once', 'skip']),
  overlap: z.enum(['skip', 'queue']),
  paused: z.boolean(),
  /** The memory scope its ticks open the session with, if it has one. */
  scope: z.string().optional(),
  /** null once a one-off has fired. */
  nextAt: z.date().nullable(),
  lastFiredAt: z.date().nullable(),
  /** How the last tick's run ended (`Completed`, `Failed`, `Cancelled`...), `Waiting` (for someone: `lastError` says what for), or `Skipped` / `Missed`. */
  lastOutcome: z.string().nullable(),
  lastError: z.string().nullable(),
  /** Runs its ticks started. */
  runs: z.number().int().nonnegative(),
  /** The scheduler firing it now, if one is. */
  firingBy: z.string().nullable(),
});

/**
 * Anything that lists schedules: the viewer's `schedules` option. The viewer lists the store's by
 * default; a `restateScheduleClient` lists those kept by Restate. `label` says where they are
 * (the page's title).
 *
 * @example
 * ```ts
 * import type { ScheduleSource } from 'loopchart/schedules';
 * const none: ScheduleSource = { label: 'nowhere', list: async () => [] };
 * ```
 */
export interface ScheduleSource {
  list(): Promise<ScheduleInfo[]>;
  readonly label?: string | undefined;
}

/** The next time `timing` fires after `after`, or null when it will not. */
export function nextAfter(timing: Timing, timeZone: string, after: number): number | null {
  switch (timing.kind) {
    case 'at':
      return timing.at > after ? timing.at : null;
    case 'every':
      return after < timing.anchor ? timing.anchor : timing.anchor + (Math.floor((after - timing.anchor) / timing.everyMs) + 1) * timing.everyMs;
    case 'cron':
      return nextCronTime(parseCron(timing.cron), after, timeZone);
  }
}

/**
 * Where a store's schedules live: a `MemorySessionStore`'s backing, a table in a
 * `SqliteSessionStore`'s file, or a table in a `PostgresSessionStore`'s schema. The caller closes it.
 */
export function scheduleBackend(store: SessionStore): ScheduleBackend {
  const kinds = 'schedules are kept in a MemorySessionStore, a SqliteSessionStore or a PostgresSessionStore';
  // null or undefined threw a raw TypeError from the hook's lookup below.
  if (typeof store !== 'object' || store === null) throw new InvalidScheduleError(kinds);
  if (store instanceof MemorySessionStore) return new MemoryScheduleBackend(store.backing);
  if (store instanceof SqliteSessionStore) {
    if (store.path === ':memory:') throw new InvalidScheduleError('an in-memory SQLite store (:memory:) cannot be shared with a scheduler: use a file');
    return new SqliteScheduleBackend(store.path);
  }
  // Told by its hook, not by its class: importing PostgresSessionStore here would load pg for every store.
  if (isPostgresTables(store)) return new PostgresScheduleBackend(store);
  throw new InvalidScheduleError(kinds);
}

async function withBackend<T>(store: SessionStore, work: (backend: ScheduleBackend) => Promise<T>): Promise<T> {
  const backend = scheduleBackend(store);
  try {
    return await work(backend);
  } finally {
    await backend.close();
  }
}

export function infoOf(row: ScheduleRow): ScheduleInfo {
  const date = (ms: number | null) => (ms === null ? null : new Date(ms));
  return {
    id: row.id,
    session: row.sessionId,
    agent: row.agent,
    input: row.input,
    timing: row.timing,
    timezone: row.timezone,
    missed: row.missed,
    overlap: row.overlap,
    paused: row.paused,
    ...(row.scope !== undefined && { scope: row.scope }),
    nextAt: date(row.nextAt),
    lastFiredAt: date(row.lastFiredAt),
    lastOutcome: row.lastOutcome,
    lastError: row.lastError,
    runs: row.runs,
    firingBy: row.leaseOwner,
  };
}

/**
 * Stores a schedule beside the sessions of `store` (a `MemorySessionStore`, `SqliteSessionStore` or
 * `PostgresSessionStore`):
 * each tick starts or continues the session `session` with `input`, run by the agent named
 * `agent` in a scheduler (`startScheduler`) on the same store. Checked here: a cron expression
 * that does not parse is an `InvalidCronError`, a time zone `Intl` does not know an
 * `UnknownTimeZoneError`, anything else wrong an `InvalidScheduleError`; nothing is stored then.
 *
 * @example
 * ```ts
 * import { schedule } from 'loopchart/schedules';
 *
 * const nightly = await schedule(store, {
 *   id: 'nightly-report',
 *   session: 'reports',
 *   agent: 'reporter',
 *   input: 'Write the nightly report.',
 *   cron: '0 2 * * *',
 *   timezone: 'Europe/Paris',
 *   missed: 'run-once',
 * });
 * console.log(nightly.nextAt?.toISOString());
 * ```
 */
export async function schedule(store: SessionStore, options: ScheduleOptions): Promise<ScheduleInfo> {
  // Strict: an unknown key names the closest known one.
  const given = parseOptions(ScheduleOptionsSchema, options, '', (message) => new InvalidScheduleError(message));
  const row = newScheduleRow(given, given.id ?? randomUUID(), Date.now());
  await withBackend(store, async (backend) => {
    if (!(await backend.insert(row))) throw new InvalidScheduleError(`a schedule '${row.id}' exists (delete it first, or give another id)`);
  });
  return infoOf(row);
}

/**
 * Refuses an id or agent name that cannot be a key, by the session ids' rule (no control or bidi
 * character, no lone surrogate): a lone surrogate becomes U+FFFD on its way to PostgreSQL's text,
 * so `nightly\ud800` would be stored as, and pause or delete, the schedule `nightly\ufffd`.
 */
function checkScheduleKey(name: 'id' | 'agent', value: string): void {
  const problem = sessionIdProblem(value);
  if (problem) throw new InvalidScheduleError(`${name}: ${problem}`);
}

/**
 * Why `session` is another surface's session, or null. A subagent's own session is made and
 * driven by its parent's tool call (its id is the parent's, `/`, and the call: `childSessionId`):
 * a tick would run the schedule's agent inside it, a turn its parent never asked for, as the chat
 * handler and the MCP server refuse to. The MCP server's (`mcp/...`) are a served tool's
 * conversations with its callers. Any other id with a `/` is a session of its own.
 */
export function otherSurfaceProblem(session: string): string | null {
  if (isChildSessionId(session)) return "it is a subagent's session, driven by its parent's tool call: schedule the parent's session";
  if (isMcpServerSessionId(session)) return "it is in the MCP server's namespace (mcp/), a served tool's session with one of its callers";
  return null;
}

/**
 * Refuses an id given to find a schedule (pause, resume, delete) that could name another one: a
 * lone surrogate (see `checkScheduleKey`). Other ids no new schedule may have are looked up as
 * they are, so a row an earlier version stored under one can still be paused or deleted.
 */
function checkScheduleLookup(id: string): void {
  const surrogate = typeof id === 'string' ? /\p{Cs}/u.exec(id) : null;
  if (surrogate) throw new InvalidScheduleError(`id: it holds a lone surrogate at index ${surrogate.index} (not well-formed Unicode), which would name another schedule`);
}

/**
 * The row of a new schedule made at `now` from its checked options: its session id, time zone and
 * cron checked (typed errors), its timing and first due time computed. Shared with the Restate
 * schedule object, which makes it at its journaled `now`.
 */
export function newScheduleRow(given: z.output<typeof ScheduleFieldsSchema>, id: string, now: number): ScheduleRow {
  const sessionProblem = sessionIdProblem(given.session) ?? otherSurfaceProblem(given.session);
  if (sessionProblem) throw new InvalidScheduleError(`session: ${sessionProblem}`);
  checkScheduleKey('id', id);
  checkScheduleKey('agent', given.agent);
  if (given.timezone !== undefined && given.cron === undefined) throw new InvalidScheduleError('timezone goes with cron (at and every are instants, in no zone)');
  const timezone = checkTimeZone(given.timezone ?? 'UTC');
  let timing: Timing;
  if (given.cron !== undefined) {
    parseCron(given.cron);
    timing = { kind: 'cron', cron: given.cron.trim() };
  } else if (given.every !== undefined) {
    timing = { kind: 'every', everyMs: given.every, anchor: now };
  } else {
    timing = { kind: 'at', at: new Date(given.at!).getTime() };
  }
  // A one-off in the past fires at once; the others fire from the next time after now.
  const nextAt = timing.kind === 'at' ? timing.at : nextAfter(timing, timezone, now);
  if (nextAt === null) throw new InvalidScheduleError(`the cron expression '${given.cron}' never matches a date`);
  return {
    id,
    sessionId: given.session,
    agent: given.agent,
    input: given.input,
    timing,
    timezone,
    missed: given.missed,
    overlap: given.overlap,
    paused: given.paused,
    ...(given.scope !== undefined && { scope: given.scope }),
    nextAt,
    lastFiredAt: null,
    lastOutcome: null,
    lastError: null,
    runs: 0,
    tickDue: null,
    tickBaseRun: null,
    leaseOwner: null,
    leaseUntil: null,
    createdAt: now,
    updatedAt: now,
  };
}

const ListOptionsSchema = z.strictObject({
  /**
   * Told of each stored schedule this version does not read (another version wrote it, or it was
   * edited by hand): a `StoreError` naming it. Default: a process warning (`process.emitWarning`),
   * on one line with its control characters escaped.
   */
  onUnreadable: z.custom<(error: StoreError) => void>((value) => typeof value === 'function', { error: 'onUnreadable must be a function' }).optional(),
});

/**
 * What `listSchedules` takes.
 *
 * @example
 * ```ts
 * import type { ListSchedulesOptions } from 'loopchart/schedules';
 *
 * const options: ListSchedulesOptions = { onUnreadable: (error) => console.error(error.message) };
 * ```
 */
export type ListSchedulesOptions = z.input<typeof ListOptionsSchema>;

/**
 * The default report of an unreadable row: a process warning on one line, its control characters
 * escaped (`\u001b`), since the message quotes the stored row's id and the warning goes to a terminal.
 */
export function warnEscaped(error: StoreError): void {
  const escaped = error.message.replace(/[\u0000-\u001f\u007f-\u009f]/g, (char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`);
  process.emitWarning(escaped, { type: 'StoreError', code: error.code });
}

/**
 * Every schedule of the store, oldest first, with its next and last runs. A stored schedule this
 * version does not read is left out of the list and reported (`onUnreadable`, by default a
 * process warning), so one bad row does not hide the others; `deleteSchedule` removes it.
 *
 * @example
 * ```ts
 * import { listSchedules } from 'loopchart/schedules';
 *
 * const all = await listSchedules(store, { onUnreadable: (error) => console.error(error.message) });
 * for (const s of all) console.log(`${s.id}: next ${s.nextAt?.toISOString() ?? '-'}, last ${s.lastOutcome ?? '-'}`);
 * ```
 */
export async function listSchedules(store: SessionStore, options: ListSchedulesOptions = {}): Promise<ScheduleInfo[]> {
  const { onUnreadable = warnEscaped } = parseOptions(ListOptionsSchema, options, 'listSchedules', (message) => new InvalidScheduleError(message));
  const { rows, unreadable } = await withBackend(store, (backend) => backend.list());
  for (const error of unreadable) onUnreadable(error);
  return rows.map(infoOf);
}

/**
 * Stops a schedule firing (a tick in flight goes on to its end) until `resumeSchedule`.
 * `ScheduleNotFoundError` when there is none with this id.
 *
 * @example
 * ```ts
 * import { pauseSchedule, resumeSchedule } from 'loopchart/schedules';
 *
 * await pauseSchedule(store, 'nightly-report');
 * await resumeSchedule(store, 'nightly-report'); // fires next at the next time after now
 * ```
 */
export function pauseSchedule(store: SessionStore, id: string): Promise<ScheduleInfo> {
  return setPaused(store, id, true);
}

/**
 * Lets a paused schedule fire again, from the next time after now (ticks it would have fired
 * while paused are not made up; a one-off whose time passed fires at once).
 *
 * @example
 * ```ts
 * import { resumeSchedule } from 'loopchart/schedules';
 *
 * const resumed = await resumeSchedule(store, 'nightly-report');
 * console.log(resumed.nextAt);
 * ```
 */
export function resumeSchedule(store: SessionStore, id: string): Promise<ScheduleInfo> {
  return setPaused(store, id, false);
}

/** Where a schedule paused or resumed at `now` fires next: a resumed every/cron from the next time after now, a one-off where it was. */
export function nextAtOnPause(row: ScheduleRow, paused: boolean, now: number): number | null {
  return paused || row.nextAt === null || row.timing.kind === 'at' ? row.nextAt : nextAfter(row.timing, row.timezone, now);
}

async function setPaused(store: SessionStore, id: string, paused: boolean): Promise<ScheduleInfo> {
  checkScheduleLookup(id);
  return withBackend(store, async (backend) => {
    const row = await backend.get(id);
    if (!row) throw new ScheduleNotFoundError(id);
    const now = Date.now();
    const nextAt = nextAtOnPause(row, paused, now);
    if (!(await backend.setPaused(id, paused, nextAt, now))) throw new ScheduleNotFoundError(id);
    return infoOf((await backend.get(id)) ?? row);
  });
}

/**
 * Deletes a schedule (its session stays). A tick in flight goes on to its end.
 * `ScheduleNotFoundError` when there is none with this id.
 *
 * @example
 * ```ts
 * import { deleteSchedule } from 'loopchart/schedules';
 *
 * await deleteSchedule(store, 'nightly-report');
 * ```
 */
export async function deleteSchedule(store: SessionStore, id: string): Promise<void> {
  checkScheduleLookup(id);
  return withBackend(store, async (backend) => {
    if (!(await backend.delete(id))) throw new ScheduleNotFoundError(id);
  });
}

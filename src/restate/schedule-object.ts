import * as restate from '@restatedev/restate-sdk';
import { z } from 'zod';
import { LoopchartError } from '../errors.js';
import { parseOptions } from '../known-keys.js';
import { ScheduleRowSchema, type ScheduleRow } from '../schedules/row.js';
import { InvalidScheduleError, exactlyOneTiming, newScheduleRow, nextAfter, nextAtOnPause, otherSurfaceProblem } from '../schedules/schedules.js';
import { SessionScopeError } from '../sessions/durable-session.js';
import { sessionIdProblem } from '../stores/step.js';
import type { restateSession } from './session-object.js';
import { ObjectNameSchema } from './ingress-url.js';
import { REGISTRY_KEY, RestateScheduleFieldsSchema, type RegistryList } from './schedule-fields.js';

/**
 * Schedules on Restate: a virtual object per schedule (keyed by its id) holding the schedule's row
 * in its K/V, and a tick as a delayed call to itself (`fire`), which sends the input to the session
 * object as a client's `send` does. The Restate server keeps the delayed call durably: no
 * scheduler process, no lease; a worker that dies before the due time leaves the call pending
 * until a worker takes it, and the journal of `fire` makes its send happen once.
 */

export interface RestateSchedulesOptions {
  /** The session object's name the ticks send to (default `loopchartSession`, `restateSession`'s default). */
  session?: string | undefined;
  /**
   * The schedule object's name (default `loopchartSchedule`); its registry is `<name>Registry`.
   * Both are names Restate registers (a letter, or `_` and a letter or digit, then letters,
   * digits, `.`, `_` or `-`; none starting `restate`, nor `openapi`): another is an `InvalidScheduleError`.
   */
  name?: string | undefined;
}

const ROW = 'schedule';

const CreatePayload = RestateScheduleFieldsSchema.refine(...exactlyOneTiming);
const FirePayload = z.strictObject({ due: z.number().int() });

/** A problem with what a client sent: terminal (Restate does not retry it), its code first so a client can tell it. */
function refused(error: unknown): never {
  if (LoopchartError.isInstance(error)) throw new restate.TerminalError(`${error.code}: ${error.message}`, { errorCode: error.code === 'ScheduleNotFound' ? 404 : 400 });
  throw error;
}

const notFound = (id: string) => new restate.TerminalError(`ScheduleNotFound: no schedule '${id.slice(0, 200)}'`, { errorCode: 404 });

async function loadRow(ctx: restate.ObjectSharedContext): Promise<ScheduleRow | undefined> {
  const value = await ctx.get<unknown>(ROW);
  if (value === null) return undefined;
  const parsed = ScheduleRowSchema.safeParse(value);
  // A row another version wrote: terminal, never a schedule half understood.
  if (!parsed.success) throw new restate.TerminalError(`schedule '${ctx.key}': the stored row is not one this version reads: ${z.prettifyError(parsed.error)}`, { errorCode: 500 });
  return parsed.data;
}

/**
 * The schedule objects to bind beside the session object: `schedule` (one per schedule id) and
 * `registry` (one key, the ids, for listing). Handlers of `schedule` (call them through
 * `restateScheduleClient`, or the ingress: `POST /<name>/<id>/<handler>`):
 * - `create(options)`: stores the schedule and sends itself a delayed `fire` for its first due time.
 * - `fire({ due })`: the tick. Does nothing unless the schedule exists, is not paused and is due
 *   at `due` (so a duplicate call, or one left pending by a pause or a delete, is a no-op); else
 *   sends the input to the session object (`send`, one-way, with the schedule's scope), or does
 *   not, by `startScheduler`'s rules for the same row: `Failed` for another surface's session or a
 *   session stored under another scope, `Skipped` when the session's `state` says its run waits
 *   for someone (either overlap) or, with `overlap: 'skip'`, that a run is in flight; then sends
 *   the next delayed `fire` (`every`, `cron`). A tick delivered late runs once, and the next is
 *   counted from now.
 * - `pause()`, `resume()` (from the next time after now), `delete()`, `get()` (shared).
 *
 * @example
 * ```ts
 * import * as restate from '@restatedev/restate-sdk';
 * import { createAgentMachine } from 'loopchart';
 * import { restateSchedules, restateSession } from 'loopchart/restate';
 * import { scriptedModel } from 'loopchart/testing';
 *
 * const { session, channel } = restateSession({ machine: createAgentMachine({ model: scriptedModel([{ text: 'Report written.' }]) }) });
 * const { schedule, registry } = restateSchedules();
 * await restate.endpoint().bind(session).bind(channel).bind(schedule).bind(registry).listen(9080);
 * ```
 */
export function restateSchedules(options: RestateSchedulesOptions = {}) {
  const given = parseOptions(z.strictObject({ session: ObjectNameSchema.optional(), name: ObjectNameSchema.optional() }), options, 'restateSchedules', (message) => new InvalidScheduleError(message));
  const name = given.name ?? 'loopchartSchedule';
  const sessionName = given.session ?? 'loopchartSession';
  const registryName = `${name}Registry`;
  const sessionApi = { name: sessionName } as ReturnType<typeof restateSession>['session'];
  const json = restate.serde.json;

  /** The next tick: a delayed call to this object's `fire`, journaled (a retry does not send it twice). */
  const arm = (ctx: restate.ObjectContext, due: number, now: number) => {
    ctx.genericSend({ service: name, method: 'fire', key: ctx.key, parameter: { due }, inputSerde: json, delay: Math.max(0, due - now) });
  };
  const register = (ctx: restate.ObjectContext, method: 'add' | 'remove', parameter: { id: string; createdAt?: number | undefined }) =>
    // Awaited: the registry changes before the call returns, in the order the schedule changed.
    ctx.genericCall({ service: registryName, method, key: REGISTRY_KEY, parameter, inputSerde: json, outputSerde: json });

  const setPaused = (paused: boolean) =>
    restate.handlers.object.exclusive(async (ctx: restate.ObjectContext): Promise<ScheduleRow> => {
      const row = await loadRow(ctx);
      if (!row) throw notFound(ctx.key);
      if (row.paused === paused) return row;
      const now = await ctx.date.now();
      const next: ScheduleRow = { ...row, paused, nextAt: nextAtOnPause(row, paused, now), updatedAt: now };
      ctx.set(ROW, next);
      // Resumed: a fresh tick. The call a pause left pending still arrives, and finds itself stale
      // unless it is due at the same time, when the first of the two fires and the second is stale.
      if (!paused && next.nextAt !== null) arm(ctx, next.nextAt, now);
      return next;
    });

  const schedule = restate.object({
    name,
    description: 'A loopchart schedule: ticks as delayed calls that send input to a session object (see loopchart/restate).',
    handlers: {
      create: async (ctx: restate.ObjectContext, payload: unknown): Promise<ScheduleRow> => {
        const options = (() => {
          try {
            return parseOptions(CreatePayload, payload, '', (message) => new InvalidScheduleError(message));
          } catch (error) {
            return refused(error);
          }
        })();
        if (await loadRow(ctx)) throw new restate.TerminalError(`InvalidSchedule: invalid schedule: a schedule '${ctx.key.slice(0, 200)}' exists (delete it first, or give another id)`, { errorCode: 409 });
        const now = await ctx.date.now();
        let row: ScheduleRow;
        try {
          row = newScheduleRow({ ...options, agent: sessionName, missed: 'run-once' }, ctx.key, now);
        } catch (error) {
          refused(error);
        }
        ctx.set(ROW, row);
        await register(ctx, 'add', { id: ctx.key, createdAt: now });
        if (!row.paused && row.nextAt !== null) arm(ctx, row.nextAt, now);
        return row;
      },
      fire: async (ctx: restate.ObjectContext, payload: unknown): Promise<{ fired: boolean }> => {
        const parsed = FirePayload.safeParse(payload);
        if (!parsed.success) throw new restate.TerminalError(`fire: invalid payload: ${z.prettifyError(parsed.error)}`, { errorCode: 400 });
        const { due } = parsed.data;
        const row = await loadRow(ctx);
        // Deleted, paused, or not the tick this call was sent for (a duplicate, or left by a pause).
        if (!row || row.paused || row.nextAt !== due) return { fired: false };
        const now = await ctx.date.now();
        const nextAt = nextAfter(row.timing, row.timezone, Math.max(due, now));
        /** The tick ends: sent, or not (Skipped, Failed, with why), and the next one armed. */
        const end = (lastOutcome: 'Sent' | 'Skipped' | 'Failed', lastError: string | null): { fired: boolean } => {
          const sent = lastOutcome === 'Sent';
          ctx.set(ROW, { ...row, nextAt, lastFiredAt: sent ? now : row.lastFiredAt, lastOutcome, lastError, runs: row.runs + (sent ? 1 : 0), updatedAt: now } satisfies ScheduleRow);
          if (nextAt !== null) arm(ctx, nextAt, now);
          return { fired: sent };
        };
        // As startScheduler: a row stored before create refused another surface's session (or
        // edited by hand) is not fired, so this agent never runs inside a subagent's or a served
        // tool's conversation.
        const foreign = sessionIdProblem(row.sessionId) ?? otherSurfaceProblem(row.sessionId);
        if (foreign) return end('Failed', new InvalidScheduleError(`session: ${foreign}`).message);
        const state = await ctx.objectClient(sessionApi, row.sessionId).state();
        // A session stored under another scope, or without one, is not this schedule's to continue
        // (the session object would refuse the send, unseen by a one-way call): failed here, naming
        // no scope. A session is stored from its first run's input on: one with no message is new.
        const stored = state.messageCount > 0 || state.state !== 'Start';
        if (row.scope !== undefined && stored && state.scope !== row.scope) {
          return end('Failed', `the session could not be opened: ${new SessionScopeError(row.sessionId).message}`);
        }
        // A run that waits for someone ends only when they answer: its tick is skipped with either
        // overlap, its input not queued behind a question no one here answers.
        // A session object of a version before `waits` answers without it: no wait it can tell.
        if (typeof state.waits === 'string') return end('Skipped', state.waits);
        if (row.overlap === 'skip' && state.running) return end('Skipped', 'the last run was still going');
        // overlap 'queue': Restate queues the send behind the run in flight (one run per tick).
        ctx.objectSendClient(sessionApi, row.sessionId).send({ message: row.input, ...(row.scope !== undefined && { scope: row.scope }) });
        return end('Sent', null);
      },
      pause: setPaused(true),
      resume: setPaused(false),
      delete: async (ctx: restate.ObjectContext): Promise<void> => {
        // Not decoded, as deleteSchedule does not: a row this version does not read can be removed.
        if ((await ctx.get<unknown>(ROW)) === null) throw notFound(ctx.key);
        // The pending `fire` finds no schedule and does nothing.
        ctx.clearAll();
        await register(ctx, 'remove', { id: ctx.key });
      },
      get: restate.handlers.object.shared(async (ctx: restate.ObjectSharedContext): Promise<ScheduleRow | null> => (await loadRow(ctx)) ?? null),
    },
  });

  return { schedule, registry: scheduleRegistry(name, registryName) };
}

const RegistryEntry = z.strictObject({ id: z.string().min(1), createdAt: z.number().int().optional() });

/**
 * The registry of a schedule object's ids, for `list`: the ingress cannot list an object's keys.
 * Its `add` and `remove` are called by the schedule object, but are reachable from the ingress
 * like any handler: checked, terminal when wrong.
 */
function scheduleRegistry(name: string, registryName: string) {
  const json = restate.serde.json;
  const entry = (payload: unknown) => {
    const parsed = RegistryEntry.safeParse(payload);
    if (!parsed.success) throw new restate.TerminalError(`registry: invalid payload: ${z.prettifyError(parsed.error)}`, { errorCode: 400 });
    return parsed.data;
  };
  return restate.object({
    name: registryName,
    description: 'The ids of the loopchart schedules, for listing them (see loopchart/restate).',
    handlers: {
      add: async (ctx: restate.ObjectContext, payload: unknown): Promise<void> => {
        const { id, createdAt } = entry(payload);
        ctx.set(`id:${id}`, createdAt ?? 0);
      },
      remove: async (ctx: restate.ObjectContext, payload: unknown): Promise<void> => {
        ctx.clear(`id:${entry(payload).id}`);
      },
      /**
       * Every schedule, oldest first: each read from its own object (shared handlers, no lock
       * taken), each on its own: a row this version does not read (its `get` refuses it) is named
       * in `unreadable`, and the others are listed all the same.
       */
      list: restate.handlers.object.shared(async (ctx: restate.ObjectSharedContext): Promise<RegistryList> => {
        const ids = (await ctx.stateKeys()).filter((key) => key.startsWith('id:')).map((key) => key.slice('id:'.length));
        const read = await restate.RestatePromise.allSettled(
          ids.map((id) => ctx.genericCall<null, ScheduleRow | null>({ service: name, method: 'get', key: id, parameter: null, inputSerde: json, outputSerde: json })),
        );
        const rows: ScheduleRow[] = [];
        const unreadable: RegistryList['unreadable'] = [];
        read.forEach((result, i) => {
          if (result.status === 'rejected') unreadable.push({ id: ids[i]!, message: result.reason instanceof Error ? result.reason.message : String(result.reason) });
          else if (result.value !== null) rows.push(result.value);
        });
        return { rows: rows.sort((a, b) => a.createdAt - b.createdAt || a.id.localeCompare(b.id)), unreadable };
      }),
    },
  });
}

import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { parseOptions } from '../known-keys.js';
import { ScheduleRowSchema } from '../schedules/row.js';
import { exactlyOneTiming, infoOf, InvalidScheduleError, newScheduleRow, ScheduleFieldsSchema, ScheduleNotFoundError, warnEscaped, type ScheduleInfo } from '../schedules/schedules.js';
import { StoreError } from '../stores/errors.js';
import { ingressKeyProblem, ingressUrlProblem, ObjectNameSchema } from './ingress-url.js';
import { REGISTRY_KEY, RegistryListSchema, RestateScheduleFieldsSchema } from './schedule-fields.js';

const ClientOptionsSchema = z.strictObject({
  /** The schedule object's name, as given to `restateSchedules` (default `loopchartSchedule`); one Restate registers, as there (else an `InvalidScheduleError`). */
  name: ObjectNameSchema.optional(),
  /** How long one call to the ingress may take (default 30 s). */
  timeoutMs: z.number().int().positive().max(600_000).optional(),
  /**
   * Told of each schedule `list` leaves out because this version does not read its stored row
   * (another version wrote it, or it was edited): a `StoreError` naming it. Default: a process
   * warning on one line, as `listSchedules` does.
   */
  onUnreadable: z.custom<(error: StoreError) => void>((value) => typeof value === 'function', { error: 'onUnreadable must be a function' }).optional(),
});

/** What `restateScheduleClient` takes besides the ingress URL. */
export type RestateScheduleClientOptions = z.input<typeof ClientOptionsSchema>;

const RestateOptionsSchema = RestateScheduleFieldsSchema.extend({ id: ScheduleFieldsSchema.shape.id }).refine(...exactlyOneTiming);

/**
 * A schedule on Restate: `schedule`'s options without `agent` (the session object's agent runs
 * each tick) and without `missed` (the Restate server keeps a delayed call until a worker takes
 * it: a late tick runs once).
 *
 * @example
 * ```ts
 * import type { RestateScheduleOptions } from 'loopchart/restate';
 *
 * const hourly: RestateScheduleOptions = { id: 'check-ticket', session: 'ticket-42', input: 'Any news on the ticket?', every: 3_600_000, overlap: 'skip' };
 * ```
 */
export type RestateScheduleOptions = z.input<typeof RestateOptionsSchema>;

/**
 * What `restateScheduleClient` returns: the schedule API of `loopchart/schedules`, over Restate's
 * ingress. `lastOutcome` is `Sent` (the input went to the session object; the run's outcome is the
 * session's own `state`) or `Skipped`; `agent` is the session object's name; `firingBy` is null.
 *
 * @example
 * ```ts
 * import { restateScheduleClient, type RestateScheduleClient } from 'loopchart/restate';
 *
 * const schedules: RestateScheduleClient = restateScheduleClient('http://127.0.0.1:8080');
 * console.log((await schedules.list()).map((s) => s.id));
 * ```
 */
export interface RestateScheduleClient {
  /** Where the schedules are: `Restate at <ingress URL>` (the viewer's schedules page shows it). */
  readonly label: string;
  /** Stores the schedule and arms its first tick; checked here first (`InvalidScheduleError`, `InvalidCronError`, `UnknownTimeZoneError`). */
  schedule(options: RestateScheduleOptions): Promise<ScheduleInfo>;
  /** The schedule, or undefined when there is none with this id. */
  get(id: string): Promise<ScheduleInfo | undefined>;
  /** Every schedule, oldest first. */
  list(): Promise<ScheduleInfo[]>;
  pause(id: string): Promise<ScheduleInfo>;
  /** From the next time after now (ticks missed while paused are not made up; a one-off whose time passed fires at once). */
  resume(id: string): Promise<ScheduleInfo>;
  /** Deletes the schedule (its session stays); its pending tick does nothing. */
  delete(id: string): Promise<void>;
}

/** The ingress URL without its trailing slash; anything but an `http(s)://` URL is an `InvalidScheduleError` (it comes from a config or a command line). */
function ingressBase(ingressUrl: unknown): string {
  const problem = ingressUrlProblem(ingressUrl);
  if (problem !== null) throw new InvalidScheduleError(`restateScheduleClient takes the ingress URL (http://host:port): ${problem}`);
  return new URL(ingressUrl as string).href.replace(/\/$/, '');
}

/**
 * A client of the schedule objects (`restateSchedules`) through Restate's ingress: `schedule`,
 * `get`, `list`, `pause`, `resume`, `delete`. An unknown id is a `ScheduleNotFoundError`, a
 * schedule the object refuses an `InvalidScheduleError`, an ingress that fails or does not answer
 * in `timeoutMs` a `StoreError` (Restate is where these schedules are stored).
 *
 * @example
 * ```ts
 * import { restateScheduleClient } from 'loopchart/restate';
 *
 * const schedules = restateScheduleClient('http://127.0.0.1:8080');
 * const nightly = await schedules.schedule({ id: 'nightly', session: 'reports', input: 'Write the nightly report.', cron: '0 2 * * *', timezone: 'Europe/Paris' });
 * console.log(nightly.nextAt);
 * await schedules.pause('nightly');
 * await schedules.resume('nightly');
 * await schedules.delete('nightly');
 * ```
 */
export function restateScheduleClient(ingressUrl: string, options: RestateScheduleClientOptions = {}): RestateScheduleClient {
  const given = parseOptions(ClientOptionsSchema, options, 'restateScheduleClient', (message) => new InvalidScheduleError(message));
  const base = ingressBase(ingressUrl);
  const name = given.name ?? 'loopchartSchedule';
  const timeoutMs = given.timeoutMs ?? 30_000;
  const onUnreadable = given.onUnreadable ?? warnEscaped;
  const where = `Restate at ${base}`;

  const call = async (object: string, key: string, handler: string, body: unknown = null): Promise<unknown> => {
    const keyProblem = ingressKeyProblem(key);
    if (keyProblem !== null) throw new InvalidScheduleError(`id: ${keyProblem}`);
    let response: Response;
    let text: string;
    try {
      // `object` is a checked name (ObjectNameSchema), one path segment as it is; the key, checked above, one once encoded.
      response = await fetch(`${base}/${object}/${encodeURIComponent(key)}/${handler}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(timeoutMs),
      });
      text = await response.text();
    } catch (error) {
      throw new StoreError(where, `${handler}: ${(error as Error).message}`, { cause: error });
    }
    if (response.ok) {
      try {
        return text ? JSON.parse(text) : null;
      } catch {
        throw new StoreError(where, `${handler}: the reply is not JSON`);
      }
    }
    const message = (() => {
      try {
        return String((JSON.parse(text) as { message?: unknown }).message ?? text);
      } catch {
        return text;
      }
    })().slice(0, 1000);
    if (response.status === 404 && message.startsWith('ScheduleNotFound')) throw new ScheduleNotFoundError(key);
    if (response.status === 400 || response.status === 409) throw new InvalidScheduleError(message.replace(/^\w+: (invalid schedule: )?/, ''));
    throw new StoreError(where, `${handler}: HTTP ${response.status}: ${message}`);
  };
  /** A row as the object returned it, checked (input from outside). */
  const info = (value: unknown): ScheduleInfo => {
    const parsed = ScheduleRowSchema.safeParse(value);
    if (!parsed.success) throw new StoreError(where, `a schedule this version does not read: ${z.prettifyError(parsed.error)}`);
    return infoOf(parsed.data);
  };

  return {
    label: where,
    async schedule(options) {
      const checked = parseOptions(RestateOptionsSchema, options, '', (message) => new InvalidScheduleError(message));
      const { id = randomUUID(), ...fields } = checked;
      // Checked here for typed errors (the object checks again, at its own now).
      newScheduleRow({ ...fields, agent: name, missed: 'run-once' }, id, Date.now());
      const at = fields.at instanceof Date ? fields.at.getTime() : fields.at;
      return info(await call(name, id, 'create', { ...fields, ...(at !== undefined && { at }) }));
    },
    async get(id) {
      const value = await call(name, id, 'get');
      return value === null ? undefined : info(value);
    },
    async list() {
      const reply = RegistryListSchema.safeParse(await call(`${name}Registry`, REGISTRY_KEY, 'list'));
      if (!reply.success) throw new StoreError(where, 'list: the reply is not a list of schedules');
      // Each row on its own, as listSchedules: one this version does not read is reported, the others listed.
      const listed: ScheduleInfo[] = [];
      for (const row of reply.data.rows) {
        try {
          listed.push(info(row));
        } catch (error) {
          onUnreadable(error as StoreError);
        }
      }
      for (const { id, message } of reply.data.unreadable) {
        // The object's refusal names the schedule already; anything else the registry caught is named here.
        const named = message.startsWith(`schedule '${id}'`) ? message : `schedule '${id.slice(0, 200)}': ${message}`;
        onUnreadable(new StoreError(where, named.slice(0, 2000)));
      }
      return listed;
    },
    pause: async (id) => info(await call(name, id, 'pause')),
    resume: async (id) => info(await call(name, id, 'resume')),
    delete: async (id) => {
      await call(name, id, 'delete');
    },
  };
}

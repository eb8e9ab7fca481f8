import { openSessionStore } from '../stores/open.js';
import type { SessionStore } from '../stores/session-store.js';
import { deleteSchedule, listSchedules, pauseSchedule, resumeSchedule, schedule, type ScheduleInfo, type ScheduleOptions } from '../schedules/schedules.js';
import { UnknownCommandError, UsageError } from './errors.js';
import { escapeLine } from './escape.js';
import { parseCommandArgs, storeArgument, storeCommandOptions } from './args.js';
import { noStore, withStore, type Io } from './sessions.js';
import { restateSchedules } from './restate-schedules.js';

export const SCHEDULES_USAGE = `usage: loopchart schedules <command> [options]

  list                       every schedule: next and last run, last outcome, runs
  add --session ID --agent NAME --input TEXT (--at ISO | --every MS | --cron EXPR [--timezone ZONE])
      [--id ID] [--scope SCOPE] [--missed run-once|skip] [--overlap skip|queue] [--paused]
                             store a schedule (a scheduler fires it: loopchart scheduler, or startScheduler)
  pause ID | resume ID | delete ID

options:
  --store LOCATION  a SQLite file (default: $LOOPCHART_STORE, else .loopchart/loopchart.db),
                    sqlite:PATH, or postgres://...
  --schema NAME     the PostgreSQL schema holding the tables (default loopchart)
  --restate URL     the schedules kept by Restate (restateSchedules), through this ingress
                    (http://127.0.0.1:8080); add takes no --agent or --missed there`;

/** The options of `schedules add` (besides the store's and the help). */
const ADD_ARGS = {
  id: { type: 'string' },
  session: { type: 'string' },
  agent: { type: 'string' },
  input: { type: 'string' },
  at: { type: 'string' },
  every: { type: 'string' },
  cron: { type: 'string' },
  timezone: { type: 'string' },
  missed: { type: 'string' },
  overlap: { type: 'string' },
  paused: { type: 'boolean' },
  scope: { type: 'string' },
  restate: { type: 'string' },
} as const;

/** Where the schedules are: a store, or Restate's schedule objects; every command works on either. */
interface ScheduleTarget {
  label: string;
  list(): Promise<ScheduleInfo[]>;
  add(given: ScheduleOptions): Promise<ScheduleInfo>;
  pause(id: string): Promise<ScheduleInfo>;
  resume(id: string): Promise<ScheduleInfo>;
  delete(id: string): Promise<void>;
}

/** The schedules of the store a command names; each command opens it and closes it (`add` may create it). */
function storeTarget(values: { store?: string | undefined; schema?: string | undefined }, io: Io): ScheduleTarget {
  const options = storeCommandOptions(values, io);
  const on = <T>(work: (store: SessionStore) => Promise<T>) => withStore(options, work, noStore(options.location));
  return {
    label: options.location.label,
    // An unreadable row is reported through io, whose escaping covers the stored id it names.
    list: () => on((store) => listSchedules(store, { onUnreadable: (error) => io.err(`warning: ${error.message}`) })),
    // Adding is the one command that may create the store.
    async add(given) {
      const store = await openSessionStore(storeArgument(values), { schema: values.schema });
      try {
        return await schedule(store, given);
      } finally {
        await store.close();
      }
    },
    pause: (id) => on((store) => pauseSchedule(store, id)),
    resume: (id) => on((store) => resumeSchedule(store, id)),
    delete: (id) => on((store) => deleteSchedule(store, id)),
  };
}

/** The schedules Restate keeps, through its ingress at `url` (the client is loaded only here, and needs no Restate SDK). */
async function restateTarget(url: string, values: { store?: string | undefined; agent?: string | undefined; missed?: string | undefined }, io: Io): Promise<ScheduleTarget> {
  if (values.store !== undefined) throw new UsageError('--restate and --store name two places: give one');
  // As for a store: an unreadable row is reported through io, whose escaping covers the id it names.
  const client = await restateSchedules(url, (error) => io.err(`warning: ${error.message}`));
  return {
    label: client.label,
    list: () => client.list(),
    add(given) {
      // On Restate the session object runs each tick and a delayed call is never missed.
      if (values.agent !== undefined || values.missed !== undefined) throw new UsageError('on Restate a schedule takes no --agent (the session object runs it) and no --missed (a late tick runs once)');
      const { agent: _agent, missed: _missed, ...rest } = given;
      return client.schedule(rest);
    },
    pause: (id) => client.pause(id),
    resume: (id) => client.resume(id),
    delete: (id) => client.delete(id),
  };
}

const when = (date: Date | null) => (date ? date.toISOString().replace(/\.\d{3}Z$/, 'Z') : '-');
const timingOf = (info: ScheduleInfo) =>
  info.timing.kind === 'cron' ? `cron '${info.timing.cron}' ${info.timezone}` : info.timing.kind === 'every' ? `every ${info.timing.everyMs} ms` : `at ${when(new Date(info.timing.at))}`;

function line(info: ScheduleInfo): string {
  const state = info.paused ? 'paused' : info.firingBy ? 'firing' : 'active';
  const last = info.lastOutcome ? `${info.lastOutcome}${info.lastError ? ` (${escapeLine(info.lastError).slice(0, 120)})` : ''}` : '-';
  const scope = info.scope === undefined ? '' : ` (scope ${escapeLine(info.scope)})`;
  return `${escapeLine(info.id)}  ${state}  ${escapeLine(info.agent)} -> ${escapeLine(info.session)}${scope}  ${escapeLine(timingOf(info))}  next ${when(info.nextAt)}  last ${when(info.lastFiredAt)} ${last}  runs ${info.runs}`;
}

/** `loopchart schedules …`: list, add, pause, resume and delete the schedules of a store, or of Restate (`--restate URL`). */
export async function schedulesCommand(argv: string[], io: Io): Promise<number> {
  const { values, positionals } = parseCommandArgs(argv, ADD_ARGS);
  const [command, ...rest] = positionals;
  if (values.help || command === undefined) {
    io.out(SCHEDULES_USAGE);
    return 0;
  }
  const target = values.restate !== undefined ? await restateTarget(values.restate, values, io) : storeTarget(values, io);
  const one = async (work: (id: string) => Promise<ScheduleInfo | void>, done: string) => {
    if (rest.length !== 1) throw new UsageError(`usage: loopchart schedules ${command} ID`);
    const info = await work(rest[0]!);
    io.out(info ? line(info) : `${done} ${escapeLine(rest[0]!)}`);
    return 0;
  };
  switch (command) {
    case 'list': {
      const all = await target.list();
      if (all.length === 0) io.out(`no schedules in ${escapeLine(target.label)}`);
      for (const info of all) io.out(line(info));
      return 0;
    }
    case 'add': {
      if (rest.length !== 0) throw new UsageError(`usage: loopchart schedules add --session ID --agent NAME --input TEXT (--at | --every | --cron)`);
      const every = values.every === undefined ? undefined : Number(values.every);
      if (every !== undefined && !Number.isFinite(every)) throw new UsageError(`--every takes a number of ms, not '${escapeLine(values.every!)}'`);
      const given = {
        ...(values.id !== undefined && { id: values.id }),
        session: values.session,
        agent: values.agent,
        input: values.input,
        ...(values.at !== undefined && { at: values.at }),
        ...(every !== undefined && { every }),
        ...(values.cron !== undefined && { cron: values.cron }),
        ...(values.timezone !== undefined && { timezone: values.timezone }),
        ...(values.missed !== undefined && { missed: values.missed }),
        ...(values.overlap !== undefined && { overlap: values.overlap }),
        ...(values.paused !== undefined && { paused: values.paused }),
        ...(values.scope !== undefined && { scope: values.scope }),
      } as ScheduleOptions;
      io.out(line(await target.add(given)));
      return 0;
    }
    case 'pause':
      return one((id) => target.pause(id), 'paused');
    case 'resume':
      return one((id) => target.resume(id), 'resumed');
    case 'delete':
      return one((id) => target.delete(id), 'deleted');
    default:
      throw new UnknownCommandError(`unknown command 'schedules ${escapeLine(command)}'; the commands: list, add, pause, resume, delete`);
  }
}

import { openSessionStore } from '../stores/open.js';
import type { SessionStore } from '../stores/session-store.js';
import { deleteSchedule, listSchedules, pauseSchedule, resumeSchedule, schedule, type ScheduleInfo, type ScheduleOptions } from '../schedules/schedules.js';
import { UnknownCommandError, UsageError } from './errors.js';
import { escapeLine } from './escape.js';
import { parseCommandArgs, storeArgument, storeCommandOptions } from './args.js';
import { noStore, withStore, type Io } from './sessions.js';

export const SCHEDULES_USAGE = `usage: loopchart schedules <command> [options]

  list                       every schedule: next and last run, last outcome, runs
  add --session ID --agent NAME --input TEXT (--at ISO | --every MS | --cron EXPR [--timezone ZONE])
      [--id ID] [--missed run-once|skip] [--overlap skip|queue] [--paused]
                             store a schedule (a scheduler fires it: loopchart scheduler, or startScheduler)
  pause ID | resume ID | delete ID

options:
  --store LOCATION  a SQLite file (default: $LOOPCHART_STORE, else .loopchart/loopchart.db),
                    sqlite:PATH, or postgres://...
  --schema NAME     the PostgreSQL schema holding the tables (default loopchart)`;

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
} as const;

const when = (date: Date | null) => (date ? date.toISOString().replace(/\.\d{3}Z$/, 'Z') : '-');
const timingOf = (info: ScheduleInfo) =>
  info.timing.kind === 'cron' ? `cron '${info.timing.cron}' ${info.timezone}` : info.timing.kind === 'every' ? `every ${info.timing.everyMs} ms` : `at ${when(new Date(info.timing.at))}`;

function line(info: ScheduleInfo): string {
  const state = info.paused ? 'paused' : info.firingBy ? 'firing' : 'active';
  const last = info.lastOutcome ? `${info.lastOutcome}${info.lastError ? ` (${escapeLine(info.lastError).slice(0, 120)})` : ''}` : '-';
  return `${escapeLine(info.id)}  ${state}  ${escapeLine(info.agent)} -> ${escapeLine(info.session)}  ${escapeLine(timingOf(info))}  next ${when(info.nextAt)}  last ${when(info.lastFiredAt)} ${last}  runs ${info.runs}`;
}

/** `loopchart schedules …`: list, add, pause, resume and delete the schedules of a store. */
export async function schedulesCommand(argv: string[], io: Io): Promise<number> {
  const { values, positionals } = parseCommandArgs(argv, ADD_ARGS);
  const [command, ...rest] = positionals;
  if (values.help || command === undefined) {
    io.out(SCHEDULES_USAGE);
    return 0;
  }
  const options = storeCommandOptions(values, io);
  const one = (work: (store: SessionStore, id: string) => Promise<ScheduleInfo | void>, done: string) => {
    if (rest.length !== 1) throw new UsageError(`usage: loopchart schedules ${command} ID`);
    return withStore(
      options,
      async (store) => {
        const info = await work(store, rest[0]!);
        io.out(info ? line(info) : `${done} ${escapeLine(rest[0]!)}`);
        return 0;
      },
      noStore(options.location),
    );
  };
  switch (command) {
    case 'list':
      return withStore(
        options,
        async (store) => {
          const all = await listSchedules(store);
          if (all.length === 0) io.out(`no schedules in ${options.location.label}`);
          for (const info of all) io.out(line(info));
          return 0;
        },
        noStore(options.location),
      );
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
      } as ScheduleOptions;
      // Adding is the one command that may create the store.
      const store = await openSessionStore(storeArgument(values), { schema: values.schema });
      try {
        io.out(line(await schedule(store, given)));
        return 0;
      } finally {
        await store.close();
      }
    }
    case 'pause':
      return one(pauseSchedule, 'paused');
    case 'resume':
      return one(resumeSchedule, 'resumed');
    case 'delete':
      return one(deleteSchedule, 'deleted');
    default:
      throw new UnknownCommandError(`unknown command 'schedules ${escapeLine(command)}'; the commands: list, add, pause, resume, delete`);
  }
}

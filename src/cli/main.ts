import { LoopchartError } from '../errors.js';
import { parseCommandArgs, storeArgument, storeCommandOptions } from './args.js';
import { CHART_USAGE, chartCommand } from './chart.js';
import { CliError, UnknownCommandError, UsageError } from './errors.js';
import { escapeLine, escapeText } from './escape.js';
import { cliHint } from './hint.js';
import { forkCommand, replayAgainstCommand, replayCommand } from './replay.js';
import { resumeSession, sendSession } from './continue.js';
import { DOUBT_SHAPE, decideDoubtCommand } from './doubt.js';
import { listSessions, rewindSession, showSession, type CommandOptions, type Io } from './sessions.js';
import { parseLocation } from './store.js';
import { closestCommand } from './suggest.js';

const SESSIONS_COMMANDS = `sessions commands:
  list              every session: id, version (steps stored), messages, last update
  show ID           the transcript: roles, tool calls with their arguments, tool results (truncated);
                    child sessions (agent tools) as a tree with their outcome and usage
  resume ID         continue the run that was in flight when the session was stored, to its end
  send ID TEXT      start the next run of a session at rest (after Ctrl-C, a failure, a finished
                    run, or a fork) with TEXT as the user's message
  rewind ID N       drop committed history past N messages, snapped to a coherent cut
  doubt ID CALL rerun | fail [REASON] | result JSON [--by NAME]
                    decide a call in doubt after a crash (show lists them): run it again, fail it,
                    or give its result by hand; resume then goes on
  replay ID         re-run the brain over the recorded results, calling nothing; report the first
                    decision that differs from the recording (exit 1 when one does)
  replay ID --against MODULE
                    the recorded replies and results through that agent (nothing called): the first
                    decision it takes otherwise, with the rule on each side (exit 1 when one does)
  fork ID --at N [--as NEW]
                    a new session from the first N messages of the log (snapped to a coherent cut),
                    at rest, to continue with send and any agent; the original is only read`;

const VIEW_COMMANDS = `view commands:
  view              serve the viewer on 127.0.0.1 until Ctrl-C (--port N, --store LOCATION,
                    --restate URL: /schedules lists the schedules Restate keeps)
  view export ID -o FILE
                    one self-contained HTML file of the session`;

const OPTIONS = `options:
  --store LOCATION  a SQLite file (default: $LOOPCHART_STORE, else .loopchart/loopchart.db),
                    sqlite:PATH, or postgres://...
  --schema NAME     the PostgreSQL schema holding the tables (default loopchart)
  --agent MODULE    resume / send with this agent: a module (.js, .mjs; .ts/.mts with tsx installed
                    or on Node 22.18+) exporting \`agent\` (an AgentConfig, or a function returning
                    one). Required unless the demo (npm start) made the session (its id starts with demo-)
  --full            show tool results and arguments in full
  --port N          view: the port on 127.0.0.1 (default 4317; 0 picks a free one)
  -o, --out FILE    view export: the HTML file to write
  --at N            fork: messages of the log to keep
  --as ID           fork: the new session's id (default ID-fork-N-<random>)
  --by NAME         doubt: who decided (recorded in the trace)
  -h, --help        this text`;

const EXIT_CODES = `exit codes: 0 done, 1 error (unknown or corrupt session, busy, an unreachable or unreadable store, a run
            that failed), 2 bad usage (a resume or send without --agent of a session the demo did not
            make), 130 a run interrupted by Ctrl-C, 143 by SIGTERM (the session is kept: send continues it)`;

export const SESSIONS_USAGE = `usage: loopchart sessions <command> [options]

${SESSIONS_COMMANDS}

${OPTIONS}

${EXIT_CODES}`;

export const VIEW_USAGE = `usage: loopchart view [--store LOCATION] [--port N] [--restate URL]
       loopchart view export ID -o FILE

${VIEW_COMMANDS}

${OPTIONS}`;

export const USAGE = `usage: loopchart sessions <command> [options]
       loopchart eval DATASET --agent MODULE [options]   (loopchart eval --help)
       loopchart schedules list|add|pause|resume|delete   (loopchart schedules --help)
       loopchart scheduler --agents MODULE [--store LOCATION]   (loopchart scheduler --help)
       loopchart chart [--brain] [--json | --mermaid] | --svg brain|driver   (loopchart chart --help)
       loopchart memory list|export|delete                (loopchart memory --help)
       loopchart view [--store LOCATION] [--port N]
       loopchart view export ID -o FILE

${SESSIONS_COMMANDS}

${VIEW_COMMANDS}

${OPTIONS}

${EXIT_CODES}`;

/**
 * The help of the command group the arguments name (the whole usage outside a group). The groups
 * with a module of their own are asked for theirs: it is loaded already, since their command ran.
 */
async function usageFor(argv: readonly string[]): Promise<string> {
  const group = argv.find((arg) => !arg.startsWith('-'));
  if (group === 'eval') return (await import('./eval.js')).EVAL_USAGE;
  if (group === 'schedules') return (await import('./schedules.js')).SCHEDULES_USAGE;
  if (group === 'scheduler') return (await import('./scheduler.js')).SCHEDULER_USAGE;
  if (group === 'memory') return (await import('./memory.js')).MEMORY_USAGE;
  return group === 'sessions' ? SESSIONS_USAGE : group === 'view' ? VIEW_USAGE : group === 'chart' ? CHART_USAGE : USAGE;
}

/** Network errors that mean the database server is not there (or not answering). */
const UNREACHABLE = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ECONNRESET']);

/**
 * What a failure says on stderr: always one line (escaped: messages carry stored ids), never a
 * stack. LOOPCHART_DEBUG=1 adds the stack of an unexpected error.
 */
function describeFailure(error: unknown, argv: string[]): string {
  if (error instanceof CliError || LoopchartError.isInstance(error)) return error.message;
  const e = error as { code?: unknown; message?: unknown; name?: unknown } | null;
  const code = typeof e?.code === 'string' ? e.code : undefined;
  // An AggregateError (a host with IPv4 and IPv6 addresses) has an empty message of its own.
  const first = (error as { errors?: unknown[] } | null)?.errors?.[0] as { message?: unknown } | undefined;
  const text = typeof e?.message === 'string' && e.message !== '' ? e.message : typeof first?.message === 'string' ? first.message : String(error);
  const message = text.split('\n')[0]!;
  const store = storeLabel(argv);
  if (code && UNREACHABLE.has(code)) return `cannot reach the database at ${store}: ${message} (${code})`;
  // SQLite (either driver) and PostgreSQL errors that name the database itself.
  if (code?.startsWith('SQLITE_') || code === 'ERR_SQLITE_ERROR' || (code && /^(28|3D|53|57|08)/.test(code))) {
    return `the store at ${store} failed: ${message}${code.startsWith('SQLITE_') || /^\w{5}$/.test(code) ? ` (${code})` : ''}`;
  }
  // A file or folder the command was told to use (`-o FILE`, `--results`, a dataset): Node's
  // message already names the path; said plainly, it is no "unexpected error".
  const file = error as { syscall?: unknown; path?: unknown } | null;
  if (code && typeof file?.syscall === 'string' && typeof file.path === 'string') {
    const reason = /^[A-Z]+: (.+?), \w+(?: '.*')?$/.exec(message)?.[1] ?? message;
    return `cannot ${file.syscall} ${file.path}: ${reason} (${code})`;
  }
  const name = typeof e?.name === 'string' ? e.name : 'Error';
  return `unexpected error: ${name}: ${message} (LOOPCHART_DEBUG=1 prints the stack)`;
}

/** The --store the user gave, with any password hidden, for messages. */
function storeLabel(argv: string[]): string {
  try {
    return parseLocation(storeArgument(parse(argv).values)).label;
  } catch {
    return 'the store';
  }
}

/**
 * Runs one CLI invocation and returns its exit code; never throws. Every line it prints passes
 * `escapeText` on the way out, whatever a command forgot: stored and user-given text reaches the
 * terminal escaped one way (commands escape one-line fields, ids and labels, with `escapeLine`).
 */
export async function main(argv: string[], terminal: Io): Promise<number> {
  const io: Io = { out: (line) => terminal.out(escapeText(line)), err: (line) => terminal.err(escapeText(line)) };
  try {
    return await run(argv, io);
  } catch (error) {
    io.err(`loopchart: ${escapeLine(describeFailure(error, argv))}`);
    if (error instanceof UsageError && !(error instanceof UnknownCommandError)) io.err(await usageFor(argv));
    if (process.env.LOOPCHART_DEBUG && !(error instanceof CliError) && !LoopchartError.isInstance(error)) {
      io.err(String((error as Error)?.stack ?? error));
    }
    return error instanceof CliError ? error.exitCode : 1;
  }
}

async function run(argv: string[], io: Io): Promise<number> {
  // `loopchart eval …` has options of its own (src/cli/eval.ts), loaded only for it.
  if (argv[0] === 'eval') return (await import('./eval.js')).evalCommand(argv.slice(1), io);
  // `loopchart schedules …` (src/cli/schedules.ts), loaded only for it.
  if (argv[0] === 'schedules') return (await import('./schedules.js')).schedulesCommand(argv.slice(1), io);
  // `loopchart scheduler …` (src/cli/scheduler.ts): fires the schedules until a signal.
  if (argv[0] === 'scheduler') return (await import('./scheduler.js')).schedulerCommand(argv.slice(1), io);
  // `loopchart memory …` (src/cli/memory.ts): what memory keeps per scope, loaded only for it.
  if (argv[0] === 'memory') return (await import('./memory.js')).memoryCommand(argv.slice(1), io);
  // `loopchart chart …`: the driver's decision tables (src/cli/chart.ts), no store involved.
  if (argv[0] === 'chart') return chartCommand(argv.slice(1), io);
  const { values, positionals } = parse(argv);
  const [group, command, ...rest] = positionals;
  // `loopchart`, `loopchart sessions`, `loopchart <group> --help`: the help asked for.
  if (values.help || group === undefined || (group === 'sessions' && command === undefined)) {
    io.out(await usageFor(argv));
    return 0;
  }
  if (group === 'view') return view(command, rest, values, io);
  if (group !== 'sessions') throw unknownCommand([], group, GROUPS);
  if (values.restate !== undefined) throw new UsageError('--restate is an option of loopchart view and loopchart schedules');
  const options: CommandOptions = {
    ...storeCommandOptions(values, io),
    ...(values.agent !== undefined && { agent: values.agent }),
    full: values.full ?? false,
  };
  const expect = (count: number, shape: string) => {
    if (rest.length !== count) throw new UsageError(`usage: loopchart sessions ${command} ${shape}`.trimEnd());
  };
  switch (command) {
    case 'list':
      expect(0, '');
      return listSessions(options);
    case 'show':
      expect(1, 'ID');
      return showSession(rest[0]!, options);
    case 'resume':
      expect(1, 'ID');
      return resumeSession(rest[0]!, options);
    case 'send':
      expect(2, 'ID TEXT');
      return sendSession(rest[0]!, rest[1]!, options);
    case 'rewind':
      expect(2, 'ID N');
      return rewindSession(rest[0]!, rest[1]!, options);
    case 'replay':
      expect(1, 'ID');
      return values.against !== undefined ? replayAgainstCommand(rest[0]!, values.against, options) : replayCommand(rest[0]!, options);
    case 'doubt':
      if (rest.length < 3 || rest.length > 4) throw new UsageError(`usage: loopchart sessions doubt ${DOUBT_SHAPE}`);
      return decideDoubtCommand(rest[0]!, rest[1]!, rest[2]!, rest[3], values.by, options);
    case 'fork':
      expect(1, 'ID --at N [--as NEW]');
      if (values.at === undefined) throw new UsageError('usage: loopchart sessions fork ID --at N [--as NEW]');
      return forkCommand(rest[0]!, values.at, values.as, options);
    default:
      throw unknownCommand(['sessions'], command ?? '', SESSIONS_COMMAND_NAMES);
  }
}

const GROUPS = ['sessions', 'view', 'eval', 'schedules', 'scheduler', 'chart', 'memory'];
const SESSIONS_COMMAND_NAMES = ['list', 'show', 'resume', 'send', 'rewind', 'doubt', 'replay', 'fork'];

/** `unknown command 'sessions lst'; did you mean 'sessions list'?`, or the commands there are. */
function unknownCommand(path: readonly string[], word: string, commands: readonly string[]): UnknownCommandError {
  const typed = [...path, word].join(' ');
  const near = closestCommand(word, commands);
  const help = cliHint(`${[...path, '--help'].join(' ')}`);
  const next = near !== undefined ? `did you mean '${[...path, near].join(' ')}'?` : `the commands: ${commands.join(', ')}`;
  return new UnknownCommandError(`unknown command '${typed}'; ${next} (${help} for more)`);
}

/** `loopchart view` and `loopchart view export ID -o FILE`; the viewer is loaded only for these. */
async function view(command: string | undefined, rest: string[], values: ReturnType<typeof parse>['values'], io: Io): Promise<number> {
  const options = storeCommandOptions(values, io);
  const { exportCommand, serveCommand } = await import('./view.js');
  if (command === undefined) return serveCommand(values.port, options, values.restate);
  if (command === 'export' && rest.length === 1) return exportCommand(rest[0]!, values.out, options);
  if (command === 'export') throw new UsageError('usage: loopchart view export ID -o FILE');
  throw unknownCommand(['view'], command, ['export']);
}

/** The sessions and view commands' arguments (see `parseCommandArgs`: `--store`, `--schema` and `--help` besides these). */
function parse(argv: string[]) {
  return parseCommandArgs(argv, {
    agent: { type: 'string' },
    against: { type: 'string' },
    full: { type: 'boolean' },
    at: { type: 'string' },
    port: { type: 'string' },
    out: { type: 'string', short: 'o' },
    as: { type: 'string' },
    by: { type: 'string' },
    restate: { type: 'string' },
  });
}

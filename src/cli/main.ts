import { parseArgs } from 'node:util';
import { LoopchartError } from '../errors.js';
import { CliError, UsageError } from './errors.js';
import { listSessions, resumeSession, rewindSession, showSession, type CommandOptions, type Io } from './sessions.js';
import { parseLocation } from './store.js';

export const USAGE = `usage: loopchart sessions <command> [options]

commands:
  list              every session: id, version (steps stored), messages, last update
  show ID           the transcript: roles, tool calls with their arguments, tool results (truncated)
  resume ID         continue the run that was in flight when the session was stored, to its end
  rewind ID N       drop committed history past N messages, snapped to a coherent cut

options:
  --store LOCATION  a SQLite file (default .loopchart/loopchart.db), sqlite:PATH, or postgres://...
  --schema NAME     the PostgreSQL schema holding the tables (default loopchart)
  --agent MODULE    resume with this agent: a module exporting \`agent\` (an AgentConfig, or a
                    function returning one); default: the demo folder agent (examples/folder-agent.ts)
  --full            show tool results and arguments in full
  -h, --help        this text

exit codes: 0 done, 1 error (unknown or corrupt session, busy, a resumed run that failed), 2 bad usage`;

/** Runs one CLI invocation and returns its exit code; never throws. */
export async function main(argv: string[], io: Io): Promise<number> {
  try {
    return await run(argv, io);
  } catch (error) {
    if (error instanceof UsageError) {
      io.err(`loopchart: ${error.message}`);
      io.err(USAGE);
    } else if (error instanceof CliError || error instanceof LoopchartError) {
      io.err(`loopchart: ${error.message}`);
    } else {
      io.err(`loopchart: unexpected error: ${(error as Error)?.stack ?? String(error)}`);
    }
    return error instanceof CliError ? error.exitCode : 1;
  }
}

async function run(argv: string[], io: Io): Promise<number> {
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse(argv);
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  const { values, positionals } = parsed;
  if (values.help) {
    io.out(USAGE);
    return 0;
  }
  const [group, command, ...rest] = positionals;
  if (group !== 'sessions' || !command) throw new UsageError(group === undefined ? 'no command given' : `unknown command '${[group, command].filter(Boolean).join(' ')}'`);
  const options: CommandOptions = {
    location: parseLocation(values.store),
    ...(values.schema !== undefined && { schema: values.schema }),
    ...(values.agent !== undefined && { agent: values.agent }),
    full: values.full ?? false,
    io,
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
    case 'rewind':
      expect(2, 'ID N');
      return rewindSession(rest[0]!, rest[1]!, options);
    default:
      throw new UsageError(`unknown command 'sessions ${command}'`);
  }
}

function parse(argv: string[]) {
  return parseArgs({
    args: argv,
    allowPositionals: true,
    strict: true,
    options: {
      store: { type: 'string' },
      schema: { type: 'string' },
      agent: { type: 'string' },
      full: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
}

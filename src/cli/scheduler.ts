import { createAgentMachine, type AgentMachine } from '../../machines/agent.machine.js';
import { startScheduler, type ScheduleTick } from '../schedules/scheduler.js';
import { openSessionStore } from '../stores/open.js';
import { agentConfigOf, exportOf, importAgentModule } from './agent.js';
import { CliError, UsageError } from './errors.js';
import { escapeLine } from './escape.js';
import type { Io } from './sessions.js';
import { parseLocation } from './store.js';
import { parseCommandArgs, storeArgument } from './args.js';
import { watchStopSignals, type StopSignals } from './stop-signals.js';

export const SCHEDULER_USAGE = `usage: loopchart scheduler --agents MODULE [options]

  Fires the schedules of the store (loopchart schedules add) until SIGINT or SIGTERM, each tick
  once even beside other schedulers on the store; one line per tick it is done with. MODULE exports
  \`agents\`: the agents by the names schedules give, each an AgentConfig or a function returning
  one ({ reporter: { model, tools } }).
  SIGINT or SIGTERM stops claiming and lets the runs in flight end for --grace-ms; then (or at a
  second signal) each is closed where it is and its lease given back: the next scheduler to claim
  it continues the run. Either way the exit code is 0.

options:
  --agents MODULE     the module (.js, .mjs; .ts/.mts with tsx installed or on Node 22.18+)
  --store LOCATION    a SQLite file (default: $LOOPCHART_STORE, else .loopchart/loopchart.db),
                      sqlite:PATH, or postgres://...
  --schema NAME       the PostgreSQL schema holding the tables (default loopchart)
  --grace-ms N        how long a stop waits for the runs in flight (default 10000)
  --lease-ms N        how long a tick is this scheduler's without a renewal (default 30000)
  --max-concurrent N  ticks run at once (default 4)
  --max-idle-ms N     longest sleep before looking for schedules other processes added (default 60000)

exit codes: 0 stopped by a signal, 1 an error (the module, the store), 2 bad usage`;

/** The scheduler's own options (besides the store's and the help). */
const SCHEDULER_ARGS = {
  agents: { type: 'string' },
  'grace-ms': { type: 'string' },
  'lease-ms': { type: 'string' },
  'max-concurrent': { type: 'string' },
  'max-idle-ms': { type: 'string' },
} as const;

/** A whole number option, or its default; the scheduler checks the range (a typed error, exit 1). */
function wholeNumber(name: string, text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  if (!/^\d{1,10}$/.test(text)) throw new UsageError(`--${name} must be a whole number, got '${escapeLine(text)}'`);
  return Number(text);
}

/** The module's `agents` as machines by name. */
async function loadAgents(modulePath: string): Promise<Map<string, AgentMachine>> {
  const module = await importAgentModule(modulePath);
  const exported = exportOf(module, 'agents');
  if (typeof exported !== 'object' || exported === null || Array.isArray(exported) || Object.keys(exported).length === 0) {
    throw new CliError(`${modulePath} must export \`agents\`: an object of agents by name ({ reporter: AgentConfig, ... }), not empty`);
  }
  const machines = new Map<string, AgentMachine>();
  for (const [name, agent] of Object.entries(exported)) {
    machines.set(name, createAgentMachine(await agentConfigOf(agent, `${modulePath}: agents.${name} must be`)));
  }
  return machines;
}

const when = (date: Date | null) => (date ? date.toISOString().replace(/\.\d{3}Z$/, 'Z') : '-');

/** One tick as a line: when it ended, which schedule, its session, how it ended, when next. */
function tickLine(tick: ScheduleTick): string {
  const error = tick.error ? ` (${escapeLine(tick.error).slice(0, 200)})` : '';
  return `${when(new Date())}  ${escapeLine(tick.scheduleId)} -> ${escapeLine(tick.session)}  due ${when(tick.due)}  ${escapeLine(tick.outcome)}${error}  next ${when(tick.nextAt)}`;
}

/** `loopchart scheduler …` (argv after `scheduler`): runs until a signal, then stops cleanly. */
export async function schedulerCommand(argv: string[], io: Io): Promise<number> {
  const { values, positionals } = parseCommandArgs(argv, SCHEDULER_ARGS);
  if (values.help) {
    io.out(SCHEDULER_USAGE);
    return 0;
  }
  if (positionals.length > 0) throw new UsageError(`loopchart scheduler takes no arguments, got '${escapeLine(positionals[0]!)}'`);
  if (!values.agents) throw new UsageError('loopchart scheduler needs --agents MODULE (a module exporting `agents`)');
  const graceMs = wholeNumber('grace-ms', values['grace-ms']) ?? 10_000;
  const leaseMs = wholeNumber('lease-ms', values['lease-ms']);
  const maxConcurrentRuns = wholeNumber('max-concurrent', values['max-concurrent']);
  const maxIdleMs = wholeNumber('max-idle-ms', values['max-idle-ms']);
  // Listening before anything slow: a signal while the module loads stops the command, not the process.
  const first = watchStopSignals();
  let second: StopSignals | undefined;
  try {
    const agents = await loadAgents(values.agents);
    const location = parseLocation(storeArgument(values));
    // A scheduler may start before any schedule is added: like `schedules add`, it may create the store.
    const store = await openSessionStore(storeArgument(values), { schema: values.schema });
    try {
      const scheduler = await startScheduler({
        store,
        agents,
        leaseMs,
        maxConcurrentRuns,
        maxIdleMs,
        onTick: (tick) => io.out(tickLine(tick)),
        onError: (error) => io.err(`loopchart scheduler: ${escapeLine(error.message)}`),
      });
      io.out(`loopchart scheduler: ${escapeLine(scheduler.owner)} fires the schedules of ${location.label} for ${[...agents.keys()].map(escapeLine).join(', ')} (SIGINT or SIGTERM stops)`);
      io.err(`loopchart scheduler: ${await first.next}: no more claims; the runs in flight have ${graceMs} ms to end (a second signal lets them go now)`);
      second = watchStopSignals();
      void second.next.then(() => scheduler.stop({ graceMs: 0 }));
      await scheduler.stop({ graceMs });
      io.err('loopchart scheduler: stopped');
      return 0;
    } finally {
      await store.close();
    }
  } finally {
    first.off();
    second?.off();
  }
}

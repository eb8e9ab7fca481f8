import { replayAgainst } from '../evals/helpers.js';
import type { EvalAgent } from '../evals/run-case.js';
import { forkSession } from '../sessions/fork.js';
import { replaySession } from '../sessions/replay.js';
import { DEMO_SESSION_PREFIX, exportOf, importAgentModule } from './agent.js';
import { sendHint } from './continue.js';
import { CliError, UsageError } from './errors.js';
import { escapeLine } from './escape.js';
import { noStore, withStore, type CommandOptions } from './sessions.js';

/** `loopchart sessions replay ID`: exit 0 when every decision matches the recording, 1 at the first that does not. */
export async function replayCommand(sessionId: string, options: CommandOptions): Promise<number> {
  const { io, location } = options;
  return withStore(
    options,
    async (store) => {
      const report = await replaySession(store, sessionId);
      const steps = report.decisions.length;
      const rate = report.ms > 0 ? Math.round(steps / (report.ms / 1000)) : steps;
      io.out(`session ${escapeLine(sessionId)}: replayed ${steps} decision(s) over ${report.runs} run(s) in ${report.ms.toFixed(1)} ms (${rate} steps/s), calling nothing`);
      const d = report.divergence;
      if (!d) {
        io.out('no divergence: every decision matches the recording');
        return 0;
      }
      io.out(`divergence at step ${d.step} (run ${d.run}${d.seq !== undefined ? `, trace entry ${d.seq}` : ''}):`);
      if (d.field !== undefined) io.out(`  field:    ${escapeLine(d.field)}`);
      io.out(`  expected: ${escapeLine(d.expected)}`);
      io.out(`  got:      ${escapeLine(d.got)}`);
      return 1;
    },
    noStore(location),
  );
}

/** `loopchart sessions fork ID --at N [--as NEW]`. */
export async function forkCommand(sessionId: string, at: string, as: string | undefined, options: CommandOptions): Promise<number> {
  const { io, location } = options;
  if (!/^\d+$/.test(at)) throw new UsageError(`--at must be a whole number of messages to keep, got '${at}'`);
  return withStore(
    options,
    async (store) => {
      const fork = await forkSession(store, sessionId, { at: Number(at), ...(as !== undefined && { as }) });
      const snapped = fork.messages < Number(at) ? ` (cut at ${fork.messages}: a coherent point)` : '';
      io.out(`forked ${escapeLine(sessionId)} into ${escapeLine(fork.sessionId)} with ${fork.messages} message(s)${snapped}`);
      // A fork of a demo session is the demo's (its id keeps the prefix); any other needs its agent named.
      const agent = options.agent === undefined && !fork.sessionId.startsWith(DEMO_SESSION_PREFIX) ? ' --agent ./agent.ts' : '';
      io.out(`continue it: ${sendHint(fork.sessionId, options)}${agent}`);
      return 0;
    },
    noStore(location),
  );
}

/**
 * `loopchart sessions replay ID --against MODULE`: the session's recorded replies and results fed
 * through that agent's brain and driver, nothing called; exit 0 when it decides as recorded, 1 at
 * the first decision it takes otherwise (printed with the rule on each side).
 */
export async function replayAgainstCommand(sessionId: string, modulePath: string, options: CommandOptions): Promise<number> {
  const { io, location } = options;
  const module = await importAgentModule(modulePath);
  const agent = exportOf(module, 'agent') ?? module.default;
  if (!agent || (typeof agent !== 'function' && (typeof agent !== 'object' || !('model' in agent)))) {
    throw new CliError(`${modulePath} must export \`agent\`: an AgentConfig, or a function returning one`);
  }
  return withStore(
    options,
    async (store) => {
      const run = await replayAgainst(store, sessionId, agent as EvalAgent);
      io.out(`session ${escapeLine(sessionId)} against ${escapeLine(modulePath)}: ${run.decisions.length} decision(s) in ${run.ms.toFixed(1)} ms, calling nothing (outcome now: ${run.outcome.type})`);
      const d = run.difference;
      if (!d) {
        io.out('no difference: the agent decides as the recording did, step for step');
        return 0;
      }
      io.out(`first difference at decision ${d.step} (run ${(d.recorded ?? d.got)!.run + 1}):`);
      io.out(`  recorded: ${d.recorded ? `${escapeLine(d.recorded.what)}  [${escapeLine(d.recorded.rule)}]` : '(the recording ends here)'}`);
      io.out(`  now:      ${d.got ? `${escapeLine(d.got.what)}  [${escapeLine(d.got.rule)}]` : '(the new run ends here)'}`);
      return 1;
    },
    noStore(location),
  );
}

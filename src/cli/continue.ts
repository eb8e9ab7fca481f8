import { matchesState, type StateValue } from 'xstate';
import { runInFlight } from '../agent/protocol/actor-types.js';
import type { AgentContext } from '../agent/core/context.js';
import { waitsForSomeone } from '../agent/hosts/waiting.js';
import type { AgentOutput } from '../agent/protocol/actor-types.js';
import type { Message } from '../schemas.js';
import { DurableSession } from '../sessions/durable-session.js';
import { loadAgentMachine } from './agent.js';
import { CliError, UsageError } from './errors.js';
import { escapeLine } from './escape.js';
import { cliHint } from './hint.js';
import { watchInterrupt } from './interrupt.js';
import { liveTranscript } from './live-transcript.js';
import { loadSession, noStore, withStore, type CommandOptions } from './sessions.js';
import { DEFAULT_SQLITE_PATH } from './store.js';
import { describeOutcome, describeState, formatMessage } from './transcript.js';

/**
 * `sessions resume` (a run in flight, to its end) and `sessions send` (the next run of a session
 * at rest, a fork included): both drive a run here, and Ctrl-C interrupts it without losing the
 * session.
 */

/** The command that continues a session at rest, with the flags this invocation used. */
export function sendHint(sessionId: string, options: CommandOptions): string {
  const agent = options.agent !== undefined ? ` --agent ${escapeLine(options.agent)}` : '';
  const label = options.location.label;
  const store = label !== DEFAULT_SQLITE_PATH ? ` --store ${escapeLine(label)}` : '';
  return cliHint(`sessions send ${escapeLine(sessionId)} "your next message"${agent}${store}`);
}

/** What a run stands still for, once it waits for someone the CLI does not speak for (`waitsForSomeone`). */
type Stall = 'approval' | 'operation' | 'budget' | 'doubt';

function stallOf(snapshot: { value: unknown; context: AgentContext }): Stall | null {
  if (!waitsForSomeone(snapshot)) return null;
  const { context } = snapshot;
  if (context.operations.waiting) return 'operation';
  if (matchesState({ Running: 'BudgetPaused' }, snapshot.value as StateValue)) return 'budget';
  return (context.doubt?.waiting.length ?? 0) > 0 ? 'doubt' : 'approval';
}

/** Resolves when the run waits for someone the CLI does not speak for. */
function stalled(session: DurableSession): Promise<Stall> {
  return new Promise((resolve) => {
    const check = (snapshot: { value: unknown; context: AgentContext }) => {
      const stall = stallOf(snapshot);
      if (stall) resolve(stall);
      return stall !== null;
    };
    if (check(session.actor.getSnapshot())) return;
    const subscription = session.actor.subscribe((snapshot) => check(snapshot) && subscription.unsubscribe());
  });
}

async function refuseStall(session: DurableSession, sessionId: string, why: Stall): Promise<never> {
  await session.flush();
  const context = session.actor.getSnapshot().context;
  if (why === 'budget') {
    throw new CliError(
      `session ${escapeLine(sessionId)}: the run is paused past a budget limit (sessions show says which); ` +
        "raise it with { type: 'budget.raise', ... } or end it with { type: 'seal' } from the application that owns the session",
    );
  }
  if (why === 'doubt') {
    const calls = context.doubt?.waiting ?? [];
    throw new CliError(
      `session ${escapeLine(sessionId)}: tool call(s) ${calls.map(escapeLine).join(', ')} were in flight when the session stopped and may or may not have run; ` +
        `decide each: ${cliHint(`sessions doubt ${escapeLine(sessionId)} ${escapeLine(calls[0] ?? 'CALL')} rerun | fail | result JSON`)}`,
    );
  }
  if (why === 'operation') {
    const waiting = context.operations.waiting!;
    throw new CliError(
      `session ${escapeLine(sessionId)}: the run waits on operation '${escapeLine(waiting.operation)}' (${escapeLine(waiting.reason)}); ` +
        `send { type: 'operation.resume', operation: '${escapeLine(waiting.operation)}', payload } from the application that owns the session`,
    );
  }
  const waiting = context.approvals.waiting.filter((id) => !Object.hasOwn(context.approvals.decisions, id));
  throw new CliError(
    `session ${escapeLine(sessionId)}: the run waits for approval of tool call(s) ${waiting.map(escapeLine).join(', ')}; ` +
      'approve or deny them from the application that owns the session (the CLI does not decide for you)',
  );
}

/**
 * Drives the session's run to its end, printing its messages as they come (`start` begins the
 * run once the printer listens), then how it ended. Ctrl-C cancels it (the session stays, at
 * rest) and prints how to go on; exit 130 then (143 for SIGTERM), 1 for Failed.
 */
async function driveRun(session: DurableSession, sessionId: string, committedBefore: number, options: CommandOptions, start?: () => void): Promise<number> {
  const { io } = options;
  const print = (message: Message, position: number) => io.out(formatMessage(message, position, { full: options.full }));
  const transcript = liveTranscript(session.actor, committedBefore, print);
  const interrupt = watchInterrupt(() => session.send({ type: 'cancel' }), io.err);
  let ended: AgentOutput | null | Stall;
  try {
    start?.();
    ended = await Promise.race([session.whenIdle(), stalled(session)]);
  } finally {
    interrupt.detach();
  }
  const replaced = transcript.finish();
  if (typeof ended === 'string') return refuseStall(session, sessionId, ended);
  const now = session.actor.getSnapshot().context;
  if (replaced.messages.length > 0) {
    io.out('as committed:');
    replaced.messages.forEach((message, i) => print(message, replaced.position + i));
  }
  io.out(`run ${now.runIndex} committed ${now.brain.context.history.length - committedBefore} message(s)`);
  const outcome = ended?.outcome ?? now.lastRun?.outcome;
  io.out(`outcome: ${outcome ? describeOutcome(outcome) : 'unknown'}`);
  if (outcome?.type === 'Cancelled') {
    io.out(`the session is kept; continue it: ${sendHint(sessionId, options)}`);
    return interrupt.pressed ? interrupt.exitCode : 1;
  }
  if (outcome?.type !== 'Failed') return 0;
  // Scripts read stderr: the cause and what to check, in one line.
  io.err(`loopchart: run ${now.runIndex} of session ${escapeLine(sessionId)} failed: ${escapeLine(outcome.error.type)}: ${escapeLine(outcome.error.message)}`);
  return 1;
}

/** `loopchart sessions resume ID`: continues the run that was in flight when the session was stored. */
export async function resumeSession(sessionId: string, options: CommandOptions): Promise<number> {
  const { io, location } = options;
  return withStore(
    options,
    async (store) => {
      const { context } = await loadSession(store, sessionId, location);
      if (!runInFlight(context.brain)) {
        io.out(`session ${escapeLine(sessionId)}: no run in flight (${describeState(context, false)}); nothing to resume`);
        io.out(`start its next run: ${sendHint(sessionId, options)}`);
        return 0;
      }
      const { machine, name } = await loadAgentMachine(options.agent, sessionId);
      io.out(`resuming session ${escapeLine(sessionId)} with ${escapeLine(name)}`);
      io.out(`state: ${describeState(context, true)}`);
      const session = await DurableSession.open({ machine, store, sessionId });
      try {
        return await driveRun(session, sessionId, context.brain.context.history.length, options);
      } finally {
        await session.close().catch(() => {});
      }
    },
    noStore(location),
  );
}

/**
 * `loopchart sessions send ID TEXT`: the next run of a session at rest (after a Completed,
 * Cancelled or Failed run, or a fork), with TEXT as the user's message and the agent `--agent`
 * names (the demo's for a demo session). A run in flight is left to `resume`.
 */
export async function sendSession(sessionId: string, text: string, options: CommandOptions): Promise<number> {
  const { io, location } = options;
  if (text.trim() === '') throw new UsageError('the message to send is empty');
  return withStore(
    options,
    async (store) => {
      const { context } = await loadSession(store, sessionId, location);
      if (runInFlight(context.brain)) {
        throw new CliError(
          `session ${escapeLine(sessionId)}: a run is in flight (${describeState(context, true)}); ` +
            `finish it first: ${cliHint(`sessions resume ${escapeLine(sessionId)}`)}`,
        );
      }
      const { machine, name } = await loadAgentMachine(options.agent, sessionId, 'send');
      io.out(`sending to session ${escapeLine(sessionId)} with ${escapeLine(name)}`);
      // resume: false: a run another process left in flight meanwhile is not driven from here.
      const session = await DurableSession.open({ machine, store, sessionId, resume: false });
      try {
        const before = session.actor.getSnapshot().context;
        if (runInFlight(before.brain)) throw new CliError(`session ${escapeLine(sessionId)}: a run is in flight; ${cliHint(`sessions resume ${escapeLine(sessionId)}`)}`);
        return await driveRun(session, sessionId, before.brain.context.history.length, options, () => session.send({ type: 'input', message: text }));
      } finally {
        await session.close().catch(() => {});
      }
    },
    noStore(location),
  );
}

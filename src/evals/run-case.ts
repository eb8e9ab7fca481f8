import { createAgentMachine } from '../../machines/agent.machine.js';
import type { AgentConfig } from '../agent/core/config.js';
import { compileAgent, type CompiledAgent } from '../agent/core/compile.js';
import { transferToolName } from '../agent/handoffs/handoffs.js';
import { inProcessExecutor } from '../agent/protocol/executor.js';
import type { AgentOutput } from '../agent/protocol/actor-types.js';
import type { AgentOutcome } from '../agent/protocol/failure.js';
import { answerWaits } from '../agent/hosts/unattended.js';
import { BUDGET_OPERATION } from '../agent/budget/budget-pause.js';
import { LoopchartError } from '../errors.js';
import type { Usage } from '../model.js';
import type { Message } from '../schemas.js';
import { DurableSession } from '../sessions/durable-session.js';
import { readSessionTrace, type TraceEntry } from '../sessions/trace.js';
import { SessionBusyError } from '../stores/errors.js';
import { MemorySessionStore } from '../stores/memory.js';
import type { SessionStore } from '../stores/session-store.js';
import type { EvalCase } from './dataset.js';
import { decisionsOf, firstDifference, type Decision, type DecisionDifference } from './decisions.js';
import { EvalCaseError } from './errors.js';
import { lastOfEach } from './record.js';
import { RunCaseOptionsSchema, checkOptions } from './options.js';
import { quarantine, type Quarantine } from './quarantine.js';
import { RecordedWorld, type ToolSourceKind } from './recorded.js';

/** The agent a case runs against: a config, or a function giving one per case (a throw fails that case only). */
export type EvalAgent = AgentConfig | ((evalCase: EvalCase) => AgentConfig | Promise<AgentConfig>);

export interface RunCaseOptions {
  /**
   * 'live' (default): the agent's model answers. 'recorded': a dry run, which calls nothing
   * (see `quarantine`): each model call answered with the recording's reply of the same run and
   * turn (a call it has none for fails the run with a ModelError saying so), each compaction and
   * guardrail with the recorded one (none recorded: the run fails with an `unrecorded …` error
   * naming it). The agent's tool policies and approval rules run: they are its decisions; so do a
   * tool source's listing and an operation hook, which no recording holds (the listing's calls are
   * still answered from the recording).
   */
  model?: 'live' | 'recorded' | undefined;
  /** Tools that run for real; every other call is answered from the recording (quarantined). */
  liveTools?: readonly string[] | undefined;
  /** The case's runs must end within this, in ms (default 120 000): past it they are cancelled and the case fails. */
  timeoutMs?: number | undefined;
  /** For a dry run (`sessions replay --against`): a recorded tool the agent no longer has is a difference to show, not a failed case. */
  allowMissingTools?: boolean | undefined;
  /**
   * A store to keep the new run's session in, trace and all, for the viewer's side-by-side page
   * (`comparePath`). Default: an in-memory store, dropped once the case is scored.
   */
  store?: SessionStore | undefined;
  /**
   * The new run's session id (default `eval-<case id>`); in a given `store` it must not exist yet.
   * The model calls' idempotency keys are made from it: give each live run of a case an id of its
   * own (as `runEval` does) when the provider honours `Idempotency-Key`, or a second run could be
   * answered from its cache of the first one's replies.
   */
  sessionId?: string | undefined;
}

/** One tool call of the new run and where its result came from. */
export interface RunToolCall {
  name: string;
  args: unknown;
  content: string;
  isError: boolean;
  source: ToolSourceKind;
}

/** What one case's new run did: what scorers read (plain JSON, stored per case in the results file). */
export interface CaseRun {
  caseId: string;
  model: 'live' | 'recorded';
  /** The last run's outcome. */
  outcome: AgentOutcome;
  /** The last run's final text ('' unless it completed). */
  text: string;
  /** The last run's structured answer as the agent's `output` schema validated it (also `outcome.output`), when it has one. */
  output?: unknown;
  /** The conversation after the last run. */
  messages: Message[];
  toolCalls: RunToolCall[];
  /** Model calls made (all runs). */
  turns: number;
  usage: Usage;
  costUsd?: number | undefined;
  /** Wall time of the runs, in ms. */
  ms: number;
  guardrails: { name: string; stage: 'input' | 'output'; verdict: string }[];
  decisions: Decision[];
  /** The first decision that differs from the recording's; null when none does; absent for a case without a recording. */
  difference?: DecisionDifference | null | undefined;
  /** The new run's session, when it was kept in a store (`RunCaseOptions.store`). */
  sessionId?: string | undefined;
  /** The session the case was recorded from (absent for a hand-written case). */
  recordedSessionId?: string | undefined;
}

const DEFAULT_TIMEOUT_MS = 120_000;

/** The seal's reason for a yield nobody in an evaluation answers: what a case's run sends, and nothing more. */
const unansweredYield = (operation: string, reason: string): string =>
  `the '${operation}' operation yielded (${reason}) and nobody answers it in an evaluation: a case's run sends only its prompts, and the budget raises its recording holds`;

/**
 * Calls the recording ran of tools the agent does not have (unknowable with tool sources: those
 * are listed at run time). The agent's tools are every tool its run may call, as the machine
 * compiles them: its own, its handoff team's and their transfer tools, its operations'.
 */
function missingTools(config: AgentConfig, have: CompiledAgent['tools'], world: RecordedWorld): string[] {
  if (config.toolSources?.length) return [];
  return [...world.toolNames()].filter((name) => !have.has(name)).sort();
}

/** The team's transfer tools: they hand the conversation over and touch nothing outside, so a case's run runs them as they are. */
function transferTools(agent: CompiledAgent): Set<string> {
  return new Set([...(agent.team?.speakers.keys() ?? [])].map(transferToolName).filter((name) => agent.tools.has(name)));
}

/**
 * Runs one case against an agent in a session of its own (in memory, with a trace), its tools
 * quarantined: each call answered from the recording (or the case's `toolResults`), a call with
 * no answer given an `unrecorded call` error result, only `liveTools` run (and a handoff team's
 * transfer tools, which touch nothing outside). Approvals are decided
 * as recorded (not recorded: denied), an operation that yields is sealed. Throws `EvalCaseError`,
 * or `EvalOptionsError` for an option out of range.
 *
 * @example
 * ```ts
 * const { cases } = await loadDataset('evals/support');
 * const run = await runCase(cases[0]!, { model, instructions: 'Be brief.', tools }, { model: 'recorded' });
 * console.log(run.outcome.type, run.difference?.step);
 * ```
 */
export async function runCase(evalCase: EvalCase, agent: EvalAgent, options: RunCaseOptions = {}): Promise<CaseRun> {
  checkOptions('runCase', RunCaseOptionsSchema, options);
  const caseId = evalCase.id;
  const mode = options.model ?? 'live';
  if (mode === 'recorded' && !evalCase.recording) throw new EvalCaseError(caseId, 'recording', 'a dry run (model: recorded) needs a recorded case; this one is hand-written');
  let config: AgentConfig;
  try {
    config = typeof agent === 'function' ? await agent(evalCase) : agent;
    if (!config || typeof config !== 'object' || !('model' in config)) throw new Error('the agent is not an AgentConfig ({ model, tools, ... })');
  } catch (error) {
    throw new EvalCaseError(caseId, 'agent', `the agent could not be had: ${messageOf(error)}`, { cause: error });
  }
  const world = new RecordedWorld(evalCase);
  let run = -1;
  let compiled: CompiledAgent;
  let q: Quarantine;
  let machine: ReturnType<typeof createAgentMachine>;
  try {
    compiled = compileAgent(config);
    q = quarantine({ caseId, world, mode, liveTools: new Set([...(options.liveTools ?? []), ...transferTools(compiled)]), inner: config.executor ?? inProcessExecutor, run: () => run });
    machine = createAgentMachine({ ...config, executor: q.executor, ...(mode === 'recorded' && { retry: false as const }) });
  } catch (error) {
    throw new EvalCaseError(caseId, 'agent', `the agent's config is refused: ${messageOf(error)}`, { cause: error });
  }
  const missing = missingTools(config, compiled.tools, world);
  if (missing.length > 0 && !options.allowMissingTools) {
    throw new EvalCaseError(caseId, 'tools', `the recording calls tools the agent no longer has: ${missing.join(', ')}`);
  }
  const store = options.store ?? new MemorySessionStore();
  const sessionId = options.sessionId ?? `eval-${caseId}`;
  const started = performance.now();
  let session: DurableSession | undefined;
  let stopAnswering = () => {};
  let last: AgentOutput | null = null;
  try {
    // Opening a stored session would resume it: a new run gets a session of its own or none. Asked
    // of the open itself (create): a look at the store first would miss a session another writer
    // makes before the open reads it, and the run would go on in that conversation.
    try {
      session = await DurableSession.open({ machine, store, sessionId, create: true, ...(evalCase.history && { history: evalCase.history }) });
    } catch (error) {
      if (!SessionBusyError.isInstance(error)) throw error;
      throw new EvalCaseError(caseId, 'run', `session '${sessionId}' already exists in the store: a new run needs a new session id`, { cause: error });
    }
    stopAnswering = answerWaits(session.actor, {
      // The request names the session's run from 1: the case's runs are this session's.
      approve: (request) =>
        world.approval({ id: request.toolCallId, name: request.toolName, args: request.args }, request.run - 1, request.turn) ?? {
          approved: false,
          reason: 'unrecorded approval: the recording has no decision for this call',
        },
      },
      // A budget's pause the host raised in the recording is raised alike (through the session, so
      // the new trace records it too); any other yield, or a pause with no raise left, is sealed,
      // here rather than by answerWaits, whose reason tells a runAgent caller what to do instead.
      ({ operation, reason, target }) => {
        const raise = operation === BUDGET_OPERATION && target === undefined ? world.raise(run) : undefined;
        if (raise) queueMicrotask(() => session?.send(raise));
        else session?.actor.send({ type: 'seal', reason: unansweredYield(operation, reason), ...(target !== undefined && { target }) });
        return true;
      },
    );
    const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    const deadline = performance.now() + timeoutMs;
    for (const prompt of evalCase.input) {
      run++;
      session.send({ type: 'input', message: prompt });
      last = await within(session, deadline - performance.now(), timeoutMs, caseId);
    }
  } catch (error) {
    if (EvalCaseError.isInstance(error)) throw error;
    throw new EvalCaseError(caseId, 'run', `the run failed: ${messageOf(error)}`, { cause: error });
  } finally {
    stopAnswering();
    await session?.close().catch(() => {});
  }
  const ms = performance.now() - started;
  const trace = (await readSessionTrace(store, sessionId)).flatMap((record) => ('entry' in record ? [record.entry] : []));
  const summary = summarize(evalCase, trace, last, session.actor.getSnapshot().context.brain.context.history, q.sources, mode, ms);
  return options.store ? { ...summary, sessionId } : summary;
}

/**
 * Waits for the session to be idle and gives the run's output, cancelling the run once `ms` (what
 * is left of the case's `timeoutMs`) has passed: then the case fails, naming its timeout.
 */
async function within(session: DurableSession, ms: number, timeoutMs: number, caseId: string): Promise<AgentOutput | null> {
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), Math.max(0, ms))));
  try {
    const idle = await Promise.race([session.whenIdle(), timedOut]);
    if (idle !== 'timeout') return idle;
    session.send({ type: 'cancel' });
    throw new EvalCaseError(caseId, 'run', `the run did not finish within the case's timeoutMs (${timeoutMs} ms): cancelled`);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The case's run as scorers read it. The outcome is the session's own (`whenIdle`), not the
 * trace's `finished` entry: the trace keeps the brain's outcome only, without the structured
 * answer (`output`) the agent validated.
 */
function summarize(
  evalCase: EvalCase,
  trace: readonly TraceEntry[],
  last: AgentOutput | null,
  messages: readonly Message[],
  sources: ReadonlyMap<string, ToolSourceKind>,
  model: 'live' | 'recorded',
  ms: number,
): CaseRun {
  const finished = trace.filter((entry): entry is Extract<TraceEntry, { type: 'finished' }> => entry.type === 'finished');
  if (!last || finished.length === 0) throw new EvalCaseError(evalCase.id, 'run', 'the session records no finished run');
  const outcome = last.outcome;
  const usage = finished.reduce((sum, entry) => ({ inputTokens: sum.inputTokens + entry.usage.inputTokens, outputTokens: sum.outputTokens + entry.usage.outputTokens }), { inputTokens: 0, outputTokens: 0 });
  const costs = finished.flatMap((entry) => (entry.costUsd === undefined ? [] : [entry.costUsd]));
  const decisions = decisionsOf(trace);
  const output = outcome.type === 'Completed' ? outcome.output : undefined;
  return {
    caseId: evalCase.id,
    model,
    outcome,
    text: outcome.type === 'Completed' ? outcome.finalText : '',
    ...(output !== undefined && { output }),
    messages: [...messages],
    toolCalls: trace.flatMap((entry) =>
      entry.type === 'tool' && entry.result
        ? [{ name: entry.call.name, args: entry.call.args, content: entry.result.content, isError: Boolean(entry.result.isError), source: sources.get(entry.call.id) ?? 'live' }]
        : [],
    ),
    turns: lastOfEach(trace).filter((entry) => entry.type === 'model').length,
    usage,
    ...(costs.length > 0 && { costUsd: costs.reduce((a, b) => a + b, 0) }),
    ms,
    guardrails: trace.flatMap((entry) => (entry.type === 'guardrail' ? [{ name: entry.name, stage: entry.stage, verdict: entry.verdict?.type ?? 'error' }] : [])),
    decisions,
    ...(evalCase.recording && { difference: firstDifference(decisionsOf(evalCase.recording.trace), decisions), recordedSessionId: evalCase.recording.sessionId }),
  };
}

const messageOf = (error: unknown): string => (LoopchartError.isInstance(error) || error instanceof Error ? error.message : String(error)).split('\n')[0]!;

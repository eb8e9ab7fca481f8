import { decide } from '../../machines/loop.machine.js';
import { conversationOf, feedBrain, freshBrain, type BrainState } from '../agent/core/brain-state.js';
import { runInFlight } from '../agent/protocol/actor-types.js';
import { logOf } from '../brain/message-log.js';
import { finishBrain, startRun } from '../agent/core/run-rules.js';
import { repetitionNote } from '../agent/repetition/repetition.js';
import { interruptedResult } from '../agent/cancel/interrupt.js';
import { keyOf, parseKey, turnOf } from '../agent/protocol/keys.js';
import { LoopchartError } from '../errors.js';
import type { LoopEvent } from '../brain/loop-events.js';
import { DEFAULT_POLICY, type Message, type Policy, type Step, type ToolMessage } from '../schemas.js';
import type { SessionStore } from '../stores/session-store.js';
import { decodeRow } from './session-row.js';
import { checkAgainstLog, checkAgainstPrompt, type ContentMismatch, type FedSinceModel } from './replay-content.js';
import { answerAsText, settleHeldReply, shownResult } from './replay-guard.js';
import { readSessionTrace, type ReadTraceEntry, type TraceEntry, type TraceEntryOf } from './trace.js';

/**
 * Deterministic replay: the brain re-run over what a session's trace recorded (model replies,
 * tool results, compaction results, the host's cancel / seal / steer events), calling nothing.
 * Each decision the brain takes is checked against the one the recording shows (a model call
 * of turn n, a tool batch with these call ids, a compaction for this reason, the run's
 * outcome); the first mismatch is reported with its step. The brain's inputs that are not
 * decisions (the context-size estimate, the policy) come from the recorded steps.
 * Content is checked too (see replay-content.ts): each recorded tool result and model reply
 * against what the next model call was given that was new (its prompt delta) and, at rest, the stored message log; a run the
 * trace starts must have a finished entry.
 */

/** The first place the replayed brain decided otherwise than the recording. */
export interface ReplayDivergence {
  /** 1-based number of the decision (the same numbering as `decisions`). */
  step: number;
  /** The trace entry where it showed (its `seq`), when one did. */
  seq?: number | undefined;
  run: number;
  expected: string;
  got: string;
  /** For a content mismatch, the field that differs, e.g. `tool result call_1_0: content`. */
  field?: string | undefined;
}

export interface ReplayReport {
  sessionId: string;
  /** The decisions checked, in order, as `describeStep` writes them. */
  decisions: string[];
  runs: number;
  divergence: ReplayDivergence | null;
  /** Wall time of the replay itself (the store reads excluded). */
  ms: number;
}

/** A step as one line: what replay compares. */
export function describeStep(step: Step): string {
  switch (step.type) {
    case 'CallLLM':
      return `CallLLM turn ${step.turn}`;
    case 'CallTools':
      return `CallTools turn ${step.turn} [${step.calls.map((pending) => pending.call.id).join(', ')}]`;
    case 'Compact':
      return `Compact ${step.reason}`;
    case 'Done':
      return `Done ${step.outcome.type}${step.outcome.type === 'Failed' ? ` ${step.outcome.error.type}` : ''}`;
  }
}

/** Where replay and recording part (`step`: the decision it concerns); thrown inside replay only, caught below. */
class Diverged {
  constructor(
    readonly step: number,
    readonly expected: string,
    readonly got: string,
    readonly field?: string,
  ) {}

  /** Expected: what the brain was fed; got: what the trace records. */
  static content(step: number, mismatch: ContentMismatch): Diverged {
    return new Diverged(step, `${mismatch.field} as the brain was fed it: ${mismatch.fed}`, `as the trace records it: ${mismatch.recorded}`, mismatch.field);
  }
}

const nothingFed = (): FedSinceModel => ({ results: new Map() });


/**
 * Re-runs the brain over a recorded trace. Pure: no store, no clock but the duration.
 *
 * @example
 * ```ts
 * const report = replayTrace('s1', await readSessionTrace(store, 's1'));
 * if (report.divergence) console.log(report.divergence.step, report.divergence.expected, report.divergence.got);
 * ```
 */
export function replayTrace(sessionId: string, trace: readonly ReadTraceEntry[], final?: BrainState): ReplayReport {
  const t0 = performance.now();
  const decisions: string[] = [];
  let runs = 0;
  let run = 0;
  let brain: BrainState | null = null;
  let policy: Policy = DEFAULT_POLICY;
  let tokens = 0;
  let currentSeq: number | undefined;
  /** Tool results of the batch in flight, by call id (a re-run after a crash overwrites). */
  let batch = new Map<string, ToolMessage>();
  const entries = lastByKey(trace);
  /** Results and the reply fed since the run's previous model call, for the next prompt to confirm. */
  let fed = nothingFed();
  /** Where the stored log was last rewritten (a compaction, a rewind): the log's tail from here is compared. */
  let logMark = 0;
  /** The run the trace started and has not finished. */
  let open: number | null = null;
  /** A reply that would complete the run, held (as the driver holds it) until its guardrail verdicts are read. */
  let held: { event: LoopEvent; what: string; check: string | null; verdicts: TraceEntryOf<'guardrail'>[] } | null = null;

  const report = (divergence: ReplayDivergence | null): ReplayReport => ({
    sessionId,
    decisions,
    runs,
    divergence,
    ms: performance.now() - t0,
  });
  const checkContent = (mismatch: ContentMismatch | null) => {
    if (mismatch) throw Diverged.content(Math.max(1, decisions.length), mismatch);
  };
  const feed = (event: LoopEvent, what: string) => {
    try {
      brain = feedBrain(brain!, event);
    } catch (error) {
      throw new Diverged(Math.max(1, decisions.length), what, `the brain refused it: ${(error as Error).message}`);
    }
  };
  /** The brain's next decision, checked against what the recording shows next. */
  const decideAndCheck = (expected: (got: Step) => string | null, recorded: string) => {
    if (!brain) throw new Diverged(decisions.length + 1, recorded, 'no run had started');
    if (brain.value !== 'Terminal') feed({ type: 'setContextTokens', tokens }, recorded);
    const decision = decide(brain.value, brain.context, policy);
    const step = decision.step(brain.context);
    const got = describeStep(step);
    decisions.push(got);
    const mismatch = expected(step);
    if (mismatch !== null) throw new Diverged(decisions.length, mismatch, got);
    // As the driver's takeStep: a decision that moves nothing (a batch to run, the outcome) is not fed.
    if (decision.target) feed({ type: 'next', policy }, recorded);
    return step;
  };
  /**
   * A tool batch ends when its results are fed: at the next decision after it. A call the trace
   * holds no result for (a tool policy denied it) takes the result the next model call was given.
   */
  const settleTools = (prompt: readonly Message[] = []) => {
    while (brain && brain.value === 'AwaitingTools') {
      decideAndCheck((step) => (step.type === 'CallTools' ? null : 'CallTools (a batch was in flight)'), 'CallTools');
      const results = brain.context.pendingTools.map(
        ({ call, preAnswered }) =>
          batch.get(call.id) ??
          preAnswered ??
          shownResult(prompt, call.id) ?? { role: 'tool' as const, toolCallId: call.id, toolName: call.name, content: '(no result recorded: denied or not run)', isError: true },
      );
      for (const [id, result] of batch) fed.results.set(id, result);
      batch = new Map();
      feed({ type: 'toolResults', messages: results }, 'the batch results');
    }
  };

  /** The held reply once its verdicts are in: fed, with the feedback steered in first as the driver does, or dropped by a trip. */
  const settleHeld = (next: TraceEntry | null) => {
    if (!held) return;
    const { event, what, verdicts } = held;
    held = null;
    const outcome = settleHeldReply(verdicts, next);
    if (outcome.type === 'feedback') feed({ type: 'steer', message: outcome.message }, 'the guardrail feedback');
    if (outcome.type !== 'stopped') feed(event, what);
  };

  try {
    for (const record of entries) {
      currentSeq = record.seq;
      if ('invalid' in record) throw new Diverged(decisions.length + 1, 'a readable trace entry', `entry ${record.seq} is invalid: ${record.invalid}`);
      const entry = record.entry;
      if (held && entry.type === 'guardrail' && entry.check === held.check) {
        held.verdicts.push(entry);
        continue;
      }
      if (entry.type !== 'step') settleHeld(entry);
      switch (entry.type) {
        case 'step':
          tokens = entry.tokens;
          policy = entry.policy;
          break;
        case 'resumed':
          tokens = entry.tokens;
          if (brain && brain.context.turnsTaken !== entry.turns) {
            throw new Diverged(decisions.length + 1, `${entry.turns} turns taken when the run resumed`, `${brain.context.turnsTaken} turns taken`);
          }
          break;
        case 'run': {
          if (open !== null) throw new Diverged(decisions.length + 1, `a finished entry for run ${open}`, `run ${entry.run} started without one`, 'finished');
          if (brain && brain.value !== 'Terminal' && brain.context.pending.length > 0) {
            throw new Diverged(decisions.length + 1, `run ${entry.run} starts after run ${run} ended`, `run ${run} still in ${brain.value}`);
          }
          runs++;
          run = entry.run;
          open = entry.run;
          policy = entry.policy;
          brain = startRun(brain ?? freshBrain(), { role: 'user', content: entry.prompt }, []);
          batch = new Map();
          fed = nothingFed();
          break;
        }
        case 'model': {
          settleTools(entry.promptDelta);
          const label = `CallLLM turn ${entry.turn}`;
          decideAndCheck((step) => (step.type === 'CallLLM' && step.turn === entry.turn ? null : label), label);
          checkContent(checkAgainstPrompt(fed, entry.promptDelta));
          const reply = entry.reply && answerAsText(entry.reply, entry.tools);
          fed = { results: new Map(), ...(reply && { reply: { turn: entry.turn, message: reply.message } }) };
          if (reply) {
            const { message, finishReason } = reply;
            const event: LoopEvent = {
              type: 'modelResponse',
              response: message,
              contextTokens: tokens,
              availableTools: entry.tools,
              ...(finishReason && finishReason !== 'stop' && { finishReason: finishReason as never }),
            };
            const what = `the reply of turn ${entry.turn}`;
            if (message.toolCalls?.length) feed(event, what);
            else held = { event, what, check: outputCheckOf(sessionId, entry.key), verdicts: [] };
          } else {
            feed({ type: 'fail', error: { type: 'ModelError', message: entry.error?.message ?? 'model call failed' } }, 'the model error');
          }
          break;
        }
        case 'tool': {
          if (brain?.value !== 'AwaitingTools' || !brain.context.pendingTools.some((pending) => pending.call.id === entry.call.id)) {
            const got = brain ? describeStep(decide(brain.value, brain.context, policy).step(brain.context)) : 'no run';
            throw new Diverged(decisions.length + 1, `CallTools turn ${entry.turn} with call ${entry.call.id}`, got);
          }
          if (entry.result) batch.set(entry.call.id, entry.result);
          break;
        }
        case 'compaction': {
          settleTools();
          const label = `Compact ${entry.reason}`;
          decideAndCheck((step) => (step.type === 'Compact' && step.reason === entry.reason ? null : label), label);
          if (entry.error) {
            feed({ type: 'fail', error: { type: 'CompactionError', message: entry.error.message } }, 'the compaction error');
          } else {
            const contextWindow = policy.contextWindow;
            const current = brain!.context;
            feed(
              entry.rewritten
                ? { type: 'compactionResult', compacted: logOf(current).toArray(), before: entry.before, after: entry.after, contextWindow }
                : { type: 'compactionNoop', before: entry.before, after: entry.after, contextWindow },
              `the compaction of turn ${entry.turn}`,
            );
            // A rewritten log holds the compactor's messages, which the trace does not record.
            if (entry.rewritten) {
              fed = nothingFed();
              logMark = logOf(brain!.context).length;
            }
          }
          break;
        }
        // The batch was answered with notes, not run: the notes are its results (the same pure rule as the driver's).
        case 'repetition':
          for (const call of entry.calls) batch.set(call.id, repetitionNote(call, entry.times));
          break;
        case 'event':
          if (brain) applyHostEvent(entry, feed);
          if (brain && entry.event.type === 'rewind') logMark = logOf(brain.context).length;
          break;
        case 'finished': {
          // Cancel, seal and failures come from outside the brain: fed as recorded, then checked.
          const { outcome } = entry;
          if (brain && brain.value !== 'Terminal') {
            if (outcome.type === 'Cancelled') feed({ type: 'cancel' }, 'the cancel');
            else if (outcome.type === 'Sealed') {
              // As the driver seals: a batch in flight is fed first, its calls without a result interrupted.
              if (brain.value === 'AwaitingTools') {
                const pending = brain.context.pendingTools;
                const results = pending.map(({ call, preAnswered }) => batch.get(call.id) ?? preAnswered ?? interruptedResult(call));
                // Interrupted calls are not calls made (the driver's interruptBatch): the counts agree.
                const unfinished = pending.flatMap(({ call, preAnswered }) => (batch.has(call.id) || preAnswered ? [] : [call.id]));
                feed({ type: 'toolResults', messages: results, unfinished }, 'the sealed batch');
              }
              feed({ type: 'seal', reason: outcome.reason }, 'the seal');
            }
            else if (outcome.type === 'Failed' && outcome.error.type !== 'CompactionStalled') feed({ type: 'fail', error: outcome.error }, 'the failure');
          }
          settleTools();
          const label = `Done ${outcome.type}${outcome.type === 'Failed' ? ` ${outcome.error.type}` : ''}`;
          decideAndCheck((step) => (describeStep(step) === label ? null : label), label);
          brain = finishBrain(brain!);
          open = null;
          break;
        }
        default:
          break;
      }
    }
    currentSeq = undefined;
    settleHeld(null);
    if (final && brain && atRest(final)) {
      if (open !== null) throw new Diverged(decisions.length + 1, `a finished entry for run ${open} (the session is at rest)`, 'the trace ends without one', 'finished');
      checkFinal(brain, final, decisions.length + 1);
      const mismatch = checkAgainstLog(logOf(brain.context).tail(logMark), conversationOf(final));
      if (mismatch) throw Diverged.content(decisions.length, mismatch);
    }
  } catch (error) {
    if (!(error instanceof Diverged)) throw error;
    return report({
      step: error.step,
      ...(currentSeq !== undefined && { seq: currentSeq }),
      run,
      expected: error.expected,
      got: error.got,
      ...(error.field !== undefined && { field: error.field }),
    });
  }
  return report(null);
}

/** A host event that moves the brain, fed as it was sent (a policy change reaches replay through the recorded steps). */
function applyHostEvent(entry: TraceEntryOf<'event'>, feed: (event: LoopEvent, what: string) => void) {
  const event = entry.event as { type?: unknown; message?: unknown; reason?: unknown; policy?: unknown };
  if (event.type === 'cancel') feed({ type: 'cancel' }, 'the cancel');
  else if (event.type === 'steer' && (typeof event.message === 'string' || typeof event.message === 'object')) {
    const message = typeof event.message === 'string' ? { role: 'user' as const, content: event.message } : (event.message as { role: 'user'; content: string });
    feed({ type: 'steer', message }, 'the steering message');
  }
}

/** A session with no run in flight: its stored state is where a replay must end. */
const atRest = (final: BrainState): boolean => !runInFlight(final);

/** The output guardrail check of a recorded model call's reply (null for a key the session's driver did not make). */
function outputCheckOf(sessionId: string, modelKey: string): string | null {
  const parts = parseKey(modelKey, sessionId);
  return parts?.kind === 'model' ? keyOf({ ...turnOf(parts), kind: 'guardCheck', stage: 'output' }) : null;
}

/** The stored state must be where the replay ended (when the session is at rest). */
function checkFinal(brain: BrainState, final: BrainState, step: number) {
  const summary = (b: BrainState) =>
    `${b.value}, ${b.context.turnsTaken} turns, ${b.context.totalToolCalls} tool calls${b.context.outcome ? `, ${JSON.stringify(b.context.outcome)}` : ''}`;
  if (summary(brain) !== summary(final)) throw new Diverged(step, `the stored state: ${summary(final)}`, summary(brain));
}

/**
 * An entry repeated after a crash (recorded, the step that used it not stored: an effect's
 * result, a run's start, its end) appears twice: the later one is what the run used.
 */
function lastByKey(trace: readonly ReadTraceEntry[]): ReadTraceEntry[] {
  const last = new Map<string, number>();
  trace.forEach((record, i) => {
    const key = effectKey(record);
    if (key !== null) last.set(key, i);
  });
  return trace.filter((record, i) => {
    const key = effectKey(record);
    return key === null || last.get(key) === i;
  });
}

function effectKey(record: ReadTraceEntry): string | null {
  if (!('entry' in record)) return null;
  const entry: TraceEntry = record.entry;
  if (entry.type === 'model' || entry.type === 'compaction') return `${entry.type}:${entry.key}`;
  if (entry.type === 'tool') return `tool:${entry.key}`;
  // Recorded ahead of the step that stores them: a crash in between repeats them.
  if (entry.type === 'run' || entry.type === 'finished') return `${entry.type}:${entry.run}`;
  return null;
}

/**
 * The session cannot be replayed: it does not exist, or the store or session has no trace.
 *
 * @example
 * ```ts
 * try { await replaySession(store, 'a'); } catch (e) { if (ReplayUnavailableError.isInstance(e)) console.error(e.message); }
 * ```
 */
export class ReplayUnavailableError extends LoopchartError {
  readonly sessionId: string;
  constructor(sessionId: string, problem: string) {
    super('ReplayUnavailable', `session '${sessionId}': ${problem}`);
    this.sessionId = sessionId;
  }
}

/**
 * Replays a stored session (see `replayTrace`) and checks the end state against its state row.
 *
 * @example
 * ```ts
 * const report = await replaySession(store, 'support-42');
 * console.log(report.divergence ?? `${report.decisions.length} decisions, no divergence`);
 * ```
 */
export async function replaySession(store: SessionStore, sessionId: string): Promise<ReplayReport> {
  const stored = await store.load(sessionId);
  if (!stored) throw new ReplayUnavailableError(sessionId, 'no such session');
  if (!store.readTrace) throw new ReplayUnavailableError(sessionId, 'this store keeps no trace');
  const context = decodeRow(sessionId, stored.state, stored.messages);
  const trace = await readSessionTrace(store, sessionId);
  if (!trace.some((record) => 'entry' in record && record.entry.type === 'run')) {
    throw new ReplayUnavailableError(sessionId, 'its trace records no run (made by a loopchart without traces, or never run)');
  }
  return replayTrace(sessionId, trace, context.brain);
}

import { decide } from '../../machines/loop.machine.js';
import { conversationOf, feedBrain, freshBrain, type BrainState } from '../agent/core/brain-state.js';
import { runInFlight } from '../agent/protocol/actor-types.js';
import { logOf } from '../brain/message-log.js';
import { finishBrain, startRun } from '../agent/core/run-rules.js';
import { repetitionNote } from '../agent/repetition/repetition.js';
import { interruptedResult, isInterruptedResult, type RunStop } from '../tools/run-tools.js';
import { keyOf, parseKey, turnOf } from '../agent/protocol/keys.js';
import { LoopchartError } from '../errors.js';
import type { LoopEvent } from '../brain/loop-events.js';
import { DEFAULT_POLICY, type Message, type Policy, type StateName, type Step, type ToolCall, type ToolMessage } from '../schemas.js';
import type { SessionStore } from '../stores/session-store.js';
import { decodeRow } from './session-row.js';
import { checkAgainstLog, checkAgainstPrompt, type ContentMismatch, type FedSinceModel } from './replay-content.js';
import { answerAsText, outputFeedbackIn, settleHeldReply, shownResult } from './replay-guard.js';
import { finalCallOutcome, finalCallRequestIn, finalReplyAsText, type ReplayedFinalCall } from './replay-final-call.js';
import { finalCallPolicy } from '../agent/structured-output/structured-output.js';
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
  const replay = new Replay(sessionId);
  let currentSeq: number | undefined;
  const report = (divergence: ReplayDivergence | null): ReplayReport => ({
    sessionId,
    decisions: replay.decisions,
    runs: replay.runs,
    divergence,
    ms: performance.now() - t0,
  });
  try {
    for (const record of lastByKey(trace)) {
      currentSeq = record.seq;
      if ('invalid' in record) throw new Diverged(replay.decisions.length + 1, 'a readable trace entry', `entry ${record.seq} is invalid: ${record.invalid}`);
      replay.take(record.entry);
    }
    currentSeq = undefined;
    replay.end(final);
  } catch (error) {
    if (!(error instanceof Diverged)) throw error;
    return report({
      step: error.step,
      ...(currentSeq !== undefined && { seq: currentSeq }),
      run: replay.run,
      expected: error.expected,
      got: error.got,
      ...(error.field !== undefined && { field: error.field }),
    });
  }
  return report(null);
}

/** What replay holds while it walks a trace, and the moves every entry kind shares. */
class Replay {
  readonly decisions: string[] = [];
  runs = 0;
  run = 0;
  brain: BrainState | null = null;
  policy: Policy = DEFAULT_POLICY;
  tokens = 0;
  /** Tool results of the batch in flight, by call id (a re-run after a crash overwrites). */
  batch = new Map<string, ToolMessage>();
  /** Calls of the run answered interrupted when their batch was cut: an aborted call records its result after the run went on. */
  interrupted = new Set<string>();
  /** Results and the reply fed since the run's previous model call, for the next prompt to confirm. */
  fed = nothingFed();
  /** Where the stored log was last rewritten (a compaction, a rewind): the log's tail from here is compared. */
  logMark = 0;
  /** The run the trace started and has not finished. */
  open: number | null = null;
  /** A reply that would complete the run, held (as the driver holds it) until its guardrail verdicts are read. */
  held: { event: LoopEvent; what: string; check: string | null; verdicts: TraceEntryOf<'guardrail'>[] } | null = null;
  /** The run's final call for a structured answer, once it began (replay-final-call.ts). */
  finalCall: ReplayedFinalCall | null = null;
  /** The brain's state as the last stored step recorded it: where the driver was when the entries after it happened. */
  recordedState: StateName | null = null;
  /**
   * Host events sent while the driver waited in a state replay reaches only at a later entry (a
   * model call, a compaction: replay ends a batch at the next decision), fed once it is there.
   */
  deferred: { until: StateName; entries: TraceEntryOf<'event'>[] } | null = null;

  constructor(readonly sessionId: string) {}

  /** One entry: a verdict of the held reply joins it; any other entry settles that reply first, then its kind's handler. */
  take(entry: TraceEntry): void {
    if (this.held && entry.type === 'guardrail' && entry.check === this.held.check) {
      this.held.verdicts.push(entry);
      return;
    }
    if (entry.type !== 'step') this.settleHeld(entry);
    if (entry.type === 'finished' || entry.type === 'run') this.feedDeferred();
    const handle = ENTRY_HANDLERS[entry.type] as ((replay: Replay, entry: TraceEntry) => void) | undefined;
    handle?.(this, entry);
  }

  /** The trace is read: a held reply is settled, and a session at rest must be where replay ended. */
  end(final: BrainState | undefined): void {
    this.settleHeld(null);
    this.feedDeferred();
    const { brain } = this;
    if (!final || !brain || !atRest(final)) return;
    if (this.open !== null) throw new Diverged(this.decisions.length + 1, `a finished entry for run ${this.open} (the session is at rest)`, 'the trace ends without one', 'finished');
    checkFinal(brain, final, this.decisions.length + 1);
    const mismatch = checkAgainstLog(logOf(brain.context).tail(this.logMark), conversationOf(final));
    if (mismatch) throw Diverged.content(this.decisions.length, mismatch);
  }

  checkContent(mismatch: ContentMismatch | null): void {
    if (mismatch) throw Diverged.content(Math.max(1, this.decisions.length), mismatch);
  }

  readonly feed = (event: LoopEvent, what: string): void => {
    try {
      this.brain = feedBrain(this.brain!, event);
    } catch (error) {
      throw new Diverged(Math.max(1, this.decisions.length), what, `the brain refused it: ${(error as Error).message}`);
    }
  };

  /** The brain's next decision, checked against what the recording shows next. */
  decideAndCheck(expected: (got: Step) => string | null, recorded: string): Step {
    const { brain } = this;
    if (!brain) throw new Diverged(this.decisions.length + 1, recorded, 'no run had started');
    if (brain.value !== 'Terminal') this.feed({ type: 'setContextTokens', tokens: this.tokens }, recorded);
    const policy = this.decisionPolicy();
    const decision = decide(this.brain!.value, this.brain!.context, policy);
    const step = decision.step(this.brain!.context);
    const got = describeStep(step);
    this.decisions.push(got);
    const mismatch = expected(step);
    if (mismatch !== null) throw new Diverged(this.decisions.length, mismatch, got);
    // As the driver's takeStep: a decision that moves nothing (a batch to run, the outcome) is not fed.
    if (decision.target) this.feed({ type: 'next', policy }, recorded);
    if (this.deferred && this.brain!.value === this.deferred.until) this.feedDeferred();
    return step;
  }

  /** A host event as the driver took it: held while the driver was where replay has not come yet (see `deferred`). */
  hostEvent(entry: TraceEntryOf<'event'>): void {
    const { brain, recordedState: until } = this;
    if (!brain) return;
    // A steer queued in that wait is delivered after it; fed now, it would join the conversation before.
    const ahead = entry.event.type === 'steer' && (until === 'AwaitingModel' || until === 'AwaitingCompaction') && brain.value !== until;
    if (this.deferred || ahead) {
      (this.deferred ??= { until: until as StateName, entries: [] }).entries.push(entry);
      return;
    }
    applyHostEvent(entry, this.feed);
    if (entry.event.type === 'rewind') this.logMark = logOf(brain.context).length;
  }

  /** The held host events, fed in the order they were sent. */
  feedDeferred(): void {
    const entries = this.deferred?.entries ?? [];
    this.deferred = null;
    for (const entry of entries) this.hostEvent(entry);
  }

  /** The policy the brain decides with, as the driver's `decisionPolicy`: the final call may take a turn past the limit. */
  decisionPolicy(): Policy {
    return this.finalCall ? finalCallPolicy(this.policy, { rejected: 0, finalCall: this.finalCall.state }) : this.policy;
  }

  /**
   * The final call the model call's prompt shows began (see replay-final-call.ts), as the driver
   * began it between two steps: the batch before it settled (cut by the time budget, for a budget's
   * final call: its calls without a result interrupted), then the request joins the conversation.
   */
  beginFinalCall(request: NonNullable<ReturnType<typeof finalCallRequestIn>>, turn: number, prompt: readonly Message[]): void {
    this.settleTools(prompt, request.outcome.type === 'Sealed');
    const { brain } = this;
    const why = request.outcome.type === 'Sealed' ? `its budget (${request.outcome.reason})` : 'the turn limit';
    const expected = `a final call (turn ${turn}) asking for the answer at ${why}`;
    if (!brain || brain.value !== 'Start') throw new Diverged(this.decisions.length + 1, expected, brain ? `the brain in ${brain.value}` : 'no run had started');
    // Ending by maxTurns is the brain's own decision: it must be the one it takes here.
    const ending = decide(brain.value, brain.context, this.policy);
    if (request.outcome.type === 'MaxTurnsExceeded' && ending.action !== 'concludeMaxTurns') {
      throw new Diverged(this.decisions.length + 1, expected, describeStep(ending.step(brain.context)));
    }
    this.feed({ type: 'inject', message: request.message }, "the final call's request");
    this.finalCall = { state: { turn: brain.context.turnsTaken, outcome: request.outcome }, mode: request.mode };
  }

  /**
   * A tool batch ends when its results are fed: at the next decision after it. A call the trace
   * holds no result for (a tool policy denied it) takes the result the next model call was given.
   */
  settleTools(prompt: readonly Message[] = [], cut = false): void {
    while (this.brain && this.brain.value === 'AwaitingTools') {
      this.decideAndCheck((step) => (step.type === 'CallTools' ? null : 'CallTools (a batch was in flight)'), 'CallTools');
      const { messages, unfinished } = batchAsFed(this.brain.context.pendingTools, this.batch, prompt, cut);
      for (const id of unfinished) this.interrupted.add(id);
      // A cut batch's results are the ones the prompt shows, not the ones its calls recorded later.
      if (!cut) for (const [id, result] of this.batch) this.fed.results.set(id, result);
      this.batch = new Map();
      this.feed({ type: 'toolResults', messages, ...(cut && { unfinished }) }, cut ? 'the batch the time budget cut' : 'the batch results');
    }
  }

  /** The held reply once its verdicts are in: fed, with the feedback steered in first as the driver does, or dropped by a trip. */
  settleHeld(next: TraceEntry | null): void {
    if (!this.held) return;
    const { event, what, verdicts } = this.held;
    this.held = null;
    const outcome = settleHeldReply(verdicts, next);
    if (outcome.type === 'feedback') this.feed({ type: 'steer', message: outcome.message }, 'the guardrail feedback');
    // An answer the output schema refused goes back the same way: its feedback steered in first.
    const refused = outcome.type === 'apply' ? outputFeedbackIn(next, this.run) : undefined;
    if (refused) this.feed({ type: 'steer', message: refused }, 'the output schema feedback');
    if (outcome.type !== 'stopped') this.feed(event, what);
    // Refused once more than `outputRetries` allow: the driver ends the run with the failure, not the answer (`settleAnswer`).
    const failed = outcome.type === 'apply' && next?.type === 'finished' && next.outcome.type === 'Failed' && next.outcome.error.type === 'StructuredOutputError';
    if (failed && this.brain) this.brain = { value: 'Terminal', context: { ...this.brain.context, outcome: next.outcome } };
  }
}

/** What each kind of trace entry does to the replay; a kind without a handler changes nothing. */
const ENTRY_HANDLERS: { [K in TraceEntry['type']]?: (replay: Replay, entry: TraceEntryOf<K>) => void } = {
  step(replay, entry) {
    replay.tokens = entry.tokens;
    replay.policy = entry.policy;
    replay.recordedState = entry.state;
  },
  resumed(replay, entry) {
    replay.tokens = entry.tokens;
    const { brain } = replay;
    if (brain && brain.context.turnsTaken !== entry.turns) {
      throw new Diverged(replay.decisions.length + 1, `${entry.turns} turns taken when the run resumed`, `${brain.context.turnsTaken} turns taken`);
    }
  },
  run(replay, entry) {
    if (replay.open !== null) throw new Diverged(replay.decisions.length + 1, `a finished entry for run ${replay.open}`, `run ${entry.run} started without one`, 'finished');
    const { brain } = replay;
    if (brain && brain.value !== 'Terminal' && brain.context.pending.length > 0) {
      throw new Diverged(replay.decisions.length + 1, `run ${entry.run} starts after run ${replay.run} ended`, `run ${replay.run} still in ${brain.value}`);
    }
    replay.runs++;
    replay.run = entry.run;
    replay.open = entry.run;
    replay.policy = entry.policy;
    replay.brain = startRun(brain ?? freshBrain(), { role: 'user', content: entry.prompt }, []);
    replay.batch = new Map();
    replay.fed = nothingFed();
    replay.finalCall = null;
    replay.interrupted = new Set();
  },
  model(replay, entry) {
    const request = replay.finalCall ? null : finalCallRequestIn(entry.promptDelta);
    if (request) replay.beginFinalCall(request, entry.turn, entry.promptDelta);
    else replay.settleTools(entry.promptDelta);
    const label = `CallLLM turn ${entry.turn}`;
    replay.decideAndCheck((step) => (step.type === 'CallLLM' && step.turn === entry.turn ? null : label), label);
    replay.checkContent(checkAgainstPrompt(replay.fed, entry.promptDelta));
    const { finalCall } = replay;
    const reply = entry.reply && (finalCall ? finalReplyAsText(entry.reply, finalCall.mode) : answerAsText(entry.reply, entry.tools));
    if (finalCall && reply) finalCall.answer = reply.message.content;
    replay.fed = { results: new Map(), ...(reply && { reply: { turn: entry.turn, message: reply.message } }) };
    if (!reply) {
      replay.feed({ type: 'fail', error: { type: 'ModelError', message: entry.error?.message ?? 'model call failed' } }, 'the model error');
      return;
    }
    const { message, finishReason } = reply;
    const event: LoopEvent = {
      type: 'modelResponse',
      response: message,
      contextTokens: replay.tokens,
      availableTools: entry.tools,
      ...(finishReason && finishReason !== 'stop' && { finishReason: finishReason as never }),
    };
    const what = `the reply of turn ${entry.turn}`;
    if (message.toolCalls?.length) replay.feed(event, what);
    else replay.held = { event, what, check: outputCheckOf(replay.sessionId, entry.key), verdicts: [] };
  },
  tool(replay, entry) {
    const { brain } = replay;
    if (brain?.value !== 'AwaitingTools' || !brain.context.pendingTools.some((pending) => pending.call.id === entry.call.id)) {
      if (replay.interrupted.has(entry.call.id)) return;
      const got = brain ? describeStep(decide(brain.value, brain.context, replay.decisionPolicy()).step(brain.context)) : 'no run';
      throw new Diverged(replay.decisions.length + 1, `CallTools turn ${entry.turn} with call ${entry.call.id}`, got);
    }
    if (entry.result) replay.batch.set(entry.call.id, entry.result);
  },
  compaction(replay, entry) {
    replay.settleTools();
    const label = `Compact ${entry.reason}`;
    replay.decideAndCheck((step) => (step.type === 'Compact' && step.reason === entry.reason ? null : label), label);
    if (entry.error) {
      replay.feed({ type: 'fail', error: { type: 'CompactionError', message: entry.error.message } }, 'the compaction error');
      return;
    }
    const contextWindow = replay.policy.contextWindow;
    const current = replay.brain!.context;
    replay.feed(
      entry.rewritten
        ? { type: 'compactionResult', compacted: logOf(current).toArray(), before: entry.before, after: entry.after, contextWindow }
        : { type: 'compactionNoop', before: entry.before, after: entry.after, contextWindow },
      `the compaction of turn ${entry.turn}`,
    );
    // A rewritten log holds the compactor's messages, which the trace does not record.
    if (entry.rewritten) {
      replay.fed = nothingFed();
      replay.logMark = logOf(replay.brain!.context).length;
    }
  },
  // The batch was answered with notes, not run: the notes are its results (the same pure rule as the driver's).
  repetition(replay, entry) {
    for (const call of entry.calls) replay.batch.set(call.id, repetitionNote(call, entry.times));
  },
  event(replay, entry) {
    replay.hostEvent(entry);
  },
  finished(replay, entry) {
    // Cancel, seal and failures come from outside the brain: fed as recorded, then checked.
    const { outcome } = entry;
    const { brain, finalCall } = replay;
    // The final call's reply settled the run beyond the brain (an answer refused, a steer overruled): as recorded.
    const settled = brain && finalCall && finalCallOutcome(finalCall, outcome, brain);
    if (settled) replay.brain = { value: 'Terminal', context: { ...brain.context, outcome: settled } };
    else if (brain && brain.value !== 'Terminal') {
      if (outcome.type === 'Cancelled') endAsRecorded(replay, { type: 'cancel' }, 'the cancel');
      else if (outcome.type === 'Sealed') endAsRecorded(replay, { type: 'seal', reason: outcome.reason }, 'the seal');
      else if (outcome.type === 'Failed' && outcome.error.type !== 'CompactionStalled') replay.feed({ type: 'fail', error: outcome.error }, 'the failure');
    }
    replay.settleTools();
    const label = `Done ${outcome.type}${outcome.type === 'Failed' ? ` ${outcome.error.type}` : ''}`;
    replay.decideAndCheck((step) => (describeStep(step) === label ? null : label), label);
    replay.brain = finishBrain(replay.brain!);
    replay.open = null;
  },
};

/**
 * As the driver ends a run mid-step (`endRun`) by a seal or a cancel: a batch in flight is fed
 * first, its calls without a result interrupted (not counted as calls made), then the end itself.
 */
function endAsRecorded(replay: Replay, end: LoopEvent, what: string): void {
  const { brain } = replay;
  if (brain?.value === 'AwaitingTools') {
    const stop: RunStop = end.type === 'seal' ? { type: 'stopped', reason: end.reason } : { type: 'cancelled' };
    const { messages, unfinished } = batchAsFed(brain.context.pendingTools, replay.batch, [], true, stop);
    for (const id of unfinished) replay.interrupted.add(id);
    replay.batch = new Map();
    replay.feed({ type: 'toolResults', messages, unfinished }, `the batch ${what} cut`);
  }
  replay.feed(end, what);
}

const noResultRecorded = (call: ToolCall): ToolMessage => ({ role: 'tool', toolCallId: call.id, toolName: call.name, content: '(no result recorded: denied or not run)', isError: true });

/**
 * A batch's results as the brain was fed them. A batch that ended: the recorded result, the one
 * the brain answered itself, the one the next model call was given (a tool policy's denial), else
 * none. A batch `cut` (a seal, the time budget before a final call): the one the next model call
 * was given first (a call aborted by the cut records its result after the run went on), and a call
 * with none is answered interrupted. `unfinished`: the calls answered interrupted, never run to
 * the end (not counted as calls made).
 */
function batchAsFed(
  pending: BrainState['context']['pendingTools'],
  recorded: ReadonlyMap<string, ToolMessage>,
  prompt: readonly Message[],
  cut: boolean,
  stop: RunStop = { type: 'cancelled' },
): { messages: ToolMessage[]; unfinished: string[] } {
  const unfinished: string[] = [];
  const messages = pending.map(({ call, preAnswered }) => {
    if (!cut) return recorded.get(call.id) ?? preAnswered ?? shownResult(prompt, call.id) ?? noResultRecorded(call);
    if (preAnswered) return preAnswered;
    // A call with no result recorded had not started, as far as the trace tells (a call aborted by the cut records its end later).
    const result = shownResult(prompt, call.id) ?? recorded.get(call.id) ?? interruptedResult(call, stop, false);
    if (isInterruptedResult(result)) unfinished.push(call.id);
    return result;
  });
  return { messages, unfinished };
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

import { decisionFor, deniedResult, isInDoubt, isWaiting, type Approvals, type DoubtState } from './call-decisions.js';
import { conversationOf, feedBrain, feedOrFail, pendingCalls, restingBrain, type BrainState } from './brain-state.js';
import { logOf } from '../../brain/message-log.js';
import { objectSlot } from '../../object-slot.js';
import { interruptedResult, type RunStop } from '../../tools/run-tools.js';
import type { ModelReply, ToolDefinition, Usage } from '../../model.js';
import type { Message, Outcome, Policy, ToolCall, ToolMessage, UserMessage } from '../../schemas.js';
import { estimateTokens, estimateToolTokens } from '../../tokens.js';
import type { SideEffectOutputs } from '../protocol/executor.js';
import { calibrated, conversationTokens, messagesTokens, rememberAppend, requestTokens } from './request-size.js';
import type { Failure, FailureType } from '../protocol/failure.js';

/**
 * The driver's rules as pure functions over its state: what a reply, a tool result, a
 * compaction or the end of a run does to the brain and the counters. The chart calls them from
 * one-line actions; they read nothing else and change nothing they are given: every snapshot
 * the driver hands out stays a value.
 */

/** The part of the driver's state the rules read. */
export interface RunState {
  brain: BrainState;
  /** Results of the current tool batch that have arrived, in arrival order. */
  toolJournal: readonly ToolMessage[];
  approvals: Approvals;
  runUsage: Usage;
  sessionUsage: Usage;
  /** Tokens of the instructions and prompt parts the brain's estimate counts (the last call's). */
  extrasTokens: number;
}

export const NO_USAGE: Usage = { inputTokens: 0, outputTokens: 0 };
export const addUsage = (a: Usage, b: Usage | undefined): Usage =>
  b ? { inputTokens: a.inputTokens + b.inputTokens, outputTokens: a.outputTokens + b.outputTokens } : a;

export const asUserMessage = (message: string | UserMessage): UserMessage =>
  typeof message === 'string' ? { role: 'user', content: message } : message;

/**
 * A new run over the committed conversation, with the estimate refreshed: the last estimate
 * plus the new message when it measured exactly that conversation (the last run Completed: its
 * every message was committed), else the whole request measured afresh (with the system parts
 * the estimate is known to count, `extrasTokens`). A run that ended another way discarded its
 * messages (Failed) or what was unanswered (salvaged): its estimate counts them, and an input
 * too big for the window would otherwise fail every later run of the session with it.
 */
export function startRun(previous: BrainState, message: UserMessage, tools: readonly ToolDefinition[], extrasTokens = 0): BrainState {
  const brain = feedBrain(restingBrain(previous), { type: 'acceptInput', message });
  const measuredKept = previous.value === 'Terminal' && previous.context.outcome?.type === 'Completed';
  const anchor = measuredKept ? previous.context.contextTokens : 0;
  // The anchor measured a whole request (its reply priming included): the prompt adds its own tokens only.
  const tokens = anchor > 0 ? anchor + messagesTokens([message]) : requestTokens({ system: extrasTokens, messages: conversationOf(brain), tools });
  return feedBrain(brain, { type: 'setContextTokens', tokens });
}

/**
 * A model reply fed to the brain. The context size is the measure of the request that was sent
 * (instructions and prompt parts included) plus the reply, calibrated by the provider's count
 * when it reports usage (never below the measure); a reply the brain refuses fails the run.
 */
export function applyReply(
  state: RunState,
  reply: ModelReply,
  tools: { definitions: readonly ToolDefinition[]; names: readonly string[] },
): Pick<RunState, 'brain' | 'runUsage' | 'sessionUsage'> {
  const sent = logOf(state.brain.context);
  // requestTokens over the conversation plus the reply, with the conversation's measure memoized.
  const measured = state.extrasTokens + conversationTokens(sent) + estimateTokens([reply.message], tools.definitions);
  const tokens = calibrated(measured, reply.usage && reply.usage.inputTokens + reply.usage.outputTokens);
  const brain = feedOrFail(
    state.brain,
    {
      type: 'modelResponse',
      response: reply.message,
      contextTokens: tokens,
      availableTools: tools.names,
      ...(reply.finishReason && { finishReason: reply.finishReason }),
    },
    'ModelError',
  );
  rememberAppend(logOf(brain.context), sent);
  return { brain, runUsage: addUsage(state.runUsage, reply.usage), sessionUsage: addUsage(state.sessionUsage, reply.usage) };
}

/** The result a call past the per-reply limit gets instead of running. */
export const overLimitResult = (call: ToolCall, limit: number): ToolMessage => ({
  role: 'tool',
  toolCallId: call.id,
  toolName: call.name,
  content: `error: not run, the reply asked for more than ${limit} tool calls at once`,
  isError: true,
});

/**
 * The result a call of the batch has without running: pre-answered by the brain (an unknown
 * tool), past the per-reply limit, or denied by a human. Undefined: it must run (or wait).
 */
export function answeredWithoutRunning(
  call: ToolCall,
  index: number,
  preAnswered: ToolMessage | undefined,
  approvals: Approvals,
  maxCalls: number,
): ToolMessage | undefined {
  if (preAnswered) return preAnswered;
  if (index >= maxCalls) return overLimitResult(call, maxCalls);
  const decision = decisionFor(approvals, call);
  return decision && !decision.approved ? deniedResult(call, decision) : undefined;
}

/** Each call of the batch with its result if it has one yet. Linear in the batch. */
export function batchResults(state: RunState, maxCalls: number): { call: ToolCall; result: ToolMessage | undefined }[] {
  const done = new Map(state.toolJournal.map((result) => [result.toolCallId, result]));
  return pendingCalls(state.brain).map(({ call, preAnswered }, index) => ({
    call,
    result: done.get(call.id) ?? answeredWithoutRunning(call, index, preAnswered, state.approvals, maxCalls),
  }));
}

/**
 * Whether every call of the batch has its result. Counts instead of matching ids: the journal
 * only ever holds results of this batch's runnable calls, once each (the driver checks both),
 * so a batch of n calls costs O(n) in all rather than per result.
 */
export function batchComplete(state: RunState, maxCalls: number): boolean {
  const calls = pendingCalls(state.brain);
  if (state.toolJournal.length === calls.length) return true;
  const { waiting, decisions, standing } = state.approvals;
  if (waiting.length === 0 && Object.keys(decisions).length === 0 && Object.keys(standing).length === 0) {
    return state.toolJournal.length + answeredUpFront(state.brain, maxCalls) === calls.length;
  }
  return batchResults(state, maxCalls).every(({ result }) => result !== undefined);
}

const upFront = objectSlot<object, { maxCalls: number; count: number }>();
/** How many calls of the batch are answered before anything runs (unknown tools, over the limit). */
function answeredUpFront(brain: BrainState, maxCalls: number): number {
  const calls = pendingCalls(brain);
  const cached = upFront.get(calls);
  if (cached?.maxCalls === maxCalls) return cached.count;
  const count = calls.filter(({ preAnswered }, index) => preAnswered !== undefined || index >= maxCalls).length;
  upFront.set(calls, { maxCalls, count });
  return count;
}

/** The calls of the batch without a result that wait for a human's decision. */
export const waitingCalls = (state: RunState, maxCalls: number): ToolCall[] =>
  batchResults(state, maxCalls)
    .filter(({ call, result }) => result === undefined && isWaiting(state.approvals, call))
    .map(({ call }) => call);

/** Adds one finished result to the batch's journal, unless it is there already. */
export function journalResult(journal: readonly ToolMessage[], result: ToolMessage): readonly ToolMessage[] {
  return journal.some((known) => known.toolCallId === result.toolCallId) ? journal : [...journal, result];
}

/**
 * Feeds the finished batch, with the estimate refreshed: the last reply's size plus what came back
 * (seed 000), each result counted as a message of the request already measured, so the estimate
 * is the measure of the next request exactly (one measure: a priming counted per batch made an
 * unchanged conversation look 3 tokens bigger each time).
 */
export function applyToolResults(state: RunState, maxCalls: number): BrainState {
  const results = batchResults(state, maxCalls).map(({ result }) => result!);
  const brain = feedBrain(state.brain, { type: 'toolResults', messages: results });
  rememberAppend(logOf(brain.context), logOf(state.brain.context));
  return feedBrain(brain, { type: 'setContextTokens', tokens: state.brain.context.contextTokens + messagesTokens(results) });
}

/**
 * Feeds what the batch has so far when the run stops mid-batch: calls without a result are
 * answered interrupted, saying what stopped the run and whether the call had started (the IO
 * started it, or it is in doubt after a restart) or never did (queued, waiting for a decision,
 * its batch not started).
 */
export function interruptBatch(state: RunState & { startedCalls?: readonly string[] | undefined; doubt?: DoubtState | undefined }, maxCalls: number, stop: RunStop): BrainState {
  if (state.brain.value !== 'AwaitingTools') return state.brain;
  const batch = batchResults(state, maxCalls);
  const started = new Set(state.startedCalls);
  const results = batch.map(({ call, result }) => result ?? interruptedResult(call, stop, started.has(call.id) || isInDoubt(state.doubt, call.id)));
  const unfinished = batch.flatMap(({ call, result }) => (result ? [] : [call.id]));
  return feedBrain(state.brain, { type: 'toolResults', messages: results, unfinished });
}

/** A compactor's answer fed to the brain; an answer the brain refuses fails the run. */
export function applyCompaction(brain: BrainState, output: SideEffectOutputs['compaction'], contextWindow: number): BrainState {
  const { before, after, messages } = output;
  return feedOrFail(
    brain,
    messages
      ? { type: 'compactionResult', compacted: messages, before, after, contextWindow }
      : { type: 'compactionNoop', before, after, contextWindow },
    'CompactionError',
  );
}

/**
 * The estimate with the instructions and prompt parts of the next call counted anew (seed 000:
 * refreshed before a model call that carries them): the old extras out, the new ones in.
 */
export function withExtras(brain: BrainState, before: number, after: number): BrainState {
  return feedBrain(brain, { type: 'setContextTokens', tokens: Math.max(0, brain.context.contextTokens - before + after) });
}

/** The estimate with the definitions a run's tool sources listed counted (the run started without them). */
export function withListedTools(brain: BrainState, definitions: readonly ToolDefinition[]): BrainState {
  if (definitions.length === 0) return brain;
  return feedBrain(brain, { type: 'setContextTokens', tokens: brain.context.contextTokens + estimateToolTokens(definitions) });
}

/** A pruning pass adopted: the pruned conversation, and the estimate less what it saved. */
export function applyPrune(brain: BrainState, prune: { messages: readonly Message[]; tokensSaved: number }): BrainState {
  const pruned = feedBrain(brain, { type: 'adoptPruned', messages: prune.messages });
  return feedBrain(pruned, { type: 'setContextTokens', tokens: Math.max(0, brain.context.contextTokens - prune.tokensSaved) });
}

/**
 * A concluded brain whose run ends another way after all: the final reply's afterReply hooks
 * were still running (or waiting) when the run was cancelled or one of them failed. Only the
 * outcome changes; the exit (commit, salvage, discard) follows the new outcome.
 */
export function overruleOutcome(brain: BrainState, outcome: Outcome): BrainState {
  return { value: 'Terminal', context: { ...brain.context, outcome } };
}

/** Run exits (seed 000): Completed commits, Failed discards, the rest salvage. */
export function finishBrain(brain: BrainState): BrainState {
  const outcome = brain.context.outcome!;
  const exit = outcome.type === 'Completed' ? 'commitPending' : outcome.type === 'Failed' ? 'discardPending' : 'salvagePending';
  return feedBrain(brain, { type: exit });
}

/** A thrown value as the brain's error info, whatever was thrown (a getter that throws included). */
export function errorInfo(type: FailureType, error: unknown): Failure {
  let message: string;
  try {
    message = error instanceof Error ? String(error.message) : String(error);
  } catch {
    message = 'an error whose message could not be read';
  }
  return { type, message };
}

/**
 * Compaction passes a run may make in a row without a model call in between. A compactor that
 * helps a little each time (every pass shrinks the request, none brings it under the line)
 * would otherwise loop as long as it finds anything to shave.
 */
export const MAX_COMPACTION_PASSES = 3;

const overEmergencyLine = (tokens: number, window: number) => window > 0 && tokens * 100 >= window * 95;

/**
 * A compaction pass's answer fed to the brain, with the run's count of passes in a row. At the
 * last pass allowed, a request still at or over the emergency line ends the run
 * `Failed(CompactionStalled)`: no pass brought it under the line, and it may not be sent.
 */
export function applyCompactionPass(
  state: { brain: BrainState; compactionPasses?: number | undefined },
  output: SideEffectOutputs['compaction'],
  policy: Policy,
): { brain: BrainState; compactionPasses: number } {
  const compactionPasses = (state.compactionPasses ?? 0) + 1;
  const brain = applyCompaction(state.brain, output, policy.contextWindow);
  if (brain.value === 'Terminal' || compactionPasses < MAX_COMPACTION_PASSES || !overEmergencyLine(output.after, policy.contextWindow)) {
    return { brain, compactionPasses };
  }
  const message = `${compactionPasses} compaction passes in a row left the request at ${output.after} tokens, over the emergency line of a ${policy.contextWindow}-token window`;
  return { brain: feedBrain(brain, { type: 'fail', error: { type: 'CompactionStalled', message } }), compactionPasses };
}

/**
 * The policy the brain decides with: the run's, with threshold compaction held once the run made
 * its passes in a row (the emergency line still applies) until the next model reply.
 */
export const brainPolicy = (policy: Policy, compactionPasses: number | undefined): Policy =>
  (compactionPasses ?? 0) >= MAX_COMPACTION_PASSES && policy.autoCompact ? { ...policy, autoCompact: false } : policy;

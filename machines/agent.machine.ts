import { and, assign, emit, enqueueActions, sendTo, setup, type ActorRefFrom, type AnyStateMachine } from 'xstate';
import { conversationOf, feedBrain, pendingCalls, stepTypeOf, takeStep, type BrainState } from '../src/agent/brain-state.js';
import type { AgentConfig } from '../src/agent/config.js';
import { checkedPolicy, compileAgent, markTraced, type CompiledAgent } from '../src/agent/compile.js';
import {
  afterReply,
  answerOf,
  approvalKey,
  as,
  batchKey,
  compactionKey,
  conversation,
  decisionPolicy,
  extrasFor,
  finalCallDue,
  guardsReply,
  guardVerdict,
  handoffOf,
  modelKey,
  offeredTools,
  overBudget,
  overrun,
  ownModel,
  ownOffered,
  pointKey,
  policyProblem,
  pruneReport,
  raiseRefusal,
  repeated,
  replyApplied,
  resetBatch,
  restoredContext,
  runnable,
  speakerView,
  stopRun,
  toolsetKey,
  undecided,
  verdictOf,
  type AgentEvent,
} from '../src/agent/driver-rules.js';
import { APPROVALS_OPERATION, approvalEventOf, approvalResumeProblem } from '../src/agent/approval-events.js';
import { decisionFor, deniedResult, isWaiting, restoredApprovals, takeDecision, type ApprovalEvent } from '../src/agent/approvals.js';
import { requestFor, type ApprovalRequest, type RefusalReason } from '../src/agent/approval-binding.js';
import { doubtRequests, isInDoubt, markedInDoubt, restoredDoubt, takeDoubtDecision, type DoubtEmitted } from '../src/agent/in-doubt.js';
import { z } from 'zod';
import { BudgetSchema, PricesSchema, budgetOverrun, costUsd, type BudgetKind, type BudgetOverrun } from '../src/agent/budget.js';
import { BUDGET_OPERATION, activeMs, limitsOf, pausedAt, pausesOn, raiseOf, raiseProblem, raisedBy } from '../src/agent/budget-pause.js';
import { limitLifted, limitedUntil, resumeDelay, usageLimitRule, usageLimitWait } from '../src/agent/usage-limit.js';
import { freshAgentContext, parseAgentContext, type AgentContext } from '../src/agent/context.js';
import type { OperationHook } from '../src/agent/operation-state.js';
import {
  applyOperated,
  applyResumed,
  checkStoredOperations,
  closeOperations,
  openPoint,
  planOperations,
  resumeVerdict,
  type OperationPlan,
  type ResumeVerdict,
} from '../src/agent/operation-rules.js';
import { DEFAULT_CANCEL_GRACE_MS, OperationError } from '../src/agent/operation.js';
import { agentOutcome, type AgentOutcome, type FailureType } from '../src/agent/failure.js';
import { interruptedStep, keepSteering, runCancelHooks } from '../src/agent/cancel-rules.js';
import { InvalidConfigError, InvalidSnapshotError } from '../src/errors.js';
import { activeModelProblem, bookUsage, fallbackAfter, modelList, startModels, totalCost, usageCosts, type FallbackTrigger, type ModelUsage } from '../src/agent/fallback.js';
import { repetitionLimit, repetitionNote, repetitionVerdict, type RepetitionVerdict } from '../src/agent/repetition.js';
import { systemTokens } from '../src/agent/request-size.js';
import { deliveryIds, nextAttempt, type DeliveryId } from '../src/agent/delivery.js';
import { ExternalEventSchemas, externalEventProblem, externalEventTypes, type ExternalEvent } from '../src/agent/events.js';
import { composeExecutors, inProcessExecutor, type Executor } from '../src/agent/executor.js';
import { fromIo, ioLogic, promptParts, type IoDeps, type IoEvent, type IoRequest } from '../src/agent/io.js';
import { serviceKey as keyOf } from '../src/agent/keys.js';
import { ToolPolicyError, applyPolicyVerdicts, planToolPolicies } from '../src/agent/tool-policy.js';
import * as guard from '../src/agent/guardrails.js';
import { fromTelemetry, resumeTrace, traceMark, type TelemetryEvent, type TraceMark } from '../src/agent/trace-marks.js';
import { AgentTracing } from '../src/agent/agent-tracing.js';
import { PruningSchema, pendingPrune, pruneLineProblem, type Pruning } from '../src/agent/pruning.js';
import {
  NO_USAGE,
  applyCompactionPass,
  brainPolicy,
  applyPrune,
  applyReply,
  applyToolResults,
  asUserMessage,
  batchComplete,
  batchResults,
  errorInfo,
  finishBrain,
  interruptBatch,
  journalResult,
  overruleOutcome,
  startRun,
  waitingCalls,
  withExtras,
  withListedTools,
} from '../src/agent/run-rules.js';
import type { ModelReply, ToolDefinition, Usage } from '../src/model.js';
import { PolicySchema, type Outcome, type Policy, type PolicyInput, type Step, type ToolCall, type ToolMessage, type UserMessage, type Message } from '../src/schemas.js';
import { estimateMessageTokens } from '../src/tokens.js';
import { feedProblem } from '../src/brain/feed-problems.js';
import { parseHistory } from '../src/brain/history.js';
import { DEFAULT_TOOL_CONCURRENCY } from '../src/tools/run-tools.js';
import { activeAgentProblem, compileTeam, presentHistory, settleHandoff, speakerOf } from '../src/agent/handoffs.js';
import { childUsageCounted, qualifiedCallId, qualifiedCalls, routedEvent, type RoutableEvent } from '../src/agent/subagents.js';
import { ToolSet } from '../src/tools/define-tool.js';
import { ListingCache } from '../src/tools/offered-tools.js';
import type { CompactionReason } from '../src/schemas.js';
import { StructuredOutputError } from '../src/errors.js';
import {
  FRESH_OUTPUT_STATE,
  beginFinalCall,
  compileOutput,
  finalCallPolicy,
  finalCallReason,
  finalCallTools,
  judgeAnswer,
  settleAnswer,
  withOutput,
  type AnswerStep,
} from '../src/agent/structured-output.js';

/**
 * The driver: owns one conversation, asks the brain for the next step under the current
 * policy, hands the matching side effect to its IO and feeds the result back. Its own state is
 * only which IO is in flight, and its states carry the brain's names, so the inspector shows
 * the brain. The rules live in `src/agent/run-rules.ts`; here every action is one line.
 */

export type { AgentContext };
export { APPROVALS_OPERATION };
export { DEFAULT_MAX_TOOL_CALLS_PER_REPLY } from '../src/agent/compile.js';

export interface AgentInput {
  sessionId?: string;
  /** Starts a run at once, and the actor finishes with that run's output (single-run mode). */
  prompt?: string | UserMessage;
  /** Committed conversation to continue from. */
  history?: Message[];
  policy?: PolicyInput;
  /**
   * A stored session's state to continue from (what `DurableSession` passes): the actor starts
   * at rest on it, and a `resume` event continues a run that was in flight.
   */
  stored?: AgentContext;
}

export interface AgentOutput {
  outcome: AgentOutcome;
  /** The committed conversation after the run: what survives, coherent. */
  messages: Message[];
  usage: Usage;
  /** The run's cost, when the config gives prices. */
  costUsd?: number;
  /** With a list of models: what each model used in the run (and cost, at its prices). */
  usageByModel?: (ModelUsage & { costUsd?: number })[];
}

export type { AgentEvent };

/** Events a client may show carry a `DeliveryId` (see there): a repeat after a reconnect or a crash has the same id. */
export type AgentEmitted =
  | { type: 'text.delta'; id: DeliveryId; turn: number; delta: string }
  /** The model call failed with a fallback trigger: the turn goes to the next model of the list (text streamed so far is void). */
  | { type: 'model.fallback'; turn: number; from: string; to: string; trigger: FallbackTrigger; error: unknown }
  /** A model call failed and is tried again: text streamed for this turn so far is void. */
  | { type: 'model.retry'; turn: number; retry: number; delayMs: number; error: unknown }
  /**
   * The text (and reply) shown for this turn so far is void: the model call is made again after
   * a retry or a resume, and its reply replaces what was streamed. `attempt`: the attempt voided.
   */
  | { type: 'text.retracted'; id: DeliveryId; turn: number; attempt: number; reason: 'retry' | 'resumed' }
  | { type: 'tool.started'; id: DeliveryId; call: ToolCall }
  | { type: 'tool.finished'; id: DeliveryId; call: ToolCall; result: ToolMessage }
  | { type: 'turn.finished'; id: DeliveryId; turn: number; reply: ModelReply }
  /** The final answer did not match the output schema: sent back to the model (`final` false), or the run ends with it. */
  | { type: 'output.rejected'; turn: number; error: StructuredOutputError; final: boolean }
  | { type: 'compaction.finished'; reason: CompactionReason; before: number; after: number; rewritten: boolean }
  | { type: 'prune.finished'; pruned: number; tokensSaved: number; before: number; after: number }
  | { type: 'policy.rejected'; reason: string }
  /** An event sent to the actor was refused: it changed nothing. */
  | { type: 'event.rejected'; event: string; reason: string }
  /** Calls wait for a person: decide each by its request (call id, digest, run). */
  | { type: 'approval.requested'; calls: ToolCall[]; requests: ApprovalRequest[] }
  /** A decision was taken for this call. */
  | { type: 'approval.decided'; run: number; toolCallId: string; digest: string; approved: boolean; by?: string; reason?: string }
  /** A decision was refused: it changed nothing (an unknown, decided, finished, other run's or changed call). */
  | { type: 'approval.refused'; run: number; toolCallId: string; approved: boolean; refusal: RefusalReason; detail: string; by?: string; digest?: string }
  /** The run went past a limit that pauses: it waits for a raise of that limit (or a seal). */
  | { type: 'budget.paused'; kind: BudgetKind; used: number; limit: number; reason: string }
  /** An operation yielded: the run waits for `{ type: 'operation.resume', operation, payload }`. */
  | { type: 'operation.yielded'; operation: string; reason: string; payload: unknown }
  /** An operation's hook threw, timed out or broke its contract: the run fails with this error. */
  | { type: 'operation.failed'; operation: string; error: OperationError }
  /** An output guardrail refused the final answer: `message` went to the model, which answers again. */
  | { type: 'guardrail.feedback'; turn: number; message: string }
  /** A guardrail tripped: the run ends `Failed(GuardrailTripped)` with this error. */
  | { type: 'guardrail.tripped'; error: guard.GuardrailTrippedError }
  /** The model asked for the same batch `times` times in a row: its calls got a note instead of running. */
  | { type: 'repetition.noted'; turn: number; times: number; calls: ToolCall[] }
  /** The run's output, with what the whole session has used so far (cost when prices are given). */
  | { type: 'run.finished'; id: DeliveryId; output: AgentOutput; sessionUsage: Usage; sessionCostUsd?: number }
  /** The conversation was handed to agent `name` (see `AgentConfig.handoffs`): its instructions, tools and model take over. */
  | { type: 'agent.handoff'; run: number; turn: number; name: string; from: string }
  /** A run started with this message (its index counts the session's runs from 1). */
  | { type: 'run.started'; id: DeliveryId; run: number; message: UserMessage }
  | DoubtEmitted;

const pickUsage = ({ runUsage, sessionUsage, models }: Pick<AgentContext, 'runUsage' | 'sessionUsage' | 'models'>) => ({ runUsage, sessionUsage, ...(models && { models }) });

/** The last run's output: its outcome and usage, with the conversation as it stands after it. */
export function outputOf(context: AgentContext): AgentOutput | null {
  return context.lastRun && { ...context.lastRun, messages: context.brain.context.history };
}

/** A stored brain that is neither finished nor fresh: a run to continue from its last decision. */
export const runInFlight = (brain: BrainState): boolean =>
  brain.value !== 'Terminal' && (brain.value !== 'Start' || brain.context.pending.length > 0);

type Args = { context: AgentContext; event: AgentEvent };
/** A tool's start or end as listeners get it, with its delivery id. */
const toolStarted = (context: AgentContext, call: ToolCall) =>
  ({ type: 'tool.started', id: deliveryIds.toolStarted(context.runIndex, context.brain.context.turnsTaken, call.id), call }) as const;
const toolFinished = (context: AgentContext, call: ToolCall, result: ToolMessage) =>
  ({ type: 'tool.finished', id: deliveryIds.toolFinished(context.runIndex, context.brain.context.turnsTaken, call.id), call, result }) as const;

/**
 * Builds the agent machine for one configuration: model, tools, operations, compactor, limits.
 *
 * @example
 * ```ts
 * import { createActor } from 'xstate';
 * import { createAgentMachine } from 'loopchart';
 * import { scriptedModel } from 'loopchart/testing';
 *
 * const agent = createAgentMachine({ model: scriptedModel([{ text: 'Hello!' }]), instructions: 'Be brief.' });
 * const actor = createActor(agent, { input: { prompt: 'Hi' } }).start();
 * actor.subscribe({ complete: () => console.log(actor.getSnapshot().output?.outcome) });
 * ```
 */
export function createAgentMachine(config: AgentConfig) {
  const agent = compileAgent(config);
  const { operations, clock, plan, pruning, defaultPolicy, budget, prices, models, maxCalls, repetition, instructionsTokens, structured, team, tools, toolPolicy, guardrails, gated, usageLimit, hasSources, entryTools, finalOffered, tracing } = agent;
  const stepIs = (type: Step['type']) => ({ context }: Args) => stepTypeOf(context.brain, decisionPolicy(agent, context)) === type;
  const fromCurrent = (key: (context: AgentContext) => string) => ({ context, event }: Args) =>
    fromIo(event) && (event as { key: string }).key === key(context);
  const pointDue = (hook: OperationHook) => ({ context }: Args) =>
    plan.at[hook].length > 0 && context.operations.done !== pointKey(context, hook);
  const machine = setup({
    types: {
      context: {} as AgentContext,
      events: {} as AgentEvent,
      input: {} as AgentInput | void,
      output: {} as AgentOutput,
      emitted: {} as AgentEmitted,
    },
    actors: { io: ioLogic(agent.io) },
    delays: {
      cancelGrace: ({ context }) => context.cancelGraceMs ?? DEFAULT_CANCEL_GRACE_MS,
      usageLimitWait: ({ context }) => resumeDelay(context.budgetPause, clock()),
    },
    guards: {
      wellFormed: ({ event }) => !fromIo(event) && externalEventProblem(event) === null,
      fromTelemetry: ({ event }) => fromTelemetry(event),
      promptQueued: ({ context }) => context.queued !== null,
      runInFlight: ({ context }) => runInFlight(context.brain),
      rewindable: ({ context, event }) => feedProblem(context.brain.context, { type: 'rewindTo', len: as(event, 'rewind').len }) === null,
      singleRun: ({ context }) => context.once,
      runOverBudget: ({ context }) => overBudget(agent, context) !== null,
      budgetPaused: ({ context }) => overrun(agent, context) !== null && overBudget(agent, context) === null,
      raiseRefused: ({ context, event }) => raiseRefusal(agent, context, event) !== null,
      usageLimitPauses: ({ event }) => usageLimitWait(usageLimit, as(event, 'io.failed').error) !== null,
      usageLimited: ({ context }) => !!context.budgetPause?.usageLimit,
      budgetResume: ({ event }) => event.type === 'operation.resume' && event.operation === BUDGET_OPERATION,
      finalCallDue: ({ context }) => finalCallDue(agent, context) !== null,
      promptFails: ({ context }) => typeof extrasFor(agent, context) !== 'number',
      extrasChanged: ({ context }) => extrasFor(agent, context) !== context.extrasTokens,
      fallsBack: ({ context, event }) => ownModel(agent, context) === null && fallbackAfter(models, context.models, as(event, 'io.failed').error) !== null,
      operationFailure: ({ event }) => event.type === 'io.failed' && OperationError.isInstance(event.error),
      shouldPrune: ({ context }) => !context.brain.context.cancelled && pendingPrune(context.brain, context.policy, pruning, config.pruner) !== null,
      callLLM: stepIs('CallLLM'),
      inputGuardDue: ({ context }) => guard.inputCheckDue(guardrails, context.guard, context.brain.context.turnsTaken, guard.inputCheckKey(context)),
      outputGuardDue: ({ context, event }) => guardsReply(agent, context, event),
      guardOpen: ({ context }) => !!context.guard?.check,
      guardUndecided: ({ context }) => guardVerdict(agent, context).type === 'open',
      guardTripped: ({ context }) => guardVerdict(agent, context).type === 'tripped',
      currentGuardCheck: ({ context, event }) => fromIo(event) && context.guard?.check?.key === (event as { key: string }).key,
      callTools: stepIs('CallTools'),
      repetitionNoted: ({ context }) => repeated(agent, context).type === 'note',
      repetitionSeals: ({ context }) => repeated(agent, context).type === 'seal',
      compact: stepIs('Compact'),
      policyAcceptable: ({ context, event }) => policyProblem(agent, context, as(event, 'policy').policy) === null,
      needsApprovalCheck: ({ context }) => undecided(agent, context).length > 0,
      noApprovalsConfigured: () => !gated,
      policyFailure: ({ event }) => event.type === 'io.failed' && ToolPolicyError.isInstance(event.error),
      batchComplete: ({ context }) => batchComplete(context, maxCalls),
      handsOff: ({ context }) => handoffOf(agent, context) !== null,
      callsRunnable: ({ context }) => runnable(agent, context).length > 0,
      nothingRunnable: ({ context }) => runnable(agent, context).length === 0,
      nothingWaiting: ({ context }) => waitingCalls(context, maxCalls).length === 0,
      someoneWaiting: ({ context }) => waitingCalls(context, maxCalls).length > 0,
      someoneInDoubt: ({ context }) => (context.doubt?.waiting.length ?? 0) > 0,
      nothingInDoubt: ({ context }) => (context.doubt?.waiting.length ?? 0) === 0,
      currentModelCall: fromCurrent(modelKey),
      currentBatch: fromCurrent(batchKey),
      currentApprovalCheck: fromCurrent(approvalKey),
      currentCompaction: fromCurrent(compactionKey),
      currentToolset: fromCurrent(toolsetKey),
      toolsetDue: ({ context }) => hasSources && !context.offered,
      currentPoint: ({ context, event }) => fromIo(event) && context.operations.point?.key === (event as { key: string }).key,
      operationWaiting: ({ context }) => context.operations.waiting !== null,
      hookInFlight: ({ context }) => context.operations.point !== null && context.operations.waiting === null,
      cancelWaits: ({ event }) => (as(event, 'cancel').graceMs ?? DEFAULT_CANCEL_GRACE_MS) > 0,
      pointOpen: ({ context }) => context.operations.point !== null,
      beforeModelCallDue: pointDue('beforeModelCall'),
      beforeToolsDue: pointDue('beforeTools'),
      resumeRefused: ({ context, event }) => verdictOf(agent, context, event).type === 'refused',
      resumeFailed: ({ context, event }) => verdictOf(agent, context, event).type === 'failed',
      approvalResume: ({ event }) => gated && approvalEventOf(event) !== null,
      steersChild: ({ event }) => routedEvent(as(event, 'steer')) !== null,
      /** Unknown types from outside; XState's own events and the IO's late reports pass silently. */
      unknownExternal: ({ event }) => !fromIo(event) && !fromTelemetry(event) && !event.type.startsWith('xstate.'),
    },
    actions: {
      beginRun: assign(({ context, event }) => ({
        operations: { ...closeOperations(context.operations), done: null },
        brain: startRun(context.brain, event.type === 'input' ? asUserMessage(event.message) : context.queued!, ownOffered(agent, context).definitions, context.extrasTokens),
        queued: null,
        runIndex: context.runIndex + 1,
        runUsage: NO_USAGE,
        compactionPasses: 0,
        ...resetBatch(agent, context),
        runStartedAt: clock(),
        budgetPause: undefined,
        // Each run lists its sources once (its `toolset` step); an agent without sources records nothing.
        ...(hasSources && { offered: null }),
        ...(structured && { outputState: FRESH_OUTPUT_STATE }),
        ...(guardrails && { guard: guard.NO_GUARD }),
        // Each run starts on the first model of a list again.
        ...(models.listed && { models: startModels(models, context.models) }),
      })),
      emitRunStarted: emit(({ context }) => ({
        type: 'run.started' as const,
        id: deliveryIds.runStarted(context.runIndex),
        run: context.runIndex,
        message: context.brain.context.pending[0] as UserMessage,
      })),
      recordCancelGrace: assign({ cancelGraceMs: ({ event }) => as(event, 'cancel').graceMs ?? DEFAULT_CANCEL_GRACE_MS }),
      takeStep: assign({ brain: ({ context }) => takeStep(context.brain, decisionPolicy(agent, context)) }),
      beginFinalCall: assign(({ context }) => beginFinalCall(structured!, context.brain, context.outputState, finalCallDue(agent, context)!)),
      rewindBrain: assign({ brain: ({ context, event }) => feedBrain(context.brain, { type: 'rewindTo', len: as(event, 'rewind').len }) }),
      sealOverBudget: assign(({ context }) => ({
        brain: feedBrain(context.brain, { type: 'seal', reason: overBudget(agent, context)! }),
        operations: closeOperations(context.operations),
      })),
      noteRepetition: enqueueActions(({ context, enqueue }) => {
        const times = (repeated(agent, context) as Extract<RepetitionVerdict, { type: 'note' }>).times;
        const calls = pendingCalls(context.brain).map(({ call }) => call);
        const toolJournal = calls.map((call) => repetitionNote(call, times));
        enqueue.emit({ type: 'repetition.noted', turn: context.brain.context.turnsTaken, times, calls });
        toolJournal.forEach((result, i) => (enqueue.emit(toolStarted(context, calls[i]!)), enqueue.emit(toolFinished(context, calls[i]!, result))));
        enqueue.assign({ brain: applyToolResults({ ...context, toolJournal }, maxCalls), ...resetBatch(agent, context) });
      }),
      sealRepetition: assign(({ context }) => ({
        brain: feedBrain(interruptBatch(context, maxCalls), { type: 'seal', reason: (repeated(agent, context) as Extract<RepetitionVerdict, { type: 'seal' }>).reason }),
        operations: closeOperations(context.operations),
        ...resetBatch(agent, context),
      })),
      markPaused: assign({ budgetPause: ({ context }) => pausedAt(context.budgetPause, clock()) }),
      emitBudgetPaused: enqueueActions(({ context, enqueue }) => {
        const limited = context.budgetPause?.usageLimit;
        if (limited) return void enqueue.emit({ type: 'operation.yielded', operation: BUDGET_OPERATION, reason: limited.reason, payload: { resumeAt: limited.resumeAt } });
        const { kind, used, limit, reason } = overrun(agent, context)!;
        enqueue.emit({ type: 'budget.paused', kind, used, limit, reason });
        enqueue.emit({ type: 'operation.yielded', operation: BUDGET_OPERATION, reason, payload: { kind, used, limit } });
      }),
      raiseBudget: assign({ budgetPause: ({ context, event }) => raisedBy(context.budgetPause, raiseOf(event as never)!, clock()) }),
      pauseOnUsageLimit: assign({
        budgetPause: ({ context, event }) => {
          const { error } = as(event, 'io.failed');
          return limitedUntil(context.budgetPause, error as Error, usageLimitWait(usageLimit, error)!, clock());
        },
      }),
      liftUsageLimit: assign({ budgetPause: ({ context }) => limitLifted(context.budgetPause, clock()) }),
      refuseRaise: emit(({ context, event }) => ({ type: 'event.rejected' as const, event: event.type, reason: raiseRefusal(agent, context, event)! })),
      openPoint: assign({ operations: ({ context }, hook: OperationHook) => openPoint(context.operations, plan, hook, pointKey(context, hook)) }),
      requestOperations: sendTo('io', ({ context }): IoRequest => {
        const point = context.operations.point!;
        return {
          type: 'operation',
          key: point.key,
          hook: point.hook,
          from: point.next,
          turn: context.brain.context.turnsTaken + (point.hook === 'beforeModelCall' ? 1 : 0),
          sessionId: context.sessionId,
          conversation: conversation(context),
          slices: context.operations.slices,
          reply: point.reply,
          batch: pendingCalls(context.brain),
        };
      }),
      applyOperated: enqueueActions(({ context, event, enqueue }) => {
        const { index, output } = as(event, 'io.operated');
        enqueue.assign({ operations: applyOperated(context.operations, plan, index, output) });
        if (!output?.results) return;
        // Calls an operation answered are done: they never run, and listeners see them finish.
        let toolJournal = context.toolJournal;
        for (const result of output.results) {
          const call = pendingCalls(context.brain).find((pending) => pending.call.id === result.toolCallId)!.call;
          if (toolJournal.some((known) => known.toolCallId === call.id)) continue;
          toolJournal = journalResult(toolJournal, result);
          enqueue.emit(toolStarted(context, call));
          enqueue.emit(toolFinished(context, call, result));
        }
        enqueue.assign({ toolJournal });
      }),
      emitOperationYielded: emit(({ context }) => {
        const { operation, reason, payload } = context.operations.waiting!;
        return { type: 'operation.yielded' as const, operation, reason, payload };
      }),
      applyResume: assign({
        operations: ({ context, event }) => applyResumed(context.operations, plan, (verdictOf(agent, context, event) as Extract<ResumeVerdict, { type: 'accepted' }>).output),
      }),
      failOperation: enqueueActions(({ context, event, enqueue }) => {
        const error = (
          event.type === 'operation.resume'
            ? (verdictOf(agent, context, event) as { error: OperationError }).error
            : event.type === 'io.failed'
              ? event.error
              : extrasFor(agent, context)
        ) as OperationError;
        enqueue.emit({ type: 'operation.failed', operation: error.operation, error });
        enqueue.assign({
          brain: stopRun(agent, context, { type: 'Failed', error: errorInfo('OperationError', error) }),
          operations: closeOperations(context.operations),
          ...resetBatch(agent, context),
        });
      }),
      refreshExtras: assign(({ context }) => {
        const extrasTokens = extrasFor(agent, context) as number;
        return { brain: withExtras(context.brain, context.extrasTokens, extrasTokens), extrasTokens };
      }),
      prune: assign({ brain: ({ context }) => applyPrune(context.brain, pendingPrune(context.brain, context.policy, pruning, config.pruner)!) }),
      emitPruned: emit(({ context }) => ({ type: 'prune.finished' as const, ...pruneReport(agent, context) })),
      trace: ({ context, event, self }, mark: TraceMark) =>
        tracing && traceMark(tracing, mark, { context, event, self, prune: () => pruneReport(agent, context), waiting: () => waitingCalls(context, maxCalls) }),
      recordTrace: assign(({ context, event }) => {
        const { runIndex, traceparent } = as(event, 'telemetry.traced');
        return runIndex === context.runIndex ? { trace: traceparent } : {};
      }),
      openInputCheck: assign({ guard: ({ context }) => guard.openCheck(context.guard, guard.inputCheckKey(context), 'input') }),
      holdReply: assign({ guard: ({ context, event }) => guard.openCheck(context.guard, `${modelKey(context)}:guard`, 'output', as(event, 'io.replied').reply) }),
      recordGuardVerdict: assign({ guard: ({ context, event }) => guard.withVerdict(context.guard!, as(event, 'io.guarded').name, as(event, 'io.guarded').verdict) }),
      requestGuardrails: enqueueActions(({ context, enqueue }) => {
        const check = context.guard!.check!;
        const names = guard.undecidedGuardrails(guardrails!, check).map((guardrail) => guardrail.name);
        const { history, pending, turnsTaken } = context.brain.context;
        const judged = check.stage === 'output' ? guard.judgedText(structured, judgeAnswer(structured, context.brain, context.outputState, check.reply as ModelReply)) : null;
        const about = judged ?? { text: pending[0]!.content };
        const request = { type: 'guardrails', key: check.key, stage: check.stage, names, turn: turnsTaken + 1, sessionId: context.sessionId, ...about } as const;
        if (names.length > 0) enqueue.sendTo('io', { ...request, conversation: judged ? conversation(context) : { history, pending: [] } } satisfies IoRequest);
      }),
      /** The check is decided (guardrails.ts): the input passes or trips; an output check's held reply is applied, with feedback, or trips. */
      settleGuard: enqueueActions(({ context, enqueue }) => {
        const outcome = guardVerdict(agent, context) as Exclude<guard.GuardOutcome, { type: 'open' }>;
        const { stage, reply } = context.guard!.check!;
        const settled = { guard: guard.settledGuard(context.guard!, outcome) };
        const judged = stage === 'output' ? judgeAnswer(structured, context.brain, context.outputState, reply as ModelReply) : null;
        if (outcome.type === 'tripped') {
          enqueue.emit({ type: 'guardrail.tripped', error: new guard.GuardrailTrippedError(outcome.guardrail, outcome.message) });
          const spent = judged ? pickUsage(replyApplied(agent, context, judged)) : {};
          return void enqueue.assign({ ...settled, ...spent, brain: stopRun(agent, context, { type: 'Failed', error: guard.trippedFailure(outcome) }) });
        }
        if (!judged) return void enqueue.assign(settled);
        const turn = context.brain.context.turnsTaken + 1;
        if (outcome.type === 'feedback') enqueue.emit({ type: 'guardrail.feedback', turn, message: outcome.message });
        const steered = outcome.type === 'feedback' ? feedBrain(judged.brain, { type: 'steer', message: guard.guardFeedbackMessage(outcome.message) }) : judged.brain;
        enqueue.assign({ ...afterReply(agent, context, { ...judged, brain: steered }), ...settled });
        enqueue.emit({ type: 'turn.finished', id: deliveryIds.reply(context.runIndex, turn, context.attempt?.attempt ?? 1), turn, reply: reply as ModelReply });
      }),
      failGuardrail: assign(({ context, event }) => ({
        ...resetBatch(agent, context),
        brain: stopRun(agent, context, { type: 'Failed', error: errorInfo('GuardrailError', as(event, 'io.failed').error) }),
      })),
      requestModel: sendTo('io', ({ context }): IoRequest => ({
        type: 'model',
        key: modelKey(context),
        turn: context.brain.context.turnsTaken + 1,
        sessionId: context.sessionId,
        conversation: conversation(context),
        slices: context.operations.slices,
        tools: offeredTools(agent, context).definitions,
        model: ownModel(agent, context) ?? context.models?.active.index ?? 0,
        ...(team && { speaker: speakerView(agent, context) }),
      })),
      requestToolset: sendTo('io', ({ context }): IoRequest => ({ type: 'toolset', key: toolsetKey(context) })),
      // The run's first estimate counted the agent's own tools: the listed ones join the measure now.
      recordOffered: assign(({ context, event }) => {
        const { definitions } = as(event, 'io.listed').output;
        return { offered: { definitions }, brain: withListedTools(context.brain, definitions) };
      }),
      /** Hands the runnable calls to the IO; `announce`: the IO reports each start (else the chart did, see announceBatch). */
      requestTools: sendTo('io', ({ context }, announce: boolean): IoRequest => ({
        type: 'tools',
        key: batchKey(context),
        turn: context.brain.context.turnsTaken,
        sessionId: context.sessionId,
        calls: runnable(agent, context),
        batch: pendingCalls(context.brain),
        conversation: conversation(context),
        announce,
        offered: hasSources && context.offered ? { key: toolsetKey(context), definitions: context.offered.definitions } : null,
        doubt: context.doubt,
      })),
      markInDoubt: assign({ doubt: ({ context, event }) => markedInDoubt(context.doubt, as(event, 'io.toolInDoubt').call.id) }),
      emitInDoubt: emit(({ context }) => ({ type: 'tool.inDoubt' as const, ...doubtRequests(context) })),
      /** A person's decision for a call in doubt, bound to the call as shown; a refused one changes nothing. */
      decideDoubt: enqueueActions(({ context, event, enqueue }) => {
        const { toolCallId, action, by, reason, digest } = as(event, 'doubt.decide');
        const taken = takeDoubtDecision(context, as(event, 'doubt.decide'));
        const who = by !== undefined ? { by } : {};
        if ('refusal' in taken) {
          const { reason: refusal, detail } = taken.refusal;
          enqueue.emit({ type: 'doubt.refused', run: context.runIndex, toolCallId, action, refusal, detail, ...who, ...(digest !== undefined && { digest }) });
          return void enqueue.emit({ type: 'event.rejected', event: 'doubt.decide', reason: `${refusal}: ${detail}` });
        }
        const { result } = taken.decision;
        enqueue.assign({ doubt: taken.doubt, ...(result && { toolJournal: journalResult(context.toolJournal, result) }) });
        enqueue.emit({ type: 'doubt.decided', run: context.runIndex, toolCallId, digest: taken.decision.digest, action, ...who, ...(reason !== undefined && { reason }) });
        if (result) enqueue.emit(toolFinished(context, taken.call, result));
      }),
      /**
       * A new batch, on the common path: every call shows up in a UI's trace at once. Calls answered
       * up front (an unknown tool, past the per-reply limit) start and finish here; the others start,
       * handed to the IO in the same step.
       */
      announceBatch: enqueueActions(({ context, enqueue }) => {
        for (const { call, result } of batchResults(context, maxCalls)) {
          enqueue.emit(toolStarted(context, call));
          if (result) enqueue.emit(toolFinished(context, call, result));
        }
      }),
      requestApprovals: sendTo('io', ({ context }): IoRequest => ({
        type: 'approvals',
        key: approvalKey(context),
        turn: context.brain.context.turnsTaken,
        sessionId: context.sessionId,
        calls: undecided(agent, context),
        conversation: conversation(context),
      })),
      requestCompaction: sendTo('io', ({ context }): IoRequest => ({
        type: 'compaction',
        key: compactionKey(context),
        turn: context.brain.context.turnsTaken,
        reason: context.brain.context.compactionReason!,
        conversation: conversation(context),
        tokensBefore: context.brain.context.contextTokens,
        systemTokens: context.extrasTokens,
        contextWindow: context.policy.contextWindow,
        tools: offeredTools(agent, context).definitions,
        model: context.models?.active.index ?? 0,
      })),
      abortIo: sendTo('io', { type: 'abort' } satisfies IoRequest),
      /** A decision or steer for a child run goes down to the call that runs it (see `routedEvent`). */
      forwardToChild: enqueueActions(({ event, enqueue }) => {
        const routable = (approvalEventOf(event) ?? event) as RoutableEvent;
        if (routedEvent(routable)) enqueue.sendTo('io', { type: 'forward', event: routable } satisfies IoRequest);
      }),
      /** A child's wait for a human shows at the parent (qualified ids); its usage joins the run once. */
      acceptSubagentReport: enqueueActions(({ context, event, enqueue }) => {
        const { callId, report } = as(event, 'io.subagent');
        if (report.type === 'usage') return void enqueue.assign(childUsageCounted(context, report.childId, report.usage) ?? {});
        const calls = qualifiedCalls(callId, report.calls);
        enqueue.emit({ type: 'approval.requested', calls, requests: report.requests.map((request) => ({ ...request, toolCallId: qualifiedCallId(callId, request.toolCallId) })) });
        enqueue.emit({ type: 'operation.yielded', operation: APPROVALS_OPERATION, reason: 'approval', payload: { calls: calls.map((call) => call.id) } });
      }),
      // Checked against the tools the model was offered: the run's recorded set (see ToolSource).
      acceptReply: assign(({ context, event }) => afterReply(agent, context, answerOf(agent, context, event))),
      emitOutputRejected: enqueueActions(({ context, event, enqueue }) => {
        const { rejected, overrule } = answerOf(agent, context, event);
        if (rejected) enqueue.emit({ type: 'output.rejected', turn: context.brain.context.turnsTaken, error: rejected, final: overrule !== undefined });
      }),
      emitTurnFinished: emit(({ context, event }) => ({
        type: 'turn.finished' as const,
        id: deliveryIds.reply(context.runIndex, context.brain.context.turnsTaken, context.attempt?.attempt ?? 1),
        turn: context.brain.context.turnsTaken,
        reply: as(event, 'io.replied').reply,
      })),
      journalToolResult: assign({ toolJournal: ({ context, event }) => journalResult(context.toolJournal, as(event, 'io.toolFinished').result) }),
      emitToolStarted: emit(({ context, event }) => toolStarted(context, as(event, 'io.toolStarted').call)),
      emitToolFinished: emit(({ context, event }) => {
        const { call, result } = as(event, 'io.toolFinished');
        return toolFinished(context, call, result);
      }),
      acceptToolResults: assign(({ context }) => ({ brain: applyToolResults(context, maxCalls), ...resetBatch(agent, context) })),
      handOff: assign(({ context }) => {
        const { to, results } = handoffOf(agent, context)!;
        return { agent: to, toolJournal: results };
      }),
      emitHandoff: emit(({ context }) => ({ type: 'agent.handoff' as const, run: context.runIndex, turn: context.brain.context.turnsTaken, ...context.agent! })),
      awaitApproval: enqueueActions(({ context, event, enqueue }) => {
        const { waiting, policy } = as(event, 'io.approvalsChecked');
        const approvals = applyPolicyVerdicts({ ...context.approvals, waiting: [...context.approvals.waiting, ...waiting] }, policy);
        enqueue.assign({ approvals, ...(toolPolicy && { policyChecked: [...(context.policyChecked ?? []), ...policy.map((entry) => entry.toolCallId)] }) });
        // A policy's denial is the call's result: listeners see it like any other.
        for (const { call, result } of batchResults({ ...context, approvals }, maxCalls)) {
          if (!result || !policy.some((entry) => entry.toolCallId === call.id && entry.verdict.type === 'deny')) continue;
          enqueue.emit(toolStarted(context, call));
          enqueue.emit(toolFinished(context, call, result));
        }
      }),
      emitApprovalRequested: emit(({ context }) => {
        const calls = waitingCalls(context, maxCalls);
        return { type: 'approval.requested' as const, calls, requests: calls.map((call) => requestFor(call, context.runIndex, context.brain.context.turnsTaken)) };
      }),
      emitApprovalYielded: emit(({ context }) => {
        const calls = waitingCalls(context, maxCalls);
        const requests = calls.map((call) => requestFor(call, context.runIndex, context.brain.context.turnsTaken));
        return { type: 'operation.yielded' as const, operation: APPROVALS_OPERATION, reason: 'approval', payload: { calls: calls.map((call) => call.id), requests } };
      }),
      recordDecision: enqueueActions(({ context, event, enqueue }) => {
        const decision = approvalEventOf(event);
        if (!decision) return;
        const taken = takeDecision(context, decision);
        const { toolCallId, by, reason, digest } = decision;
        const approved = decision.type === 'approve';
        if ('refusal' in taken) {
          const { reason: refusal, detail } = taken.refusal;
          enqueue.emit({ type: 'approval.refused', run: context.runIndex, toolCallId, approved, refusal, detail, ...(by !== undefined && { by }), ...(digest !== undefined && { digest }) });
          enqueue.emit({ type: 'event.rejected', event: decision.type, reason: `${refusal}: ${detail}` });
          return;
        }
        const { approvals } = taken;
        const calls = pendingCalls(context.brain);
        enqueue.assign({ approvals });
        const made = approvals.decisions[toolCallId]!;
        enqueue.emit({ type: 'approval.decided', run: context.runIndex, toolCallId, digest: made.digest!, approved, ...(by !== undefined && { by }), ...(reason !== undefined && { reason }) });
        // A denial is the call's result: listeners see it like any other.
        const finished = new Set(context.toolJournal.map((result) => result.toolCallId));
        for (const { call, preAnswered } of calls) {
          const made = decisionFor(approvals, call);
          if (preAnswered || finished.has(call.id) || decisionFor(context.approvals, call) || made?.approved !== false) continue;
          enqueue.emit(toolStarted(context, call));
          enqueue.emit(toolFinished(context, call, deniedResult(call, made)));
        }
      }),
      acceptCompaction: assign(({ context, event }) => {
        const { output } = as(event, 'io.compacted');
        return applyCompactionPass(context, output, context.policy);
      }),
      emitCompactionFinished: emit(({ event }) => {
        const { reason, output } = as(event, 'io.compacted');
        return { type: 'compaction.finished' as const, reason, before: output.before, after: output.after, rewritten: output.messages !== undefined };
      }),
      fallBack: enqueueActions(({ context, event, enqueue }) => {
        const { error } = as(event, 'io.failed');
        const next = fallbackAfter(models, context.models, error)!;
        const from = context.models!.active.name;
        enqueue.emit({ type: 'model.fallback', turn: context.brain.context.turnsTaken + 1, from, to: next.name, trigger: next.trigger, error });
        enqueue.assign({ models: { ...context.models!, active: { index: next.index, name: next.name } } });
      }),
      failWith: assign({
        brain: ({ context, event }, type: FailureType) => feedBrain(context.brain, { type: 'fail', error: errorInfo(type, as(event, 'io.failed').error) }),
      }),
      /** Seed 003: operations keep what the interrupted step received, calls are answered once, the run ends Cancelled. */
      cancelRun: enqueueActions(({ context, enqueue }) => {
        const turn = context.brain.context.turnsTaken;
        const ctx = { sessionId: context.sessionId, turn, messages: conversationOf(context.brain) };
        const { slices, failures } = runCancelHooks(plan, context.operations.slices, interruptedStep(context, maxCalls), ctx);
        for (const error of failures) enqueue.emit({ type: 'operation.failed', operation: error.operation, error });
        enqueue.assign({
          brain: keepSteering(stopRun(agent, context, { type: 'Cancelled' })),
          operations: closeOperations({ ...context.operations, slices }),
          ...resetBatch(agent, context),
        });
      }),
      /** A hook that returned while the run was being cancelled: its state is kept, nothing else it asked for. */
      keepOperatedState: assign({
        operations: ({ context, event }) => {
          const { index, output } = as(event, 'io.operated');
          return output && 'state' in output ? applyOperated(context.operations, plan, index, { state: output.state }) : context.operations;
        },
      }),
      sealRun: assign(({ context, event }) => ({
        brain:
          context.brain.value === 'Terminal'
            ? context.brain
            : feedBrain(interruptBatch(context, maxCalls), { type: 'seal', reason: as(event, 'seal').reason }),
        operations: closeOperations(context.operations),
        ...resetBatch(agent, context),
      })),
      steerRun: assign({
        brain: ({ context, event }) => feedBrain(context.brain, { type: 'steer', message: asUserMessage(as(event, 'steer').message) }),
      }),
      changePolicy: assign({ policy: ({ context, event }) => PolicySchema.parse({ ...context.policy, ...as(event, 'policy').policy }) }),
      rejectPolicy: emit(({ context, event }) => ({
        type: 'policy.rejected' as const,
        reason: externalEventProblem(event) ?? policyProblem(agent, context, as(event, 'policy').policy) ?? '',
      })),
      rejectEvent: emit(({ event, self }) => ({
        type: 'event.rejected' as const,
        event: String(event.type).slice(0, 100),
        reason:
          externalEventProblem(event) ??
          (event.type === 'operation.resume' && event.operation === APPROVALS_OPERATION
            ? approvalResumeProblem(event)
            : null) ??
          (event.type === 'operation.resume' && self.getSnapshot().context.operations.waiting
            ? (verdictOf(agent, self.getSnapshot().context, event) as { reason: string }).reason
            : `not accepted now (the agent is ${JSON.stringify(self.getSnapshot().value)})`),
      })),
      emitTextDelta: emit(({ context, event }) => {
        const { turn, delta, index } = as(event, 'io.textDelta');
        return { type: 'text.delta' as const, id: deliveryIds.text(context.runIndex, turn, context.attempt?.attempt ?? 1, index), turn, delta };
      }),
      /** A model call starts: its attempt is counted (stored before it runs); a later one voids the text before it. */
      startAttempt: enqueueActions(({ context, enqueue }, reason: 'retry' | 'resumed') => {
        const attempt = nextAttempt(context.attempt, modelKey(context));
        enqueue.assign({ attempt });
        if (attempt.attempt === 1) return;
        const turn = context.brain.context.turnsTaken + 1;
        const voided = attempt.attempt - 1;
        enqueue.emit({ type: 'text.retracted', id: deliveryIds.retracted(context.runIndex, turn, voided), turn, attempt: voided, reason });
      }),
      emitRetry: emit(({ event }) => {
        const { turn, retry, delayMs, error } = as(event, 'io.retry');
        return { type: 'model.retry' as const, turn, retry, delayMs, error };
      }),
      finishRun: assign(({ context }) => {
        const brain = finishBrain(context.brain);
        const byModel = models.listed ? context.models?.run ?? [] : undefined;
        const cost = byModel ? totalCost(models, byModel) : costUsd(context.runUsage, prices);
        const usageByModel = byModel && { usageByModel: usageCosts(models, byModel) };
        const outcome = withOutput(structured, agentOutcome(brain.context.outcome!));
        return { brain, lastRun: { outcome, usage: context.runUsage, ...(cost !== undefined && { costUsd: cost }), ...usageByModel } };
      }),
      emitRunFinished: emit(({ context }) => {
        const sessionCostUsd = models.listed ? totalCost(models, context.models?.session ?? []) : costUsd(context.sessionUsage, prices);
        return {
          type: 'run.finished' as const,
          id: deliveryIds.runFinished(context.runIndex, context.brain.context.turnsTaken),
          output: outputOf(context)!,
          sessionUsage: context.sessionUsage,
          ...(sessionCostUsd !== undefined && { sessionCostUsd }),
        };
      }),
    },
  }).createMachine({
    id: 'agent',
    context: ({ input }) =>
      // A stored state comes from outside: checked as a persisted snapshot is.
      input?.stored
        ? restoredContext(agent, input.stored)
        : freshAgentContext({
            sessionId: input?.sessionId ?? 'session',
            // A starting conversation from outside: checked as the brain's own facade checks it.
            history: input?.history === undefined ? [] : parseHistory(input.history),
            policy: input?.policy ? checkedPolicy(input.policy, pruning) : defaultPolicy,
            queued: input?.prompt === undefined ? null : asUserMessage(input.prompt),
          }),
    initial: 'Idle',
    on: {
      policy: [{ guard: and(['wellFormed', 'policyAcceptable']), actions: 'changePolicy' }, { actions: 'rejectPolicy' }],
      // A decision outside a run is refused as a decision (the trace records why), never taken.
      approve: [{ guard: 'wellFormed', actions: 'recordDecision' }, { actions: 'rejectEvent' }],
      deny: [{ guard: 'wellFormed', actions: 'recordDecision' }, { actions: 'rejectEvent' }],
      'doubt.decide': [{ guard: 'wellFormed', actions: 'decideDoubt' }, { actions: 'rejectEvent' }],
      'telemetry.traced': [{ guard: 'fromTelemetry', actions: 'recordTrace' }, { actions: 'rejectEvent' }],
      // Whatever no state took: refused, reported, nothing changed.
      ...Object.fromEntries(externalEventTypes.filter((type) => !['policy', 'approve', 'deny', 'doubt.decide'].includes(type)).map((type) => [type, { actions: 'rejectEvent' }])),
      '*': { guard: 'unknownExternal', actions: 'rejectEvent' },
    },
    states: {
      Idle: {
        always: { guard: 'promptQueued', target: 'Running', actions: ['beginRun', 'emitRunStarted', { type: 'trace', params: 'run.started' }] },
        on: {
          input: { guard: 'wellFormed', target: 'Running', actions: ['beginRun', 'emitRunStarted', { type: 'trace', params: 'run.started' }] },
          // Nothing to continue is not an error: a session opened at rest is resumed as a matter of course.
          resume: [
            { guard: and(['wellFormed', 'runInFlight']), target: 'Running', actions: { type: 'trace', params: 'run.resumed' } },
            { guard: 'wellFormed' },
          ],
          rewind: { guard: and(['wellFormed', 'rewindable']), actions: 'rewindBrain' },
        },
      },
      Running: {
        // One IO actor per run: it runs every side effect through the executor. An idle session has none.
        invoke: { id: 'io', src: 'io' },
        initial: 'Start',
        on: {
          cancel: [
            // A hook in flight gets its grace (its signal aborts at once) to return what it received.
            { guard: and(['wellFormed', 'hookInFlight', 'cancelWaits']), target: '.Cancelling', actions: ['abortIo', 'recordCancelGrace'] },
            { guard: 'wellFormed', target: '.Start', actions: ['abortIo', 'cancelRun'] },
          ],
          seal: { guard: 'wellFormed', target: '.Start', actions: ['abortIo', 'sealRun'] },
          steer: [{ guard: and(['wellFormed', 'steersChild']), actions: 'forwardToChild' }, { guard: 'wellFormed', actions: 'steerRun' }],
          // A raise while the run goes: the limits it names hold for the rest of the run.
          'budget.raise': [{ guard: and(['wellFormed', 'raiseRefused']), actions: 'refuseRaise' }, { guard: 'wellFormed', actions: 'raiseBudget' }],
          // A user message sent while a run goes is steering: delivered at the next coherent point.
          input: { guard: 'wellFormed', actions: 'steerRun' },
          approve: { guard: 'wellFormed', actions: ['recordDecision', 'forwardToChild', { type: 'trace', params: 'approval.decided' }] },
          deny: { guard: 'wellFormed', actions: ['recordDecision', 'forwardToChild', { type: 'trace', params: 'approval.decided' }] },
          'doubt.decide': { guard: 'wellFormed', actions: 'decideDoubt' },
          // The same decision as the approvals operation's resume: `{ operation: 'approvals', payload }`.
          'operation.resume': { guard: and(['wellFormed', 'approvalResume']), actions: ['recordDecision', 'forwardToChild', { type: 'trace', params: 'approval.decided' }] },
          'io.subagent': { guard: 'currentBatch', actions: 'acceptSubagentReport' },
          'io.textDelta': { guard: 'currentModelCall', actions: 'emitTextDelta' },
          'io.retry': { guard: 'currentModelCall', actions: [{ type: 'startAttempt', params: 'retry' }, 'emitRetry', { type: 'trace', params: 'model.retry' }] },
        },
        states: {
          /** Asks the brain; the policy is re-read here on every step. */
          Start: {
            always: [
              // A guardrail check in progress (restored, or just opened) is decided before anything else.
              { guard: 'guardOpen', target: 'Guarding' },
              // A run about to end by maxTurns or a budget first asks for its answer (output schema, finalOutputCall).
              { guard: 'finalCallDue', target: 'Start', reenter: true, actions: 'beginFinalCall' },
              // Budgets are checked between steps: going past one seals the run (seed 004).
              { guard: 'runOverBudget', target: 'Start', reenter: true, actions: 'sealOverBudget' },
              // ...or, for a kind configured to pause, waits for a raise.
              { guard: 'budgetPaused', target: 'BudgetPaused' },
              // An operation yielded: the run waits for it, also after a restore.
              { guard: 'operationWaiting', target: 'AwaitingOperation' },
              // A hook point in progress (after a reply, or a restored one) goes on where it was.
              { guard: 'pointOpen', target: 'Operating' },
              // A prompt part that throws or is no string fails the run, naming its operation.
              { guard: 'promptFails', target: 'Start', reenter: true, actions: 'failOperation' },
              // Pruning comes before any decision, so it always runs before summarizing.
              { guard: 'extrasChanged', target: 'Start', reenter: true, actions: 'refreshExtras' },
              { guard: 'shouldPrune', target: 'Start', reenter: true, actions: ['emitPruned', { type: 'trace', params: 'prune' }, 'prune'] },
              // Input guardrails judge the run's input before anything reaches the model.
              { guard: and(['callLLM', 'inputGuardDue']), target: 'Guarding', actions: 'openInputCheck' },
              // The run's first model call is preceded by its toolset step (only with tool sources).
              { guard: and(['callLLM', 'toolsetDue']), target: 'ListingTools' },
              { guard: and(['callLLM', 'beforeModelCallDue']), target: 'Operating', actions: { type: 'openPoint', params: 'beforeModelCall' } },
              { guard: 'callLLM', target: 'AwaitingModel', actions: 'takeStep' },
              // The same batch again and again: noted instead of run, then sealed (before operations and approvals see it).
              { guard: and(['callTools', 'repetitionSeals']), target: 'Start', reenter: true, actions: 'sealRepetition' },
              { guard: and(['callTools', 'repetitionNoted']), target: 'Start', reenter: true, actions: 'noteRepetition' },
              { guard: and(['callTools', 'beforeToolsDue']), target: 'Operating', actions: { type: 'openPoint', params: 'beforeTools' } },
              // Without approvals configured, a batch goes straight to work (no approval region).
              { guard: and(['callTools', 'noApprovalsConfigured']), target: 'AwaitingTools.Executing' },
              { guard: 'callTools', target: 'AwaitingTools' },
              { guard: 'compact', target: 'AwaitingCompaction', actions: 'takeStep' },
              { target: '#agent.Terminal', actions: 'takeStep' },
            ],
          },
          /** Past a limit that pauses: waits for a raise that lifts it (the same run goes on) or a seal. */
          BudgetPaused: {
            entry: ['markPaused', 'emitBudgetPaused'],
            // A provider's usage limit: the same model call again at the stored time.
            after: { usageLimitWait: { guard: 'usageLimited', target: 'AwaitingModel', actions: 'liftUsageLimit' } },
            on: {
              // Restored while waiting for that time: the timer is armed again from the stored time.
              'io.attached': { guard: 'usageLimited', target: 'BudgetPaused', reenter: true },
              'budget.raise': [
                { guard: and(['wellFormed', 'usageLimited']), target: 'AwaitingModel', actions: 'raiseBudget' },
                { guard: and(['wellFormed', 'raiseRefused']), actions: 'refuseRaise' },
                { guard: 'wellFormed', target: 'Start', actions: 'raiseBudget' },
              ],
              'operation.resume': [
                { guard: and(['wellFormed', 'budgetResume', 'usageLimited']), target: 'AwaitingModel', actions: 'raiseBudget' },
                { guard: and(['wellFormed', 'budgetResume', 'raiseRefused']), actions: 'refuseRaise' },
                { guard: and(['wellFormed', 'budgetResume']), target: 'Start', actions: 'raiseBudget' },
              ],
            },
          },
          /** Operations run at a hook point, in list order; each declines, applies effects, or yields. */
          Operating: {
            entry: 'requestOperations',
            always: [
              { guard: 'operationWaiting', target: 'AwaitingOperation' },
              { guard: 'pointOpen' },
              { target: 'Start' },
            ],
            on: {
              'io.attached': { actions: 'requestOperations' },
              'io.operated': { guard: 'currentPoint', actions: 'applyOperated' },
              'io.failed': { guard: 'currentPoint', target: 'Start', actions: 'failOperation' },
            },
          },
          /** Cancelled while a hook ran: waits for its answer (kept) for the grace period, then the run ends. */
          Cancelling: {
            after: { cancelGrace: { target: 'Start', actions: 'cancelRun' } },
            on: {
              'io.operated': { guard: 'currentPoint', target: 'Start', actions: ['keepOperatedState', 'cancelRun'] },
              'io.failed': { guard: 'currentPoint', target: 'Start', actions: 'cancelRun' },
              // A second cancel does not wait.
              cancel: { guard: 'wellFormed', target: 'Start', actions: 'cancelRun' },
            },
          },
          /** An operation yielded: the run waits here for `operation.resume` (the context names the operation). */
          AwaitingOperation: {
            entry: 'emitOperationYielded',
            on: {
              'operation.resume': [
                { guard: and(['wellFormed', 'resumeRefused']), actions: 'rejectEvent' },
                { guard: and(['wellFormed', 'resumeFailed']), target: 'Start', actions: 'failOperation' },
                { guard: 'wellFormed', target: 'Start', actions: 'applyResume' },
              ],
            },
          },
          /** Guardrails judge the run's input or its final answer, in parallel; each verdict is kept as it comes (see guardrails.ts). */
          Guarding: {
            entry: 'requestGuardrails',
            always: [
              { guard: 'guardUndecided' },
              { guard: 'guardTripped', target: 'Start', actions: ['abortIo', 'settleGuard'] },
              { target: 'Start', actions: 'settleGuard' },
            ],
            on: {
              'io.attached': { actions: 'requestGuardrails' },
              'io.guarded': { guard: 'currentGuardCheck', actions: 'recordGuardVerdict' },
              'io.failed': { guard: 'currentGuardCheck', target: 'Start', actions: ['abortIo', 'failGuardrail'] },
            },
          },
          /** Lists the run's tool sources once; the run offers and accepts what this step records. */
          ListingTools: {
            entry: 'requestToolset',
            on: {
              'io.attached': { actions: 'requestToolset' },
              'io.listed': { guard: 'currentToolset', target: 'Start', actions: 'recordOffered' },
              'io.failed': { guard: 'currentToolset', target: 'Start', actions: { type: 'failWith', params: 'ModelError' } },
            },
          },
          AwaitingModel: {
            entry: [{ type: 'startAttempt', params: 'resumed' }, 'requestModel'],
            on: {
              'io.attached': { actions: [{ type: 'startAttempt', params: 'resumed' }, 'requestModel'] },
              // A reply that would complete the run is held for the output guardrails.
              'io.replied': [
                { guard: and(['currentModelCall', 'outputGuardDue']), target: 'Guarding', actions: 'holdReply' },
                { guard: 'currentModelCall', target: 'Start', actions: ['acceptReply', 'emitTurnFinished', 'emitOutputRejected'] },
              ],
              'io.failed': [
                // A prompt part or request rewrite that failed on the way out is the operation's failure.
                { guard: and(['currentModelCall', 'operationFailure']), target: 'Start', actions: 'failOperation' },
                // After the model's own retries: the next model of the list takes the same call.
                { guard: and(['currentModelCall', 'fallsBack']), actions: ['fallBack', { type: 'trace', params: 'model.fallback' }, { type: 'startAttempt', params: 'retry' }, 'requestModel'] },
                // ...or, with pauseOnUsageLimit, a provider's limit with a retry time waits for it.
                { guard: and(['currentModelCall', 'usageLimitPauses']), target: 'BudgetPaused', actions: 'pauseOnUsageLimit' },
                { guard: 'currentModelCall', target: 'Start', actions: { type: 'failWith', params: 'ModelError' } },
              ],
            },
          },
          AwaitingTools: {
            initial: 'Routing',
            always: [
              { guard: and(['batchComplete', 'handsOff']), target: 'HandingOff', actions: ['handOff', 'acceptToolResults'] },
              { guard: 'batchComplete', target: 'Start', actions: 'acceptToolResults' },
            ],
            on: {
              'io.toolStarted': { guard: 'currentBatch', actions: 'emitToolStarted' },
              'io.toolFinished': { guard: 'currentBatch', actions: ['journalToolResult', 'emitToolFinished'] },
              'io.failed': { guard: 'currentBatch', target: 'Start', actions: { type: 'failWith', params: 'ToolError' } },
            },
            states: {
              /** The approval region is entered only when a call of this batch may need a decision. */
              Routing: {
                always: [
                  { guard: 'needsApprovalCheck', target: 'CheckingApprovals' },
                  // A restored batch whose calls still wait goes straight back to waiting.
                  { guard: 'someoneWaiting', target: 'Working' },
                  { guard: 'someoneInDoubt', target: 'Working' },
                  { target: 'Executing' },
                ],
              },
              Executing: {
                entry: ['announceBatch', { type: 'requestTools', params: false }],
                on: {
                  'io.attached': { actions: { type: 'requestTools', params: true } },
                  // A call found in doubt: the batch waits for a person beside the calls that run (see Working.Doubt).
                  'io.toolInDoubt': { guard: 'currentBatch', target: 'Working', actions: 'markInDoubt' },
                },
              },
              CheckingApprovals: {
                entry: 'requestApprovals',
                on: {
                  'io.attached': { actions: 'requestApprovals' },
                  'io.approvalsChecked': { guard: 'currentApprovalCheck', target: 'Working', actions: 'awaitApproval' },
                  'io.failed': [
                    { guard: and(['currentApprovalCheck', 'policyFailure']), target: '#agent.Running.Start', actions: { type: 'failWith', params: 'ToolPolicyError' } },
                    { guard: 'currentApprovalCheck', target: '#agent.Running.Start', actions: { type: 'failWith', params: 'ToolError' } },
                  ],
                },
              },
              /** Calls that may run do, while calls that need a human wait for a decision. */
              Working: {
                type: 'parallel',
                on: {
                  // A decision may make a call runnable while others still run: hand it over at once.
                  approve: {
                    guard: 'wellFormed',
                    actions: ['recordDecision', 'forwardToChild', { type: 'trace', params: 'approval.decided' }, { type: 'requestTools', params: true }],
                  },
                  deny: { guard: 'wellFormed', actions: ['recordDecision', 'forwardToChild', { type: 'trace', params: 'approval.decided' }] },
                  'operation.resume': {
                    guard: and(['wellFormed', 'approvalResume']),
                    actions: ['recordDecision', 'forwardToChild', { type: 'trace', params: 'approval.decided' }, { type: 'requestTools', params: true }],
                  },
                  'doubt.decide': { guard: 'wellFormed', actions: ['decideDoubt', { type: 'requestTools', params: true }] },
                },
                states: {
                  Execution: {
                    initial: 'Executing',
                    states: {
                      Executing: {
                        entry: { type: 'requestTools', params: true },
                        always: { guard: 'nothingRunnable', target: 'Paused' },
                        on: { 'io.attached': { actions: { type: 'requestTools', params: true } } },
                      },
                      /** Nothing may run now; an approval makes a call runnable again. */
                      Paused: { always: { guard: 'callsRunnable', target: 'Executing' } },
                    },
                  },
                  Approval: {
                    initial: 'Checking',
                    states: {
                      Checking: { always: [{ guard: 'nothingWaiting', target: 'Settled' }, { target: 'AwaitingApproval' }] },
                      /** The run yields here until every waiting call has a decision (approve / deny events). */
                      AwaitingApproval: {
                        entry: ['emitApprovalRequested', 'emitApprovalYielded', { type: 'trace', params: 'approval.requested' }],
                        always: { guard: 'nothingWaiting', target: 'Settled' },
                      },
                      // A restored decision that did not prove itself puts its call back to wait: asked again.
                      Settled: { always: { guard: 'someoneWaiting', target: 'AwaitingApproval' } },
                    },
                  },
                  /** Calls started before a restart with no result, of tools that ask (see in-doubt.ts): the run waits for a person's decision. */
                  Doubt: {
                    initial: 'Checking',
                    on: { 'io.toolInDoubt': { guard: 'currentBatch', target: '.AwaitingDecision', reenter: true, actions: 'markInDoubt' } },
                    states: {
                      Checking: { always: [{ guard: 'nothingInDoubt', target: 'Clear' }, { target: 'AwaitingDecision' }] },
                      AwaitingDecision: { entry: 'emitInDoubt', always: { guard: 'nothingInDoubt', target: 'Clear' } },
                      Clear: {},
                    },
                  },
                },
              },
            },
          },
          /** A transfer call of the batch succeeded: the agent it names speaks from the next step on. */
          HandingOff: { entry: 'emitHandoff', always: { target: 'Start' } },
          AwaitingCompaction: {
            entry: 'requestCompaction',
            on: {
              'io.attached': { actions: 'requestCompaction' },
              'io.compacted': { guard: 'currentCompaction', target: 'Start', actions: ['acceptCompaction', 'emitCompactionFinished'] },
              'io.failed': { guard: 'currentCompaction', target: 'Start', actions: { type: 'failWith', params: 'CompactionError' } },
            },
          },
        },
      },
      /** The run ended: apply its exit to the conversation and report it. */
      Terminal: {
        entry: ['finishRun', 'emitRunFinished', { type: 'trace', params: 'run.finished' }],
        always: [{ guard: 'singleRun', target: 'Done' }, { target: 'Idle' }],
      },
      Done: { type: 'final' },
    },
    output: ({ context }) => outputOf(context)!,
  });
  return hardened(machine, agent, agent.io);
}

/** An agent machine whose executor a host can wrap (see `withExecutor`). */
export type WithExecutor<M> = M & {
  /**
   * The same agent with its executor wrapped: `wrap` receives the current executor and returns
   * the one to use. Composes: wrapping twice nests the wrappers (the later one outside).
   */
  withExecutor(wrap: (inner: Executor) => Executor): WithExecutor<M>;
  /** The same agent reading its clock from `clock` (see `AgentConfig.clock`); keeps the executor. */
  withClock(clock: () => number): WithExecutor<M>;
};

/**
 * The agent machine with what XState's machine lacks for it: a persisted snapshot is checked
 * before it runs (`InvalidSnapshotError` naming the path), and `withExecutor` wraps the
 * executor for a host such as `DurableSession`.
 */
function hardened<M extends AnyStateMachine>(machine: M, agent: CompiledAgent, io: IoDeps): WithExecutor<M> {
  const restore = machine.restoreSnapshot.bind(machine);
  // Wrapped, never patched: the machine object stays XState's own, and every machine derived
  // from this one (`provide`, `withExecutor`, `withClock`) keeps the snapshot check and these methods.
  const wrapped: Record<PropertyKey, unknown> = {
    restoreSnapshot: ((snapshot, scope) => {
      const persisted = snapshot as { context?: unknown };
      const context = restoredContext(agent, persisted.context);
      // A run restored in flight goes on without a `resume` event: its span continues the stored trace here.
      if (agent.tracing && (persisted as { value?: unknown }).value !== 'Idle' && runInFlight(context.brain)) resumeTrace(agent.tracing, context);
      return restore({ ...persisted, context } as never, scope);
    }) as M['restoreSnapshot'],
    provide: (implementations: Parameters<M['provide']>[0]) => hardened(machine.provide(implementations) as M, agent, io),
    withExecutor(wrap: (inner: Executor) => Executor): WithExecutor<M> {
      const next = { ...io, executor: composeExecutors(io.executor, wrap) };
      markTraced(next.executor, agent.tracing);
      return hardened(machine.provide({ actors: { io: ioLogic(next) } }) as M, agent, next);
    },
    withClock(clock: () => number): WithExecutor<M> {
      return createAgentMachine({ ...agent.config, executor: io.executor, clock }) as unknown as WithExecutor<M>;
    },
  };
  return new Proxy(machine, {
    get: (target, key, receiver) => (Object.hasOwn(wrapped, key) ? wrapped[key] : Reflect.get(target, key, receiver)),
    has: (target, key) => Object.hasOwn(wrapped, key) || Reflect.has(target, key),
  }) as WithExecutor<M>;
}

export type AgentMachine = ReturnType<typeof createAgentMachine>;
export type AgentActor = ActorRefFrom<AgentMachine>;

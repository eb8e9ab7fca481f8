import { and, setup, type ActorRefFrom, type AnyActorRef, type AnyStateMachine } from 'xstate';
import { feedBrain, stepTypeOf, takeStep } from '../src/agent/core/brain-state.js';
import type { AgentConfig } from '../src/agent/core/config.js';
import { compileAgent, markTraced, type CompiledAgent } from '../src/agent/core/compile.js';
import { afterReply, answerOf,  batchKey, compactionKey,  decisionPolicy, extrasFor,  modelKey,  pointKey, policyProblem, pruneReport,  resetBatch, restoredContext, runnable, toolsetKey,  verdictOf, initialContext } from '../src/agent/core/driver-rules.js';
import { as } from '../src/agent/protocol/agent-event.js';
import { APPROVALS_OPERATION,  approvalResumeProblem } from '../src/agent/approvals/approval-events.js';

import { type AgentContext } from '../src/agent/core/context.js';
import type { OperationHook } from '../src/agent/operations/operation-state.js';
import { applyOperated, applyResumed, openPoint, type ResumeVerdict } from '../src/agent/operations/operation-rules.js';
import { DEFAULT_CANCEL_GRACE_MS, OperationError } from '../src/agent/operations/operation.js';
import { type FailureType } from '../src/agent/protocol/failure.js';

import { checkedExternal, externalEventProblem, externalEventTypes } from '../src/agent/protocol/events.js';
import { composeExecutors, type Executor } from '../src/agent/protocol/executor.js';
import { fromIo, ioLogic, type IoDeps, type IoRequest } from '../src/agent/core/io.js';

import { guardrailImplementations } from '../src/agent/guardrails/implementations.js';
import { budgetImplementations } from '../src/agent/budget/implementations.js';
import { structuredOutputImplementations } from '../src/agent/structured-output/implementations.js';
import { handoffImplementations } from '../src/agent/handoffs/implementations.js';
import { inDoubtImplementations } from '../src/agent/in-doubt/implementations.js';
import { fallbackImplementations } from '../src/agent/fallback/implementations.js';
import { repetitionImplementations } from '../src/agent/repetition/implementations.js';
import { approvalImplementations } from '../src/agent/approvals/implementations.js';
import { subagentImplementations } from '../src/agent/subagents/implementations.js';
import { inputRefused } from '../src/agent/core/actor-input.js';
import { fromTelemetry, resumeTrace, traceMark, type TraceMark } from '../src/agent/tracing/trace-marks.js';

import { pendingPrune } from '../src/agent/core/pruning.js';
import { alwaysOf, stepOrder } from '../src/agent/core/step-order.js';
import { applyPrune, applyToolResults, asUserMessage, batchComplete, errorInfo, journalResult, waitingCalls } from '../src/agent/core/run-rules.js';
import { PolicySchema, type Step } from '../src/schemas.js';

import { feedProblem } from '../src/brain/feed-problems.js';



/**
 * The driver: owns one conversation, asks the brain for the next step under the current
 * policy, hands the matching side effect to its IO and feeds the result back. Its own state is
 * only which IO is in flight, and its states carry the brain's names, so the inspector shows
 * the brain. The rules live in `src/agent/core/run-rules.ts`; here every action is one line.
 */

import { outputOf, runInFlight, type AgentInput } from '../src/agent/protocol/actor-types.js';
import * as act from '../src/agent/core/driver-actions.js';
import { assign, assignWith, bind, effectsWith, emit, sendTo, sendWith, types, type Args } from '../src/agent/core/bind.js';
import { toolStarted } from '../src/agent/core/effects.js';

/** The chart's guards for one compiled agent: each a one-line question to a rule. */
function guardsOf(agent: CompiledAgent) {
  const { plan, pruning, maxCalls, hasSources } = agent;
  const stepIs = (type: Step['type']) => ({ context }: Args) => stepTypeOf(context.brain, decisionPolicy(agent, context)) === type;
  const fromCurrent = (key: (context: AgentContext) => string) => ({ context, event }: Args) =>
    fromIo(event) && (event as { key: string }).key === key(context);
  const pointDue = (hook: OperationHook) => ({ context }: Args) =>
    plan.at[hook].length > 0 && context.operations.done !== pointKey(context, hook);
  return {
  malformedPolicy: ({ event }: Args) => event.type === 'event.malformed' && event.of === 'policy',
  fromTelemetry: ({ event }: Args) => fromTelemetry(event),
  promptQueued: ({ context }: Args) => context.queued !== null,
  inputRefused: ({ context }: Args) => inputRefused(context),
  runInFlight: ({ context }: Args) => runInFlight(context.brain),
  rewindable: ({ context, event }: Args) => feedProblem(context.brain.context, { type: 'rewindTo', len: as(event, 'rewind').len }) === null,
  singleRun: ({ context }: Args) => context.once,
  promptFails: ({ context }: Args) => typeof extrasFor(agent, context) !== 'number',
  extrasChanged: ({ context }: Args) => extrasFor(agent, context) !== context.extrasTokens,
  operationFailure: ({ event }: Args) => event.type === 'io.failed' && OperationError.isInstance(event.error),
  shouldPrune: ({ context }: Args) => !context.brain.context.cancelled && pendingPrune(context.brain, context.policy, pruning, agent.config.pruner) !== null,
  callLLM: stepIs('CallLLM'),
  callTools: stepIs('CallTools'),
  compact: stepIs('Compact'),
  policyAcceptable: ({ context, event }: Args) => policyProblem(agent, context, as(event, 'policy').policy) === null,
  batchComplete: ({ context }: Args) => batchComplete(context, maxCalls),
  callsRunnable: ({ context }: Args) => runnable(agent, context).length > 0,
  nothingRunnable: ({ context }: Args) => runnable(agent, context).length === 0,
  currentModelCall: fromCurrent(modelKey),
  currentBatch: fromCurrent(batchKey),
  currentCompaction: fromCurrent(compactionKey),
  currentToolset: fromCurrent(toolsetKey),
  toolsetDue: ({ context }: Args) => hasSources && !context.offered,
  currentPoint: ({ context, event }: Args) => fromIo(event) && context.operations.point?.key === (event as { key: string }).key,
  operationWaiting: ({ context }: Args) => context.operations.waiting !== null,
  hookInFlight: ({ context }: Args) => context.operations.point !== null && context.operations.waiting === null,
  cancelWaits: ({ event }: Args) => (as(event, 'cancel').graceMs ?? DEFAULT_CANCEL_GRACE_MS) > 0,
  pointOpen: ({ context }: Args) => context.operations.point !== null,
  beforeModelCallDue: pointDue('beforeModelCall'),
  beforeToolsDue: pointDue('beforeTools'),
  resumeRefused: ({ context, event }: Args) => verdictOf(agent, context, event).type === 'refused',
  resumeFailed: ({ context, event }: Args) => verdictOf(agent, context, event).type === 'failed',
  /** Unknown types from outside; XState's own events and the IO's late reports pass silently. */
  unknownExternal: ({ event }: Args) => !fromIo(event) && !fromTelemetry(event) && !event.type.startsWith('xstate.'),
  };
}

/** The actions that start, step, pause and end a run. */
function runActions(agent: CompiledAgent) {
  const { plan, pruning, maxCalls, tracing } = agent;
  const rule = bind(agent);
  return {
  beginRun: rule.assign(act.beginRun),
  emitRunStarted: rule.emit(act.emitRunStarted),
  recordCancelGrace: assign({ cancelGraceMs: ({ event }) => as(event, 'cancel').graceMs ?? DEFAULT_CANCEL_GRACE_MS }),
  takeStep: assign({ brain: ({ context }) => takeStep(context.brain, decisionPolicy(agent, context)) }),
  rewindBrain: assign({ brain: ({ context, event }) => feedBrain(context.brain, { type: 'rewindTo', len: as(event, 'rewind').len }) }),
  openPoint: assignWith<OperationHook>(({ context }, hook) => ({ operations: openPoint(context.operations, plan, hook, pointKey(context, hook)) })),
  requestOperations: rule.send(act.requestOperations),
  applyOperated: rule.effects(act.acceptOperated),
  emitOperationYielded: rule.emit(act.emitOperationYielded),
  applyResume: assign({
    operations: ({ context, event }) => applyResumed(context.operations, plan, (verdictOf(agent, context, event) as Extract<ResumeVerdict, { type: 'accepted' }>).output),
  }),
  failOperation: rule.effects(act.failOperation),
  refreshExtras: rule.assign(act.refreshExtras),
  prune: assign({ brain: ({ context }) => applyPrune(context.brain, pendingPrune(context.brain, context.policy, pruning, agent.config.pruner)!) }),
  emitPruned: emit(({ context }) => ({ type: 'prune.finished' as const, ...pruneReport(agent, context) })),
  trace: ({ context, event, self }: Args & { self: AnyActorRef }, mark: TraceMark) =>
    tracing && traceMark(tracing, mark, { context, event, self, prune: () => pruneReport(agent, context), waiting: () => waitingCalls(context, maxCalls) }),
  recordTrace: rule.assign(act.recordTrace),
  };
}

/** The actions that hand a step to the IO and take its result back. */
function stepActions(agent: CompiledAgent) {
  const { plan, maxCalls } = agent;
  const rule = bind(agent);
  return {
  requestModel: rule.send(act.requestModel),
  requestToolset: sendTo('io', ({ context }): IoRequest => ({ type: 'toolset', key: toolsetKey(context) })),
  // The run's first estimate counted the agent's own tools: the listed ones join the measure now.
  recordOffered: rule.assign(act.recordOffered),
  /** Hands the runnable calls to the IO; `announce`: the IO reports each start (else the chart did, see announceBatch). */
  requestTools: sendWith<boolean>(({ context }, announce) => act.requestTools(agent, context, announce)),
  /**
   * A new batch, on the common path: every call shows up in a UI's trace at once. Calls answered
   * up front (an unknown tool, past the per-reply limit) start and finish here; the others start,
   * handed to the IO in the same step.
   */
  announceBatch: rule.effects(act.announceBatch),
  requestCompaction: rule.send(act.requestCompaction),
  abortIo: sendTo('io', { type: 'abort' } satisfies IoRequest),
  // Checked against the tools the model was offered: the run's recorded set (see ToolSource).
  acceptReply: assign(({ context, event }) => afterReply(agent, context, answerOf(agent, context, event))),
  emitTurnFinished: rule.emit(act.emitTurnFinished),
  journalToolResult: assign({ toolJournal: ({ context, event }) => journalResult(context.toolJournal, as(event, 'io.toolFinished').result) }),
  emitToolStarted: emit(({ context, event }) => toolStarted(context, as(event, 'io.toolStarted').call)),
  emitToolFinished: rule.emit(act.emitToolFinished),
  acceptToolResults: assign(({ context }) => ({ brain: applyToolResults(context, maxCalls), ...resetBatch(agent, context) })),
  acceptCompaction: rule.assign(act.acceptCompaction),
  emitCompactionFinished: rule.emit(act.emitCompactionFinished),
  failWith: assignWith<FailureType>(({ context, event }, type) => ({ brain: feedBrain(context.brain, { type: 'fail', error: errorInfo(type, as(event, 'io.failed').error) }) })),
  /** Seed 003: operations keep what the interrupted step received, calls are answered once, the run ends Cancelled. */
  cancelRun: rule.effects(act.cancelRun),
  /** A hook that returned while the run was being cancelled: its state is kept, nothing else it asked for. */
  keepOperatedState: assign({
    operations: ({ context, event }) => {
      const { index, output } = as(event, 'io.operated');
      return output && 'state' in output ? applyOperated(context.operations, plan, index, { state: output.state }) : context.operations;
    },
  }),
  sealRun: rule.assign(act.sealRun),
  steerRun: assign({
    brain: ({ context, event }) => feedBrain(context.brain, { type: 'steer', message: asUserMessage(as(event, 'steer').message) }),
  }),
  changePolicy: assign({ policy: ({ context, event }) => PolicySchema.parse({ ...context.policy, ...as(event, 'policy').policy }) }),
  rejectPolicy: rule.emit(act.rejectPolicy),
  rejectEvent: emit(({ event, self }) => ({
    type: 'event.rejected' as const,
    event: (event.type === 'event.malformed' ? event.of : String(event.type)).slice(0, 100),
    reason:
      externalEventProblem(event) ??
      (event.type === 'operation.resume' && event.operation === APPROVALS_OPERATION
        ? approvalResumeProblem(event)
        : null) ??
      (event.type === 'operation.resume' && self.getSnapshot().context.operations.waiting
        ? (verdictOf(agent, self.getSnapshot().context, event) as { reason: string }).reason
        : `not accepted now (the agent is ${JSON.stringify(self.getSnapshot().value)})`),
  })),
  emitTextDelta: rule.emit(act.emitTextDelta),
  /** A model call starts: its attempt is counted (stored before it runs); a later one voids the text before it. */
  startAttempt: effectsWith<'retry' | 'resumed'>(({ context }, reason) => act.startAttempt(agent, context, reason)),
  emitRetry: rule.emit(act.emitRetry),
  finishRun: rule.assign(act.finishRun),
  emitRunFinished: rule.emit(act.emitRunFinished),
  };
}

/** What the chart runs with for one compiled agent: its IO actor, delays, guards and actions. */
function implementationsOf(agent: CompiledAgent) {
  const guardrails = guardrailImplementations(agent);
  const budget = budgetImplementations(agent);
  const structuredOutput = structuredOutputImplementations(agent);
  const handoffs = handoffImplementations(agent);
  const inDoubt = inDoubtImplementations(agent);
  const fallback = fallbackImplementations(agent);
  const repetition = repetitionImplementations(agent);
  const approvals = approvalImplementations(agent);
  const subagents = subagentImplementations(agent);
  return {
    actors: { io: ioLogic(agent.io) },
    delays: {
      cancelGrace: ({ context }: Args) => context.cancelGraceMs ?? DEFAULT_CANCEL_GRACE_MS,
      ...budget.delays,
    },
    guards: { ...guardsOf(agent), ...guardrails.guards, ...budget.guards, ...structuredOutput.guards, ...handoffs.guards, ...inDoubt.guards, ...fallback.guards, ...repetition.guards, ...approvals.guards, ...subagents.guards },
    actions: { ...runActions(agent), ...stepActions(agent), ...guardrails.actions, ...budget.actions, ...structuredOutput.actions, ...handoffs.actions, ...inDoubt.actions, ...fallback.actions, ...repetition.actions, ...approvals.actions, ...subagents.actions },
  };
}

type Implementations = ReturnType<typeof implementationsOf>;

/**
 * The driver's setup: the names of its IO actor, delays, guards and actions, typed from the
 * implementations each agent provides (`implementationsOf`), so the chart below is checked
 * against them without holding an agent.
 */
const driver = setup({
  types,
  actors: {} as Implementations['actors'],
  delays: {} as Implementations['delays'],
  guards: {} as Implementations['guards'],
  actions: {} as Implementations['actions'],
});

/** The driver's chart: the states a user reads, top to bottom, and what moves between them. */
const chart = driver.createStateConfig({
  initial: 'Idle',
  on: {
    policy: [{ guard: 'policyAcceptable', actions: 'changePolicy' }, { actions: 'rejectPolicy' }],
    // A decision outside a run is refused as a decision (the trace records why), never taken.
    approve: { actions: 'recordDecision' },
    deny: { actions: 'recordDecision' },
    'doubt.decide': { actions: 'decideDoubt' },
    // An event from outside whose payload does not fit its type, in any state (see `checkedExternal`).
    'event.malformed': [{ guard: 'malformedPolicy', actions: 'rejectPolicy' }, { actions: 'rejectEvent' }],
    'telemetry.traced': [{ guard: 'fromTelemetry', actions: 'recordTrace' }, { actions: 'rejectEvent' }],
    // Whatever no state took: refused, reported, nothing changed.
    ...Object.fromEntries(externalEventTypes.filter((type) => !['policy', 'approve', 'deny', 'doubt.decide'].includes(type)).map((type) => [type, { actions: 'rejectEvent' }])),
    '*': { guard: 'unknownExternal', actions: 'rejectEvent' },
  },
  states: {
    Idle: {
      always: [
        // Input the actor was created with that does not pass its check ends it at once, Failed(InvalidInput) (see actor-input.ts).
        { guard: 'inputRefused', target: 'Done' },
        { guard: 'promptQueued', target: 'Running', actions: ['beginRun', 'emitRunStarted', { type: 'trace', params: 'run.started' }] },
      ],
      on: {
        input: { target: 'Running', actions: ['beginRun', 'emitRunStarted', { type: 'trace', params: 'run.started' }] },
        // Nothing to continue is not an error: a session opened at rest is resumed as a matter of course.
        resume: [
          { guard: 'runInFlight', target: 'Running', actions: { type: 'trace', params: 'run.resumed' } },
          {},
        ],
        rewind: { guard: 'rewindable', actions: 'rewindBrain' },
      },
    },
    Running: {
      // One IO actor per run: it runs every side effect through the executor. An idle session has none.
      invoke: { id: 'io', src: 'io' },
      initial: 'Start',
      on: {
        cancel: [
          // A hook in flight gets its grace (its signal aborts at once) to return what it received.
          { guard: and(['hookInFlight', 'cancelWaits']), target: '.Cancelling', actions: ['abortIo', 'recordCancelGrace'] },
          { target: '.Start', actions: ['abortIo', 'cancelRun'] },
        ],
        seal: { target: '.Start', actions: ['abortIo', 'sealRun'] },
        steer: [{ guard: 'steersChild', actions: 'forwardToChild' }, { actions: 'steerRun' }],
        // A raise while the run goes: the limits it names hold for the rest of the run.
        'budget.raise': [{ guard: 'raiseRefused', actions: 'refuseRaise' }, { actions: 'raiseBudget' }],
        // A user message sent while a run goes is steering: delivered at the next coherent point.
        input: { actions: 'steerRun' },
        approve: { actions: ['recordDecision', 'forwardToChild', { type: 'trace', params: 'approval.decided' }] },
        deny: { actions: ['recordDecision', 'forwardToChild', { type: 'trace', params: 'approval.decided' }] },
        'doubt.decide': { actions: 'decideDoubt' },
        // The same decision as the approvals operation's resume: `{ operation: 'approvals', payload }`.
        'operation.resume': { guard: 'approvalResume', actions: ['recordDecision', 'forwardToChild', { type: 'trace', params: 'approval.decided' }] },
        'io.subagent': { guard: 'currentBatch', actions: 'acceptSubagentReport' },
        'io.textDelta': { guard: 'currentModelCall', actions: 'emitTextDelta' },
        'io.retry': { guard: 'currentModelCall', actions: [{ type: 'startAttempt', params: 'retry' }, 'emitRetry', { type: 'trace', params: 'model.retry' }] },
      },
      states: {
        /** Between two steps: settles what must come first (see `betweenSteps`); the policy is re-read on every step. */
        Start: { always: alwaysOf(stepOrder.Start) },
        /** Makes the request ready (prompt parts, pruning) and asks the brain for its step (see `deciding`). */
        Deciding: { always: alwaysOf(stepOrder.Deciding) },
        /** What precedes a model call, then the call (see `callLLM`). */
        CallLLM: { always: alwaysOf(stepOrder.CallLLM) },
        /** What precedes a tool batch, then the batch (see `callTools`). */
        CallTools: { always: alwaysOf(stepOrder.CallTools) },
        /** Past a limit that pauses: waits for a raise that lifts it (the same run goes on) or a seal. */
        BudgetPaused: {
          entry: ['markPaused', 'emitBudgetPaused'],
          // A provider's usage limit: the same model call again at the stored time.
          after: { usageLimitWait: { guard: 'usageLimited', target: 'AwaitingModel', actions: 'liftUsageLimit' } },
          on: {
            // Restored while waiting for that time: the timer is armed again from the stored time.
            'io.attached': { guard: 'usageLimited', target: 'BudgetPaused', reenter: true },
            'budget.raise': [
              { guard: 'usageLimited', target: 'AwaitingModel', actions: 'raiseBudget' },
              { guard: 'raiseRefused', actions: 'refuseRaise' },
              { target: 'Start', actions: 'raiseBudget' },
            ],
            'operation.resume': [
              { guard: and(['budgetResume', 'usageLimited']), target: 'AwaitingModel', actions: 'raiseBudget' },
              { guard: and(['budgetResume', 'raiseRefused']), actions: 'refuseRaise' },
              { guard: 'budgetResume', target: 'Start', actions: 'raiseBudget' },
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
            cancel: { target: 'Start', actions: 'cancelRun' },
          },
        },
        /** An operation yielded: the run waits here for `operation.resume` (the context names the operation). */
        AwaitingOperation: {
          entry: 'emitOperationYielded',
          on: {
            'operation.resume': [
              { guard: 'resumeRefused', actions: 'rejectEvent' },
              { guard: 'resumeFailed', target: 'Start', actions: 'failOperation' },
              { target: 'Start', actions: 'applyResume' },
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
          after: { budgetDeadline: { guard: 'deadlineSeals', target: 'Start', actions: ['abortIo', 'sealAtDeadline'] } },
          on: {
            'io.attached': { actions: 'requestToolset' },
            'io.listed': { guard: 'currentToolset', target: 'Start', actions: 'recordOffered' },
            'io.failed': { guard: 'currentToolset', target: 'Start', actions: { type: 'failWith', params: 'ModelError' } },
          },
        },
        AwaitingModel: {
          entry: [{ type: 'startAttempt', params: 'resumed' }, 'requestModel'],
          // The time budget is a deadline on the call in flight (see deadline.ts): aborted, the run sealed or paused.
          after: {
            budgetDeadline: [
              { guard: 'deadlineSeals', target: 'Start', actions: ['abortIo', 'sealAtDeadline'] },
              { guard: 'deadlinePauses', target: 'BudgetPaused', actions: 'abortIo' },
            ],
          },
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
          // A batch in flight past the time budget is aborted and the run sealed; a pausing budget lets it finish (a tool's effect is not redone).
          after: { budgetDeadline: { guard: 'deadlineSeals', target: 'Start', actions: ['abortIo', 'sealAtDeadline'] } },
          always: [
            // A transfer past maxHandoffs is refused and ends the run (agents handing round in a cycle).
            { guard: and(['batchComplete', 'handsOff', 'handoffLimitReached']), target: 'Start', actions: 'refuseHandoff' },
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
                  actions: ['recordDecision', 'forwardToChild', { type: 'trace', params: 'approval.decided' }, { type: 'requestTools', params: true }],
                },
                deny: { actions: ['recordDecision', 'forwardToChild', { type: 'trace', params: 'approval.decided' }] },
                'operation.resume': {
                  guard: 'approvalResume',
                  actions: ['recordDecision', 'forwardToChild', { type: 'trace', params: 'approval.decided' }, { type: 'requestTools', params: true }],
                },
                'doubt.decide': { actions: ['decideDoubt', { type: 'requestTools', params: true }] },
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
          after: { budgetDeadline: { guard: 'deadlineSeals', target: 'Start', actions: ['abortIo', 'sealAtDeadline'] } },
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
});

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
  return hardened(forAgent(agent, implementationsOf(agent)), agent, agent.io);
}

/**
 * The chart as XState builds it, once per process: building its state nodes is most of what a
 * machine costs (about 1.1 ms of a 1.2 ms `createAgentMachine` here), and they depend on no agent.
 */
let sharedChart: ReturnType<typeof buildChart> | undefined;
const buildChart = () =>
  driver.createMachine({
    ...chart,
    id: 'agent',
    // Every agent gives its own (see `forAgent`): this one is never called.
    context: () => {
      throw new Error('loopchart: the shared agent chart has no context of its own');
    },
    output: ({ context }) => outputOf(context)!,
  });

type ChartMachine = ReturnType<typeof buildChart>;

/** The machine methods XState binds to their machine in its constructor. */
const BOUND = ['transition', 'getInitialSnapshot', 'getPersistedSnapshot', 'restoreSnapshot', 'start'] as const;

/**
 * One agent's machine over the shared chart: what `machine.provide(...)` gives, without building
 * the chart's state nodes again. XState reads implementations and the context factory from the
 * machine a snapshot was made by (`snapshot.machine`), and the state nodes only for structure, so
 * the nodes are shared and the machine object is the agent's own. The output reads the context
 * alone, so the shared root's output serves every agent.
 */
function forAgent(agent: CompiledAgent, implementations: Implementations): ChartMachine {
  sharedChart ??= buildChart();
  const base = sharedChart;
  const prototype = Object.getPrototypeOf(base) as Record<(typeof BOUND)[number], (...args: never[]) => unknown>;
  const machine = Object.create(prototype) as ChartMachine;
  Object.assign(machine, base, {
    // A stored state comes from outside: checked as a persisted snapshot is.
    config: { ...base.config, context: ({ input }: { input: AgentInput | undefined }) => initialContext(agent, input) },
    implementations: { ...base.implementations, ...implementations },
  });
  for (const name of BOUND) (machine as unknown as Record<string, unknown>)[name] = prototype[name].bind(machine);
  return machine;
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
    // Every event from outside is read once, as data, and checked against its type before any guard sees it (see `checkedExternal`).
    transition: ((snapshot, event, scope) => machine.transition(snapshot, fromIo(event) || fromTelemetry(event) ? event : checkedExternal(event), scope)) as M['transition'],
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
      const implementations = { ...(machine as unknown as ChartMachine).implementations, actors: { io: ioLogic(next) } } as Implementations;
      return hardened(forAgent(agent, implementations) as unknown as M, agent, next);
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

/**
 * The driver: owns one conversation, asks the brain for the next step under the current
 * policy, hands the matching side effect to its IO and feeds the result back. Its own state is
 * only which IO is in flight, and its states carry the brain's names, so the inspector shows
 * the brain. This file is the chart and how one agent's machine is made from it; the guards and
 * actions it names live with the loop every agent runs (`src/agent/core/implementations.ts`) and
 * with each feature (`src/agent/<feature>/implementations.ts`), one record each.
 */
import { and, setup, stateIn, type ActorRefFrom, type AnyStateMachine } from 'xstate';
import { configuredBy, inAgent, types, type ContextHook, type RefusalHook } from '../src/agent/core/bind.js';
import { chartVariant } from '../src/agent/core/chart-variant.js';
import { compileAgent, markTraced, type CompiledAgent } from '../src/agent/core/compile.js';
import type { AgentConfig } from '../src/agent/core/config.js';
import { registerPricing } from '../src/agent/core/pricing.js';
import { initialContext, restoredContext } from '../src/agent/core/driver-rules.js';
import { beginRunWith, coreImplementations, rejectEventWith } from '../src/agent/core/implementations.js';
import { fromIo, ioLogic, type IoDeps } from '../src/agent/core/io.js';
import { alwaysOf, stepOrder } from '../src/agent/core/step-order.js';
import { approvalImplementations } from '../src/agent/approvals/implementations.js';
import { budgetImplementations } from '../src/agent/budget/implementations.js';
import { cancelImplementations } from '../src/agent/cancel/implementations.js';
import { fallbackImplementations } from '../src/agent/fallback/implementations.js';
import { guardrailImplementations } from '../src/agent/guardrails/implementations.js';
import { handoffImplementations } from '../src/agent/handoffs/implementations.js';
import { inDoubtImplementations } from '../src/agent/in-doubt/implementations.js';
import { operationImplementations } from '../src/agent/operations/implementations.js';
import { repetitionImplementations } from '../src/agent/repetition/implementations.js';
import { structuredOutputImplementations } from '../src/agent/structured-output/implementations.js';
import { subagentImplementations } from '../src/agent/subagents/implementations.js';
import { tracingImplementations } from '../src/agent/tracing/implementations.js';
import { resumeTrace } from '../src/agent/tracing/trace-marks.js';
import { fromTelemetry } from '../src/agent/protocol/agent-event.js';
import { outputOf, runInFlight, type AgentInput } from '../src/agent/protocol/actor-types.js';
import { checkedExternal, externalEventTypes, type ChildStatuses } from '../src/agent/protocol/events.js';
import { composeExecutors, type Executor } from '../src/agent/protocol/executor.js';
import type { FeatureHandlerMap, FeatureHandlers } from '../src/agent/protocol/io-protocol.js';

/** A feature's record as the lists below read it: the hooks it may bring besides its guards, actions and delays (see `ContextHook`, `RefusalHook`, `FeatureHandlers`). */
type SliceHooks = {
  readonly guards: object;
  readonly runStart?: ContextHook | undefined;
  readonly restore?: ContextHook | undefined;
  readonly refusal?: RefusalHook | undefined;
  readonly io?: FeatureHandlers | undefined;
};

/** Every feature's record: a hook a slice declares joins the lists below by this list alone. */
const features: readonly SliceHooks[] = [
  guardrailImplementations,
  budgetImplementations,
  structuredOutputImplementations,
  handoffImplementations,
  inDoubtImplementations,
  fallbackImplementations,
  repetitionImplementations,
  approvalImplementations,
  operationImplementations,
  cancelImplementations,
  subagentImplementations,
  tracingImplementations,
];

/** The features' hooks of one kind, in list order. */
const hooksOf = (kind: 'runStart' | 'restore'): ContextHook[] => features.flatMap((slice) => slice[kind] ?? []);

/** What a run's start resets, feature by feature. */
const runStart = hooksOf('runStart');

/** What each feature checks of a stored context against this agent. */
const restoreChecks = hooksOf('restore');

/** Why a feature refuses an event no transition took, asked in list order. */
const refusals = features.flatMap((slice) => slice.refusal ?? []);

/** The IO handlers features bring for their own requests, by request type. */
const featureHandlers: FeatureHandlerMap = new Map(features.flatMap((slice) => Object.entries(slice.io ?? {})));

/**
 * The chart's implementations, built once per process: its IO actor, and the delays, guards and
 * actions of the core loop and of each feature, each from its own folder (`implementations.ts`).
 * They read the agent whose transition runs (see `inAgent`), so every agent shares them.
 */
const implementations = {
  delays: { ...budgetImplementations.delays, ...cancelImplementations.delays },
  guards: {
    ...coreImplementations.guards,
    ...guardrailImplementations.guards,
    ...budgetImplementations.guards,
    ...structuredOutputImplementations.guards,
    ...handoffImplementations.guards,
    ...inDoubtImplementations.guards,
    ...fallbackImplementations.guards,
    ...repetitionImplementations.guards,
    ...approvalImplementations.guards,
    ...operationImplementations.guards,
    ...cancelImplementations.guards,
    ...subagentImplementations.guards,
    ...tracingImplementations.guards,
  },
  actions: {
    ...coreImplementations.actions,
    beginRun: beginRunWith(runStart),
    rejectEvent: rejectEventWith(refusals),
    ...guardrailImplementations.actions,
    ...budgetImplementations.actions,
    ...structuredOutputImplementations.actions,
    ...handoffImplementations.actions,
    ...inDoubtImplementations.actions,
    ...fallbackImplementations.actions,
    ...repetitionImplementations.actions,
    ...approvalImplementations.actions,
    ...operationImplementations.actions,
    ...cancelImplementations.actions,
    ...subagentImplementations.actions,
    ...tracingImplementations.actions,
  },
};

/**
 * The driver's setup: its delays, guards and actions, and the name of its IO actor, which each
 * agent gives (it runs the agent's models, tools and executor; see `forAgent`).
 */
const driver = setup({ types, actors: {} as { io: ReturnType<typeof ioLogic> }, ...implementations });

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
          // Tool calls running: a result already on its way is kept (see Ending).
          { guard: and([stateIn('#agent.Running.AwaitingTools'), 'callsRunning', 'cancelWaits']), target: '.Ending', actions: 'beginEnding' },
          { target: '.Start', actions: ['abortIo', 'cancelRun'] },
        ],
        seal: [
          { guard: 'targetsChild', actions: 'forwardToChild' },
          { guard: and([stateIn('#agent.Running.AwaitingTools'), 'callsRunning']), target: '.Ending', actions: 'beginEnding' },
          { target: '.Start', actions: ['abortIo', 'sealRun'] },
        ],
        steer: [{ guard: 'steersChild', actions: 'forwardToChild' }, { actions: ['steerRun', 'noteSteer'] }],
        // A raise while the run goes: the limits it names hold for the rest of the run, the deadline of a side effect in flight included.
        'budget.raise': [{ guard: 'targetsChild', actions: 'forwardToChild' }, { guard: 'raiseRefused', actions: 'refuseRaise' }, { actions: ['raiseBudget', 'rearmDeadline'] }],
        // A user message sent while a run goes is steering: delivered at the next coherent point.
        input: { actions: ['steerRun', 'noteSteer'] },
        approve: { actions: ['recordDecision', 'forwardToChild', { type: 'trace', params: 'approval.decided' }] },
        deny: { actions: ['recordDecision', 'forwardToChild', { type: 'trace', params: 'approval.decided' }] },
        'doubt.decide': [{ guard: 'doubtAmbiguous', actions: 'refuseAmbiguousDoubt' }, { guard: 'decidesForChild', actions: 'forwardToChild' }, { actions: 'decideDoubt' }],
        // The same decision as the approvals operation's resume: `{ operation: 'approvals', payload }`.
        'operation.resume': [
          // A resume for a child's wait (its budget, its operation) goes down to it.
          { guard: 'targetsChild', actions: 'forwardToChild' },
          { guard: 'approvalResume', actions: ['recordDecision', 'forwardToChild', { type: 'trace', params: 'approval.decided' }] },
        ],
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
          after: {
            usageLimitWait: [
              { guard: 'usageLimitDue', target: 'AwaitingModel', actions: 'liftUsageLimit' },
              // Fired before the stored time by the run's clock: armed again for the time left.
              { guard: 'usageLimited', actions: 'rearmUsageLimit' },
            ],
          },
          on: {
            // Restored while waiting for that time: the timer is armed again from the stored time.
            'io.attached': { guard: 'usageLimited', target: 'BudgetPaused', reenter: true },
            'budget.raise': [
              // Meant for a child: none runs while this run is paused between steps, so it is refused there.
              { guard: 'targetsChild', actions: 'forwardToChild' },
              { guard: 'usageLimited', target: 'AwaitingModel', actions: 'raiseBudget' },
              { guard: 'raiseRefused', actions: 'refuseRaise' },
              // Paused mid-batch (the time limit passed while calls waited): back to the batch, its decisions kept, the calls approved meanwhile run.
              { guard: and(['pausedMidBatch', 'needsApprovalCheck']), target: 'AwaitingTools.CheckingApprovals', actions: 'raiseBudget' },
              { guard: and(['pausedMidBatch', 'batchHeld']), target: 'AwaitingTools.Working', actions: 'raiseBudget' },
              // Paused as the batch would start (the limit already passed): the batch starts as it would have.
              { guard: 'pausedMidBatch', target: 'AwaitingTools', actions: 'raiseBudget' },
              { target: 'Start', actions: 'raiseBudget' },
            ],
            'operation.resume': [
              { guard: 'targetsChild', actions: 'forwardToChild' },
              { guard: and(['budgetResume', 'usageLimited']), target: 'AwaitingModel', actions: 'raiseBudget' },
              { guard: and(['budgetResume', 'raiseRefused']), actions: 'refuseRaise' },
              { guard: and(['budgetResume', 'pausedMidBatch', 'needsApprovalCheck']), target: 'AwaitingTools.CheckingApprovals', actions: 'raiseBudget' },
              { guard: and(['budgetResume', 'pausedMidBatch', 'batchHeld']), target: 'AwaitingTools.Working', actions: 'raiseBudget' },
              { guard: and(['budgetResume', 'pausedMidBatch']), target: 'AwaitingTools', actions: 'raiseBudget' },
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
            // Restored from a snapshot during the grace: the hook ran in a process that is gone, nothing can return (and no timer survived).
            'io.attached': { target: 'Start', actions: 'cancelRun' },
          },
        },
        /**
         * Cancelled or sealed while tool calls ran: their signals are aborted at once and no other
         * call starts, but a result that existed by then and had not reached the chart yet (a tool
         * that resolved in the same tick as the end, a result the IO or the executor was still
         * handing on) is taken as it arrives, for one macrotask; then (or once no started call
         * lacks its result) the run ends as asked, the calls still without a result answered interrupted.
         */
        Ending: {
          always: { guard: 'noCallRunning', target: 'Start', actions: ['abortIo', 'endAsAsked'] },
          after: { endingWait: { target: 'Start', actions: ['abortIo', 'endAsAsked'] } },
          on: {
            'io.toolFinished': { guard: 'currentBatch', actions: ['journalToolResult', 'emitToolFinished'] },
            'io.toolStarted': { guard: 'currentBatch', actions: 'emitToolStarted' },
            // A second end does not wait.
            cancel: { target: 'Start', actions: ['abortIo', 'cancelRun'] },
            seal: [{ guard: 'targetsChild', actions: 'forwardToChild' }, { target: 'Start', actions: ['abortIo', 'sealRun'] }],
            // Restored from a snapshot while it waited: nothing of the old process can arrive.
            'io.attached': { target: 'Start', actions: ['abortIo', 'endAsAsked'] },
          },
        },
        /** An operation yielded: the run waits here for `operation.resume` (the context names the operation). */
        AwaitingOperation: {
          entry: 'emitOperationYielded',
          on: {
            'operation.resume': [
              { guard: 'targetsChild', actions: 'forwardToChild' },
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
          after: { budgetDeadline: [{ guard: 'deadlineSeals', target: 'Start', actions: ['abortIo', 'sealAtDeadline'] }, { guard: 'deadlineAhead', actions: 'rearmDeadline' }] },
          on: {
            // Restored: the deadline armed again (XState does not carry timers in a snapshot); past it, nothing is listed again.
            'io.attached': [{ guard: 'deadlineSeals', actions: 'rearmDeadline' }, { actions: ['requestToolset', 'rearmDeadline'] }],
            'io.listed': { guard: 'currentToolset', target: 'Start', actions: 'recordOffered' },
            'io.failed': { guard: 'currentToolset', target: 'Start', actions: { type: 'failWith', params: 'ModelError' } },
          },
        },
        AwaitingModel: {
          entry: ['startModelCall', 'requestModel'],
          // The time budget is a deadline on the call in flight (see deadline.ts): aborted, the run sealed or paused.
          after: {
            budgetDeadline: [
              { guard: 'deadlineSeals', target: 'Start', actions: ['abortIo', 'sealAtDeadline'] },
              { guard: 'deadlinePauses', target: 'BudgetPaused', actions: 'abortIo' },
              // Fired before the limit by the run's clock (see `deadlineAhead`): armed again for the time left.
              { guard: 'deadlineAhead', actions: 'rearmDeadline' },
            ],
          },
          on: {
            // Restored: the call made again under the deadline armed again; past it, not made again (the deadline seals or pauses at once).
            'io.attached': [
              { guard: 'deadlineSeals', actions: 'rearmDeadline' },
              { guard: 'deadlinePauses', actions: 'rearmDeadline' },
              { actions: [{ type: 'startAttempt', params: 'resumed' }, 'requestModel', 'rearmDeadline'] },
            ],
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
          // A batch in flight past the time budget is aborted and the run sealed; a pausing budget lets
          // the calls handed to the IO finish (a tool's effect is not redone) and starts no other.
          after: {
            budgetDeadline: [
              // With an output schema the run first asks for its answer, as a budget passed between steps does.
              { guard: 'answerAtDeadline', target: 'Start', actions: ['abortIo', 'cutForAnswer'] },
              { guard: 'deadlineSeals', target: 'Start', actions: ['abortIo', 'sealAtDeadline'] },
              // Still asking which calls need a person: nothing runs yet; the check is asked again after the raise.
              { guard: and(['deadlinePauses', stateIn('#agent.Running.AwaitingTools.CheckingApprovals')]), target: 'BudgetPaused', actions: 'abortIo' },
              { guard: 'deadlinePauses', actions: 'holdBatch' },
              { guard: 'deadlineAhead', actions: 'rearmDeadline' },
            ],
          },
          always: [
            // A transfer past maxHandoffs is refused and ends the run (agents handing round in a cycle).
            { guard: and(['batchComplete', 'handsOff', 'handoffLimitReached']), target: 'Start', actions: 'refuseHandoff' },
            { guard: and(['batchComplete', 'handsOff']), target: 'HandingOff', actions: ['handOff', 'acceptToolResults'] },
            { guard: 'batchComplete', target: 'Start', actions: 'acceptToolResults' },
            // Held at the time limit with calls waiting: once the calls in flight finished, the run pauses with the batch open.
            { guard: 'heldBatchDone', target: 'BudgetPaused' },
          ],
          on: {
            // Restored while no call runs (all wait for a person, or in doubt): the deadline armed again all the same.
            'io.attached': { actions: 'rearmDeadline' },
            'io.toolStarted': { guard: 'currentBatch', actions: 'emitToolStarted' },
            // The IO's answer to a hold: the calls it had queued, not started, wait for the raise.
            'io.toolsHeld': { guard: and(['currentBatch', 'batchHeld']), actions: 'holdQueued' },
            'io.toolFinished': [
              // The last result of the batch feeds it at once (what `batchComplete` below would do one microstep later).
              { guard: and(['currentBatch', 'completesBatch']), target: 'Start', actions: ['emitToolFinished', 'acceptLastResult'] },
              { guard: 'currentBatch', actions: ['journalToolResult', 'emitToolFinished'] },
            ],
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
                'io.attached': [
                  { guard: 'deadlineSeals', actions: 'rearmDeadline' },
                  { guard: 'batchHeld', actions: ['requestHeldTools', 'rearmDeadline'] },
                  { actions: [{ type: 'requestTools', params: true }, 'rearmDeadline'] },
                ],
                // A call found in doubt: the batch waits for a person beside the calls that run (see Working.Doubt).
                'io.toolInDoubt': { guard: 'currentBatch', target: 'Working', actions: 'markInDoubt' },
              },
            },
            CheckingApprovals: {
              entry: 'requestApprovals',
              on: {
                'io.attached': [
                  { guard: 'deadlineSeals', actions: 'rearmDeadline' },
                  { guard: 'deadlinePauses', actions: 'rearmDeadline' },
                  { actions: ['requestApprovals', 'rearmDeadline'] },
                ],
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
                // A decision may make a call runnable while others still run: hand it over at once
                // (a batch held at the time limit keeps the decision, and the call waits for the raise).
                approve: [
                  { guard: 'batchHeld', actions: ['recordDecision', 'forwardToChild', { type: 'trace', params: 'approval.decided' }] },
                  { actions: ['recordDecision', 'forwardToChild', { type: 'trace', params: 'approval.decided' }, { type: 'requestTools', params: true }] },
                ],
                deny: { actions: ['recordDecision', 'forwardToChild', { type: 'trace', params: 'approval.decided' }] },
                'operation.resume': [
                  { guard: and(['approvalResume', 'batchHeld']), actions: ['recordDecision', 'forwardToChild', { type: 'trace', params: 'approval.decided' }] },
                  { guard: 'approvalResume', actions: ['recordDecision', 'forwardToChild', { type: 'trace', params: 'approval.decided' }, { type: 'requestTools', params: true }] },
                ],
                'doubt.decide': [
                  { guard: 'doubtAmbiguous', actions: 'refuseAmbiguousDoubt' },
                  { guard: 'decidesForChild', actions: 'forwardToChild' },
                  { guard: 'batchHeld', actions: 'decideDoubt' },
                  { actions: ['decideDoubt', { type: 'requestTools', params: true }] },
                ],
              },
              states: {
                Execution: {
                  initial: 'Executing',
                  states: {
                    Executing: {
                      entry: { type: 'requestTools', params: true },
                      always: { guard: 'nothingRunnable', target: 'Paused' },
                      on: {
                        'io.attached': [
                          { guard: 'deadlineSeals', actions: 'rearmDeadline' },
                          { guard: 'batchHeld', actions: ['requestHeldTools', 'rearmDeadline'] },
                          { actions: [{ type: 'requestTools', params: true }, 'rearmDeadline'] },
                        ],
                      },
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
          after: { budgetDeadline: [{ guard: 'deadlineSeals', target: 'Start', actions: ['abortIo', 'sealAtDeadline'] }, { guard: 'deadlineAhead', actions: 'rearmDeadline' }] },
          on: {
            'io.attached': [{ guard: 'deadlineSeals', actions: 'rearmDeadline' }, { actions: ['requestCompaction', 'rearmDeadline'] }],
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
  return hardened(forAgent(agent, agent.io), agent, agent.io);
}

/**
 * The chart as XState builds it, once per process and variant (see `chartFor`), with its
 * implementations: building its state nodes is most of what a machine costs, and they depend on
 * no agent.
 */
const buildChart = (config: typeof chart) =>
  driver.createMachine({
    ...config,
    id: 'agent',
    // Every agent gives its own (see `forAgent`): this one is never called.
    context: () => {
      throw new Error('loopchart: the shared agent chart has no context of its own');
    },
    output: ({ context }) => outputOf(context)!,
  });

/** Built on first use (see `wholeChart`). */
let whole: ReturnType<typeof buildChart> | undefined;

/**
 * The whole driver chart as XState builds it, every feature's branches in it (an agent runs its
 * variant; see `chartFor`): what a viewer draws.
 *
 * @example
 * ```ts
 * console.log(Object.keys(wholeChart().root.states.Running!.states).slice(0, 2)); // ['Start', 'Deciding']
 * ```
 */
export const wholeChart = () => (whole ??= buildChart(chart));

/** The guards and actions of the chart a feature made with `configured` or `configuredAction`, grouped by their test (`agent.budget`, operations, ...). */
type ConfiguredGroup = { isConfigured: (agent: CompiledAgent) => boolean; guards: string[]; actions: string[] };

/** An agent's variant is the set of these tests it fails. */
const configuredGroups: ConfiguredGroup[] = [];
for (const kind of ['guards', 'actions'] as const) {
  for (const [name, implementation] of Object.entries(implementations[kind])) {
    const isConfigured = configuredBy(implementation);
    if (!isConfigured) continue;
    let group = configuredGroups.find((entry) => entry.isConfigured === isConfigured);
    if (!group) configuredGroups.push((group = { isConfigured, guards: [], actions: [] }));
    group[kind].push(name);
  }
}

/** The variants built so far, by the tests their agents fail (a few per process: one per set of features configured). */
const variants = new Map<string, ReturnType<typeof buildChart>>();

/**
 * The shared chart an agent runs: the variant without the branches and actions of the features
 * it is not configured with (see `chart-variant.ts`), built once per process for each such set.
 * An agent without a budget, for one, runs it without the deadline timers: XState raises a timer
 * whose delay is undefined at once, as an event of its own, which cost every model call and tool
 * batch a microstep. The states are the same in every variant, so a snapshot moves between them.
 */
function chartFor(agent: CompiledAgent) {
  const fails = configuredGroups.map(({ isConfigured }) => !isConfigured(agent));
  const key = fails.map(Number).join('');
  let machine = variants.get(key);
  if (!machine) {
    const dead = configuredGroups.filter((_, i) => fails[i]);
    const cannot = new Set(dead.flatMap((group) => group.guards));
    const idle = new Set(dead.flatMap((group) => group.actions));
    variants.set(key, (machine = buildChart(chartVariant(chart, 'agent', (name) => !cannot.has(name), (name) => !idle.has(name)))));
  }
  return machine;
}

type ChartMachine = ReturnType<typeof buildChart>;

/**
 * The machine methods that run the chart's guards and actions (XState binds the first five to
 * their machine in its constructor; a snapshot's `can` calls `getTransitionData`).
 */
const SCOPED = ['transition', 'getInitialSnapshot', 'getPersistedSnapshot', 'restoreSnapshot', 'start', 'microstep', 'getTransitionData'] as const;

/** Each scoped delay's own function: a machine derived from another scopes it to its own agent, not over the other's. */
const unscoped = new WeakMap<object, (...args: never[]) => unknown>();

/** `delay` run with `agent` as the current agent (whatever agent it was scoped to before). */
function scopedDelay<F extends (...args: never[]) => unknown>(agent: CompiledAgent, delay: F): F {
  const own = (unscoped.get(delay) ?? delay) as F;
  const scoped = inAgent(agent, own) as F;
  unscoped.set(scoped, own);
  return scoped;
}

/**
 * One agent's machine over a chart (the shared one, one a user's `provide` made, or the agent's
 * own machine when `withExecutor` or `withClock` derives another): what `machine.provide(...)`
 * gives, without building the chart's state nodes again. XState reads
 * implementations and the context factory from the machine a snapshot was made by
 * (`snapshot.machine`), and the state nodes only for structure, so the nodes are shared and the
 * machine object is the agent's own; its methods run with this agent as the current one (see
 * `inAgent`). The output reads the context alone, so the shared root's output serves every agent.
 * `io`: the IO actor's dependencies (none to keep those of a provided chart).
 */
function forAgent(agent: CompiledAgent, io: IoDeps | null, base: ChartMachine = chartFor(agent)): ChartMachine {
  const prototype = Object.getPrototypeOf(base) as Record<(typeof SCOPED)[number], (...args: unknown[]) => unknown>;
  const machine = Object.create(prototype) as ChartMachine;
  Object.assign(machine, base, {
    // A stored state comes from outside: checked as a persisted snapshot is.
    config: { ...base.config, context: ({ input }: { input: AgentInput | undefined }) => initialContext(agent, input, restoreChecks) },
    implementations: {
      ...base.implementations,
      ...(io && { actors: { io: ioLogic(io, featureHandlers) } }),
      // A host that arms the chart's timers itself (the stepper) reads its delays from the machine.
      delays: Object.fromEntries(Object.entries(base.implementations.delays).map(([name, delay]) => [name, typeof delay === 'function' ? scopedDelay(agent, delay) : delay])),
    },
  });
  for (const name of SCOPED) (machine as unknown as Record<string, unknown>)[name] = inAgent(agent, prototype[name].bind(machine));
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
    // A child's failure is taken only from XState, when that child has failed (see `childFailureProblem`).
    transition: ((snapshot, event, scope) =>
      machine.transition(snapshot, fromIo(event) || fromTelemetry(event) ? event : checkedExternal(event, (snapshot as { children?: ChildStatuses | undefined }).children ?? {}), scope)) as M['transition'],
    restoreSnapshot: ((snapshot, scope) => {
      const persisted = snapshot as { context?: unknown };
      const context = restoredContext(agent, persisted.context, restoreChecks);
      // A run restored in flight goes on without a `resume` event: its span continues the stored trace here.
      if (agent.tracing && (persisted as { value?: unknown }).value !== 'Idle' && runInFlight(context.brain)) resumeTrace(agent.tracing, context);
      return restore({ ...persisted, context } as never, scope);
    }) as M['restoreSnapshot'],
    provide: (implementations: Parameters<M['provide']>[0]) =>
      hardened(forAgent(agent, null, machine.provide(implementations) as unknown as ChartMachine) as unknown as M, agent, io),
    withExecutor(wrap: (inner: Executor) => Executor): WithExecutor<M> {
      const next = { ...io, executor: composeExecutors(io.executor, wrap) };
      markTraced(next.executor, agent.tracing);
      // Over this machine, not the shared chart: what a `provide` gave is kept.
      return hardened(forAgent(agent, next, machine as unknown as ChartMachine) as unknown as M, agent, next);
    },
    withClock(clock: () => number): WithExecutor<M> {
      // Over this machine, as withExecutor: what a `provide` gave is kept.
      const clocked = compileAgent({ ...agent.config, executor: io.executor, clock });
      return hardened(forAgent(clocked, clocked.io, machine as unknown as ChartMachine) as unknown as M, clocked, clocked.io);
    },
  };
  const hardenedMachine = new Proxy(machine, {
    get: (target, key, receiver) => (Object.hasOwn(wrapped, key) ? wrapped[key] : Reflect.get(target, key, receiver)),
    has: (target, key) => Object.hasOwn(wrapped, key) || Reflect.has(target, key),
  }) as WithExecutor<M>;
  // A parent that runs this machine as a child (agentTool) books what it spends at these prices.
  registerPricing(hardenedMachine, agent.pricing);
  return hardenedMachine;
}

export type AgentMachine = ReturnType<typeof createAgentMachine>;
export type AgentActor = ActorRefFrom<AgentMachine>;

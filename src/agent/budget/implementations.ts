/**
 * Budgets in the driver: the chart's guards, actions and delays for the per-run limits (tokens,
 * cost, tool calls, time) that seal or pause a run, their raise, the time budget's deadline on a
 * side effect in flight, and a provider's usage limit waited out; with the rules those read over
 * the compiled agent and the run's context (the limits themselves: budget.ts, budget-pause.ts,
 * deadline.ts, usage-limit.ts).
 */
import { cancel, enqueueActions, raise, stateIn } from 'xstate';
import { assigns, configured, configuredAction, delayOf, emits, rule, when, type Args, type ContextHook } from '../core/bind.js';
import type { CompiledAgent } from '../core/compile.js';
import type { AgentContext } from '../core/context.js';
import { batchKey, endRun, runnable } from '../core/driver-rules.js';
import type { Effect } from '../core/effects.js';
import { requestTools } from '../core/implementations.js';
import type { IoRequest } from '../protocol/io-protocol.js';
import { as, type AgentEvent } from '../protocol/agent-event.js';
import { budgetOverrun, type BudgetOverrun } from './budget.js';
import { activeMs, BUDGET_OPERATION, heldAt, heldWithout, limitsOf, pausedAt, pausesOn, raisedBy, raiseOf, raiseProblem } from './budget-pause.js';
import { DEADLINE_STATES, deadlineDelay, deadlineEventOf, deadlineOverrun, type DeadlineRun } from './deadline.js';
import { limitedUntil, limitLifted, resumeDelay, usageLimitWait } from './usage-limit.js';

/** Checked after tool results and before each model call, when the brain is between steps; paused time is not wall time. */
export const overrun = (agent: CompiledAgent, context: AgentContext): BudgetOverrun | null =>
  agent.budget && !context.brain.context.cancelled && !context.outputState?.finalCall && (context.brain.value === 'Start' || context.brain.value === 'AwaitingModel')
    ? budgetOverrun(limitsOf(agent.budget, context.budgetPause), agent.prices, {
        usage: context.runUsage,
        toolCalls: context.brain.context.totalToolCalls,
        elapsedMs: activeMs(context.runStartedAt, agent.clock(), context.budgetPause),
        // By model, each at its own prices (a child's at the child's); one price list: the usage at `prices`.
        costUsd: agent.pricing.run(context).costUsd,
      })
    : null;

/** An agent with a budget: only its runs go over one, pause on one, or have a deadline. */
const hasBudget = (agent: CompiledAgent) => agent.budget !== undefined;

/** What the time budget's deadline reads of the run (see deadline.ts). */
export const deadlineRun = (context: AgentContext): DeadlineRun => ({
  runStartedAt: context.runStartedAt,
  budgetPause: context.budgetPause,
  finalCall: !!context.outputState?.finalCall,
  cancelled: context.brain.context.cancelled,
});

/** The time budget passed while a side effect ran (the deadline's timer fired), or null. */
export const deadlinePassed = (agent: CompiledAgent, context: AgentContext) => deadlineOverrun(agent.budget, deadlineRun(context), agent.clock());

/** A limit passed whose kind seals: the seal reason. */
export const overBudget = (agent: CompiledAgent, context: AgentContext): string | null => {
  const over = overrun(agent, context);
  return over && !pausesOn(agent.budget!, over.kind) ? over.reason : null;
};

/**
 * The limit a paused run waits on: the first one passed between steps, or, paused mid-batch (the
 * time limit passed while calls of the batch waited, see `holdBatch`), the time limit.
 */
export const pausedOn = (agent: CompiledAgent, context: AgentContext): BudgetOverrun | null =>
  overrun(agent, context) ?? (pausedMidBatch(context) ? deadlinePassed(agent, context) : null);

/** Paused with a tool batch open: the time limit passed while calls of it waited. */
const pausedMidBatch = (context: AgentContext) => context.brain.value === 'AwaitingTools' && (context.budgetPause?.pausedAt ?? null) !== null;

/** Why a raise is refused (malformed, or it does not lift the limit the run paused on), or null. */
export const raiseRefusal = (agent: CompiledAgent, context: AgentContext, event: AgentEvent): string | null => {
  const change = raiseOf(event as never);
  if (!change) return `a raise needs { budget: { maxTokens?, maxCostUsd?, maxToolCalls?, maxDurationMs? } }`;
  const over = pausedOn(agent, context);
  return over && pausesOn(agent.budget!, over.kind) ? raiseProblem(over, change) : null;
};

/** The calls of a held batch that may still run: those handed to the IO before the hold (see `heldAt`). */
const heldRunning = (agent: CompiledAgent, context: AgentContext) => {
  const held = new Set(context.budgetPause?.held ?? []);
  return runnable(agent, context).filter((call) => held.has(call.id));
};

/** The batch is held: the time limit passed while calls of it waited, and no raise lifted it yet. */
const batchHeld = (context: AgentContext) => context.budgetPause?.held !== undefined && context.brain.value === 'AwaitingTools';

/** A held batch's request to the IO (a restored run's, or a decision's): only the calls it had handed over, which the IO runs once each. */
export function requestHeldTools(agent: CompiledAgent, context: AgentContext, _event: AgentEvent): IoRequest {
  return { ...requestTools(agent, context, true), calls: heldRunning(agent, context) };
}

/**
 * A raise: the limits it names hold from now, the paused time is banked. A batch held at the time
 * limit stays held while the limit is still passed; released, the calls decided meanwhile start
 * now (paused, they start when the run goes back to its batch, see the chart's `BudgetPaused`).
 */
export function raiseBudget(agent: CompiledAgent, context: AgentContext, event: AgentEvent): Effect[] {
  const raised = raisedBy(context.budgetPause, raiseOf(event as never)!, agent.clock());
  const held = context.budgetPause?.held;
  if (!held || !batchHeld(context)) return [{ assign: { budgetPause: raised } }];
  const stillPassed = deadlineOverrun(agent.budget, deadlineRun({ ...context, budgetPause: raised }), agent.clock())?.pauses === true;
  if (stillPassed) return [{ assign: { budgetPause: { ...raised, held } } }];
  const out: Effect[] = [{ assign: { budgetPause: raised } }];
  // Still in the batch, the calls decided meanwhile are handed over now (the IO runs each once); paused, the batch entered again hands them over.
  if (!pausedMidBatch(context)) out.push({ send: requestTools(agent, { ...context, budgetPause: raised }, true) });
  return out;
}

/**
 * The time limit passed with the batch in flight and a pausing budget: the calls handed to the
 * IO may finish, the others (waiting for a decision, in doubt) do not start; the IO is told to
 * start none other, and answers with the calls it still had queued behind `toolConcurrency`
 * (`io.toolsHeld`, see `holdQueued`). The run pauses once the calls started finished
 * (`heldBatchDone`), a decision given meanwhile kept.
 */
export function holdBatch(agent: CompiledAgent, context: AgentContext, _event: AgentEvent): Effect[] {
  return [
    { assign: { budgetPause: heldAt(context.budgetPause, runnable(agent, context).map((call) => call.id)) } },
    { send: { type: 'holdTools', key: batchKey(context) } },
  ];
}

export function sealOverBudget(agent: CompiledAgent, context: AgentContext, _event: AgentEvent): Partial<AgentContext> {
  return endRun(agent, context, { type: 'seal', reason: overBudget(agent, context)! });
}

/** The time budget's deadline passed with a side effect in flight (aborted beside this): the run is sealed by the budget, its calls answered interrupted. */
export function sealAtDeadline(agent: CompiledAgent, context: AgentContext, _event: AgentEvent): Partial<AgentContext> {
  return endRun(agent, context, { type: 'seal', reason: deadlinePassed(agent, context)!.reason });
}

export function emitBudgetPaused(agent: CompiledAgent, context: AgentContext, _event: AgentEvent): Effect[] {
  const out: Effect[] = [];
  const limited = context.budgetPause?.usageLimit;
  if (limited) return [...out, { emit: { type: 'operation.yielded', operation: BUDGET_OPERATION, reason: limited.reason, payload: { resumeAt: limited.resumeAt } } }];
  const { kind, used, limit, reason } = pausedOn(agent, context)!;
  out.push({ emit: { type: 'budget.paused', kind, used, limit, reason } });
  out.push({ emit: { type: 'operation.yielded', operation: BUDGET_OPERATION, reason, payload: { kind, used, limit } } });
  return out;
}

/** The event XState raises when the usage limit's wait in `Running.BudgetPaused` ends, its timer's id too. */
const USAGE_LIMIT_EVENT = 'xstate.after.usageLimitWait.agent.Running.BudgetPaused';

/** The guards, actions and delays the chart names for budgets. */
export const budgetImplementations = {
  // A run's time budget counts from its start; a pause is the run's own.
  runStart: ((agent) => ({ runStartedAt: agent.clock(), budgetPause: undefined })) satisfies ContextHook,
  delays: {
    usageLimitWait: delayOf(({ agent, context }) => resumeDelay(context.budgetPause, agent.clock())),
    // No time budget: undefined, and XState arms no timer (the after event is raised and its guards refuse it).
    budgetDeadline: delayOf(({ agent, context }) => deadlineDelay(agent.budget, deadlineRun(context), agent.clock()) as number),
  },
  guards: {
    runOverBudget: configured(hasBudget, ({ agent, context }) => overBudget(agent, context) !== null),
    deadlineSeals: configured(hasBudget, ({ agent, context }) => deadlinePassed(agent, context)?.pauses === false),
    deadlinePauses: configured(hasBudget, ({ agent, context }) => deadlinePassed(agent, context)?.pauses === true),
    /**
     * The deadline's timer fired while the run's clock says its time is not up: a timer counts on
     * the process's monotonic clock, the budget on `clock` (wall time by default), and the two
     * part by a rounding ms or by a step of the wall clock. The timer is armed again for the time
     * left, instead of leaving the side effect in flight with no deadline at all.
     */
    deadlineAhead: configured(hasBudget, ({ agent, context }) => deadlineDelay(agent.budget, deadlineRun(context), agent.clock()) !== undefined && deadlinePassed(agent, context) === null),
    budgetPaused: configured(hasBudget, ({ agent, context }) => overrun(agent, context) !== null && overBudget(agent, context) === null),
    batchHeld: configured(hasBudget, ({ context }) => batchHeld(context)),
    /** Every call the held batch had handed to the IO has its result (or waits in doubt): the run pauses with the batch open. */
    heldBatchDone: configured(hasBudget, ({ agent, context }) => batchHeld(context) && heldRunning(agent, context).length === 0),
    pausedMidBatch: configured(hasBudget, ({ context }) => pausedMidBatch(context)),
    raiseRefused: when(({ agent, context, event }) => raiseRefusal(agent, context, event) !== null),
    usageLimitPauses: configured((agent) => agent.usageLimit !== null, ({ agent, event }) => usageLimitWait(agent.usageLimit, as(event, 'io.failed').error) !== null),
    usageLimited: ({ context }: Args) => !!context.budgetPause?.usageLimit,
    /** The stored time to resume has come by the run's clock (the wait's timer may fire a little before it, see `deadlineAhead`). */
    usageLimitDue: when(({ agent, context }) => !!context.budgetPause?.usageLimit && resumeDelay(context.budgetPause, agent.clock()) === 0),
    budgetResume: ({ event }: Args) => event.type === 'operation.resume' && event.operation === BUDGET_OPERATION,
  },
  actions: {
    sealOverBudget: rule.assign(sealOverBudget),
    sealAtDeadline: rule.assign(sealAtDeadline),
    markPaused: assigns(({ agent, context }) => ({ budgetPause: pausedAt(context.budgetPause, agent.clock()) })),
    emitBudgetPaused: rule.effects(emitBudgetPaused),
    raiseBudget: rule.effects(raiseBudget),
    holdBatch: rule.effects(holdBatch),
    /** The calls the IO had queued, not started, when the batch was held: they wait for the raise with the others. */
    holdQueued: assigns(({ context, event }) => ({ budgetPause: heldWithout(context.budgetPause!, as(event, 'io.toolsHeld').calls) })),
    requestHeldTools: rule.send(requestHeldTools),
    /**
     * After a raise while a side effect waits under the deadline: its timer, armed when the state
     * was entered for the limit then in force, is armed again for the limit now (XState arms an
     * `after` only on entry, and entering again would make the call again). Without it a raised
     * limit left the call with no deadline at all (the old timer fired, found the new limit not
     * passed, and nothing was armed after it), and an added or lowered one was not held.
     */
    rearmDeadline: configuredAction(
      hasBudget,
      enqueueActions<AgentContext, AgentEvent, undefined, AgentEvent, never, never, never, 'budgetDeadline', never>(({ check, enqueue }) => {
        for (const state of DEADLINE_STATES) {
          // `stateIn` reads the snapshot being transitioned; its type is left open by XState (a guard of any guard type).
          if (!check(stateIn(`#agent.Running.${state}`) as never)) continue;
          const type = deadlineEventOf(state);
          enqueue(cancel(type));
          enqueue(raise({ type } as never, { id: type, delay: 'budgetDeadline' }));
        }
      }),
    ),
    /** The usage limit's wait fired before its time (by the run's clock, or at a timer's bound): armed again for the time left. */
    rearmUsageLimit: enqueueActions<AgentContext, AgentEvent, undefined, AgentEvent, never, never, never, 'usageLimitWait', never>(({ enqueue }) =>
      enqueue(raise({ type: USAGE_LIMIT_EVENT } as never, { id: USAGE_LIMIT_EVENT, delay: 'usageLimitWait' })),
    ),
    pauseOnUsageLimit: assigns(({ agent, context, event }) => {
      const { error } = as(event, 'io.failed');
      return { budgetPause: limitedUntil(context.budgetPause, error as Error, usageLimitWait(agent.usageLimit, error)!, agent.clock()) };
    }),
    liftUsageLimit: assigns(({ agent, context }) => ({ budgetPause: limitLifted(context.budgetPause, agent.clock()) })),
    refuseRaise: emits(({ agent, context, event }) => ({ type: 'event.rejected' as const, event: event.type, reason: raiseRefusal(agent, context, event)! })),
  },
};

/**
 * The order in which the driver decides what a run does next, as tables the chart is built from
 * (the brain's `decisionOrder` is the model): between two steps `Start` settles what must come
 * first, `Deciding` makes the request ready and asks the brain for its step, and each step has
 * its own short list (`CallLLM`, `CallTools`). First hit wins; the entry without a guard is the
 * default. A test (test/agent/core/step-order.test.ts) holds the chart to these tables.
 */

/** An action by name, or with its params (`{ type: 'trace', params: 'prune' }`). */
type Action = string | { readonly type: string; readonly params: unknown };

/** One branch of an eventless list: the guard that takes it, where it goes, what it does. */
export interface Branch {
  readonly guard?: string | undefined;
  readonly target: string;
  readonly reenter?: true | undefined;
  readonly actions?: Action | readonly Action[] | undefined;
  /** Why the branch sits where it does. */
  readonly why: string;
}

/** Between two steps: what a restored or just-moved run must settle before any step. */
export const betweenSteps = [
  { guard: 'guardOpen', target: 'Guarding', why: 'a guardrail check in progress (restored, or just opened) is decided before anything else' },
  { guard: 'finalCallDue', target: 'Start', reenter: true, actions: 'beginFinalCall', why: 'a run about to end by maxTurns or a budget first asks for its answer (output schema, finalOutputCall)' },
  { guard: 'runOverBudget', target: 'Start', reenter: true, actions: 'sealOverBudget', why: 'budgets are checked between steps: going past one seals the run (seed 004)' },
  { guard: 'budgetPaused', target: 'BudgetPaused', why: '...or, for a kind configured to pause, waits for a raise' },
  { guard: 'operationWaiting', target: 'AwaitingOperation', why: 'an operation yielded: the run waits for it, also after a restore' },
  { guard: 'pointOpen', target: 'Operating', why: 'a hook point in progress (after a reply, or a restored one) goes on where it was' },
  { target: 'Deciding', why: 'nothing to settle: the request is made ready and the brain decides' },
] as const satisfies readonly Branch[];

/** The request made ready (prompt parts, pruning), then the brain's step picks its list. */
export const deciding = [
  { guard: 'promptFails', target: 'Start', reenter: true, actions: 'failOperation', why: 'a prompt part that throws or is no string fails the run, naming its operation' },
  { guard: 'extrasChanged', target: 'Start', reenter: true, actions: 'refreshExtras', why: 'the prompt parts changed size: the measure is updated before pruning reads it' },
  { guard: 'shouldPrune', target: 'Start', reenter: true, actions: ['emitPruned', { type: 'trace', params: 'prune' }, 'prune'], why: 'pruning comes before any decision, so it always runs before summarizing' },
  { guard: 'callLLM', target: 'CallLLM', why: 'the brain asks for a model call' },
  { guard: 'callTools', target: 'CallTools', why: 'the brain asks for a tool batch' },
  { guard: 'compact', target: 'AwaitingCompaction', actions: 'takeStep', why: 'the brain asks for a compaction' },
  { target: '#agent.Terminal', actions: 'takeStep', why: 'the brain is done: the run ends with its outcome' },
] as const satisfies readonly Branch[];

/** Before a model call: what must precede it on the run's first call, then the call. */
export const callLLM = [
  { guard: 'inputGuardDue', target: 'Guarding', actions: 'openInputCheck', why: "input guardrails judge the run's input before anything reaches the model" },
  { guard: 'toolsetDue', target: 'ListingTools', why: "the run's first model call is preceded by its toolset step (only with tool sources)" },
  { guard: 'beforeModelCallDue', target: 'Operating', actions: { type: 'openPoint', params: 'beforeModelCall' }, why: "the operations' beforeModelCall hooks run before each call" },
  { target: 'AwaitingModel', why: 'the call itself, once nothing has to precede it (its entry takes the brain\'s step)' },
] as const satisfies readonly Branch[];

/** Before a tool batch: repetition, the operations' hooks, the time limit, then the batch with or without approvals. */
export const callTools = [
  { guard: 'repeats', target: 'Start', reenter: true, actions: 'answerRepetition', why: 'the same batch again and again: noted instead of run; again after its note, sealed (before operations and approvals see it)' },
  { guard: 'beforeToolsDue', target: 'Operating', actions: { type: 'openPoint', params: 'beforeTools' }, why: "the operations' beforeTools hooks run before each batch" },
  { guard: 'answerAtDeadline', target: 'Start', reenter: true, actions: 'cutForAnswer', why: 'the time limit passed before the batch starts (the reply came as it passed, or the hooks took the rest): no call of it starts; with an output schema the run asks for its answer' },
  { guard: 'deadlineSeals', target: 'Start', reenter: true, actions: 'sealAtDeadline', why: '...else the run is sealed, its calls answered interrupted (what the deadline does to a batch in flight)' },
  { guard: 'deadlinePauses', target: 'BudgetPaused', why: '...or, pausing, waits for a raise with the batch not started (after it the batch starts as it would have)' },
  { guard: 'straightToWork', target: 'AwaitingTools.Executing', why: 'without approvals configured, a batch goes straight to work (no approval region), unless a call of it is in doubt (a restored batch waits for its decision)' },
  { target: 'AwaitingTools', why: 'the batch, with its approval region' },
] as const satisfies readonly Branch[];

/** The chart's eventless lists by the state that holds them, in the order a step reaches them. */
export const stepOrder = { Start: betweenSteps, Deciding: deciding, CallLLM: callLLM, CallTools: callTools } as const;

/** A table as XState's `always` list: the reason stays here, the chart gets the transition. */
export const alwaysOf = <const T extends readonly Branch[]>(table: T) =>
  table.map(({ why: _why, ...branch }) => branch) as { -readonly [K in keyof T]: Omit<T[K], 'why'> };

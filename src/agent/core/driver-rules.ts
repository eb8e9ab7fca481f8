/**
 * The core's rules: pure functions of the compiled agent, the run's context and, where one is
 * being handled, the event, that the core loop and the features share (the keys of its side
 * effects, the conversation they see, the reply applied, the run's end). The guards and actions
 * in each `implementations.ts` call them, so each can be read and tested without the machine.
 */
import { InvalidSnapshotError } from '../../errors.js';
import type { RunStop } from '../../tools/run-tools.js';
import { PolicySchema, type Message, type Outcome, type PolicyInput, type ToolCall, type ToolMessage, type Usage } from '../../schemas.js';
import { judgeReply, type AnswerStep } from './answer.js';
import { conversationOf, feedBrain, keepSteering } from './brain-state.js';
import type { ContextHook } from './bind.js';
import { agentMemo, type CompiledAgent, type Offered } from './compile.js';
import { parseAgentContext, type AgentContext } from './context.js';
import type { AgentInput } from '../protocol/actor-types.js';
import { freshContext } from './actor-input.js';
import { logOf, type MessageLog } from '../../brain/message-log.js';
import { decisionFor, isInDoubt, isWaiting } from './call-decisions.js';
import { as, type AgentEvent } from '../protocol/agent-event.js';
import { keyOf, serviceKey, turnAt } from '../protocol/keys.js';
import type { Slices } from '../protocol/io-protocol.js';
import { pendingPrune, pruneLineProblem } from './pruning.js';
import { systemTokens } from './request-size.js';
import { addUsage, applyReply, applyToolResults, batchResults, brainPolicy, interruptBatch, overruleOutcome } from './run-rules.js';

/** How a run ends before its brain concludes: sealed by a limit (its conversation kept), failed, or cancelled. */
export type RunEnd = { type: 'seal'; reason: string } | Extract<Outcome, { type: 'Cancelled' | 'Failed' }>;

/**
 * The one way a run ends mid-step (a limit, a failure, a cancel): the batch's calls without a
 * result are answered interrupted, or, given `results`, the batch is applied with them (a refused
 * handoff); the brain is sealed, failed or cancelled, a cancelled run keeping the steering it had
 * queued. A brain that already concluded (the final reply's afterReply point still running or
 * waiting) keeps its outcome when sealed and takes a failure or a cancel as its new one. The hook
 * points close (the operations' `slices` replaced when given, see cancel-rules.ts) and the batch's
 * bookkeeping is cleared.
 */
export function endRun(
  agent: CompiledAgent,
  context: AgentContext,
  end: RunEnd,
  { results, slices }: { results?: readonly ToolMessage[] | undefined; slices?: Slices | undefined } = {},
): Pick<AgentContext, 'brain' | 'operations'> & ReturnType<typeof resetBatch> {
  const batch = () => (results ? applyToolResults({ ...context, toolJournal: results }, agent.maxCalls) : interruptBatch(context, agent.maxCalls, stopOf(end)));
  const concluded = context.brain.value === 'Terminal';
  const brain =
    end.type === 'seal'
      ? concluded ? context.brain : feedBrain(batch(), end)
      : concluded ? overruleOutcome(context.brain, end) : feedBrain(batch(), end.type === 'Cancelled' ? { type: 'cancel' } : { type: 'fail', error: end.error });
  return {
    brain: end.type === 'Cancelled' ? keepSteering(brain) : brain,
    // Without operations no point opens: nothing to close.
    operations: agent.points ? agent.points.close(slices ? { ...context.operations, slices } : context.operations) : context.operations,
    ...resetBatch(agent, context),
    ...heldReplySpent(agent, context),
  };
}

/** What an end says to the calls it answers interrupted (see `interruptedContent`). */
const stopOf = (end: RunEnd): RunStop =>
  end.type === 'seal' ? { type: 'stopped', reason: end.reason } : end.type === 'Cancelled' ? { type: 'cancelled' } : { type: 'failed', reason: end.error.type };

/**
 * A reply held for the output guardrails when the run ends before their verdict (a cancel, a
 * seal, a guardrail that throws): it is not applied, but it was bought, so its usage counts as a
 * tripped check's does (booked to the model that made it).
 */
function heldReplySpent(agent: CompiledAgent, context: AgentContext): Partial<Pick<AgentContext, 'runUsage' | 'sessionUsage' | 'models'>> {
  const check = context.guard?.check;
  const usage = check?.stage === 'output' ? (check.reply as { usage?: Usage | undefined } | undefined)?.usage : undefined;
  if (!usage) return {};
  return { runUsage: addUsage(context.runUsage, usage), sessionUsage: addUsage(context.sessionUsage, usage), ...agent.pricing.book?.(context, usage) };
}

/**
 * A context from outside, checked as a snapshot is, then by each feature against this agent (its
 * `restore` hook: the operations' state against its operations, the active model and agent
 * against its lists, approvals and calls in doubt against the batch).
 */
export const restoredContext = (agent: CompiledAgent, value: unknown, features: readonly ContextHook[]): AgentContext => {
  const parsed = parseAgentContext(value);
  const context = { ...parsed, toolJournal: restoredJournal(agent, parsed), ...restoredStarts(agent, parsed) };
  const change: Partial<AgentContext> = {};
  for (const restore of features) Object.assign(change, restore(agent, context));
  return { ...context, ...change };
};

/**
 * The results a restored batch already has (a `DurableSession` gives those of its tool journal):
 * only calls of the batch that run (not answered without running), once each, in the batch's
 * order, so the batch's count of results holds (see `batchComplete`). They are its calls'
 * answers from the first step on: an end that comes before anything ran again (a cancel, a seal)
 * keeps them instead of answering the calls interrupted, and the IO does not run them again.
 */
function restoredJournal(agent: CompiledAgent, context: AgentContext): readonly ToolMessage[] {
  const given = context.toolJournal;
  if (given.length === 0 || context.brain.value !== 'AwaitingTools') return given;
  const byCall = new Map<string, ToolMessage>();
  for (const result of given) if (!byCall.has(result.toolCallId)) byCall.set(result.toolCallId, result);
  const kept = batchResults({ ...context, toolJournal: [] }, agent.maxCalls).flatMap(({ call, result }) => {
    const found = result === undefined ? byCall.get(call.id) : undefined;
    return found ? [found] : [];
  });
  return kept.length === given.length && kept.every((result, i) => result === given[i]) ? given : kept;
}

/**
 * A stored batch that does not say which calls started (a `DurableSession`'s row keeps none):
 * each call without a result that was not waiting for a decision may have started in the process
 * that stored it, so it is taken as started (answered "before this tool call finished" should the
 * run stop), never said not to have run.
 */
function restoredStarts(agent: CompiledAgent, context: AgentContext): Pick<AgentContext, 'startedCalls'> | undefined {
  if (context.startedCalls !== undefined || context.brain.value !== 'AwaitingTools') return undefined;
  const started = batchResults(context, agent.maxCalls).flatMap(({ call, result }) =>
    result === undefined && (decisionFor(context.approvals, call) !== undefined || !isWaiting(context.approvals, call)) ? [call.id] : [],
  );
  return { startedCalls: started };
}

/** A `restore` hook's refusal: the stored `field` does not fit this agent (`InvalidSnapshotError` naming it); no change when it fits. */
export const storedFits = (field: string, problem: string | null): Partial<AgentContext> => {
  if (problem) throw new InvalidSnapshotError(`${field}: ${problem}`);
  return {};
};

/** A policy event changes only the fields it names. */
export const policyProblem = (agent: CompiledAgent, context: AgentContext, change: PolicyInput): string | null => {
  const parsed = PolicySchema.safeParse({ ...context.policy, ...change });
  if (!parsed.success) return `invalid policy: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`;
  return pruneLineProblem(agent.pruning, parsed.data);
};

/** A context's prompt parts, measured (see `extrasFor`). */
const extrasMemo = agentMemo<{ slices: object; tokens: number | Error; agent: unknown }>();
/** A reply judged (see answer.ts), with the run's own answer state. */
type Answer = AnswerStep<NonNullable<AgentContext['outputState']>>;
/** A reply's answer, judged once (see `answerOf`). */
const answerMemo = agentMemo<Answer>();
/** The tools offered with a recorded listing (see `offeredTools`). */
const offeredMemo = agentMemo<Offered>();

/**
 * Size of the instructions and prompt parts the next model call carries (seed 000: counted
 * before deciding), or the error of a prompt part that failed. Nothing is evaluated once the
 * run is cancelled.
 */
export const extrasFor = (agent: CompiledAgent, context: AgentContext): number | Error => {
  const brain = context.brain;
  if ((brain.value !== 'Start' && brain.value !== 'AwaitingModel') || brain.context.cancelled) return context.extrasTokens;
  const ownInstructions = agent.speakers ? agent.speakers.of(context.agent).instructionsTokens : agent.instructionsTokens;
  if (!agent.points) return ownInstructions;
  // Prompt parts read the operations' state: a new slice is a new measure.
  const slices = context.operations.slices;
  const cached = extrasMemo.get(agent, brain.context);
  if (cached?.slices === slices && cached.agent === context.agent) return cached.tokens;
  const ctx = {
    sessionId: context.sessionId,
    scope: context.scope,
    turn: brain.context.turnsTaken + 1,
    get messages() {
      return conversationOf(brain);
    },
  };
  let tokens: number | Error;
  try {
    tokens = ownInstructions + systemTokens(agent.points.promptParts(ctx, slices));
  } catch (error) {
    // A part's OperationError, which the run fails with (see the operations' failOperation).
    tokens = error as Error;
  }
  extrasMemo.set(agent, brain.context, { slices, tokens, agent: context.agent });
  return tokens;
};

/** The policy the brain decides with now (see `brainPolicy`; an output schema's final call may take a turn more). */
export const decisionPolicy = (agent: CompiledAgent, context: AgentContext) => {
  const policy = brainPolicy(context.policy, context.compactionPasses);
  return agent.answers ? agent.answers.policy(policy, context.outputState) : policy;
};

/** The conversation a side effect sees: committed history and the run's pending messages. */
export const conversation = (context: AgentContext): MessageLog => logOf(context.brain.context);

/** The key of the current batch's tool calls (see keys.ts). */
export const batchKey = (context: AgentContext) => serviceKey(context, context.brain.context.turnsTaken, 'tools');

/** The calls that may run now: no result yet, not answered up front, not waiting for a human. */
export const runnable = (agent: CompiledAgent, context: AgentContext): ToolCall[] =>
  batchResults(context, agent.maxCalls)
    .filter(({ call, result }) => result === undefined && !isInDoubt(context.doubt, call.id) && (decisionFor(context.approvals, call)?.approved ?? !isWaiting(context.approvals, call)))
    .map(({ call }) => call);

/** The key of the next model call. */
export const modelKey = (context: AgentContext) => serviceKey(context, context.brain.context.turnsTaken + 1, 'model');

/** The key of the current compaction pass. */
export const compactionKey = (context: AgentContext) => serviceKey(context, context.brain.context.turnsTaken, 'compaction');

/** The key of the run's `toolset` step (tool sources listed once per run). */
export const toolsetKey = (context: AgentContext) => keyOf({ kind: 'toolset', session: context.sessionId, run: context.runIndex });

/** The speaking agent's own agent.tools (with handoffs, each agent has its own). */
export const ownOffered = (agent: CompiledAgent, context: AgentContext): Offered => (agent.speakers ? agent.speakers.of(context.agent).offered : agent.entryTools);

/** The speaking agent's model, when it has one of its own (its index in the IO's list), else null. */
export const ownModel = (agent: CompiledAgent, context: AgentContext): number | null => (agent.speakers ? agent.speakers.of(context.agent).model : null);

/** What the IO needs of the speaking agent for a model call: its instructions and its view of the conversation. */
export const speakerView = (agent: CompiledAgent, context: AgentContext) => {
  const speakers = agent.speakers!;
  return { instructions: speakers.of(context.agent).instructions, present: (messages: readonly Message[]) => speakers.present(context.agent, messages) };
};

/** What a model reply does to the run's answer, decided once per reply (the action and the event read the same). */
export const answerOf = (agent: CompiledAgent, context: AgentContext, event: AgentEvent): Answer => {
  let step = answerMemo.get(agent, event);
  if (!step) answerMemo.set(agent, event, (step = judgeReply(agent.answers, context.brain, context.outputState, as(event, 'io.replied').reply)));
  return step;
};

/** The reply applied to the run (see `acceptReply`); an output check applies the reply it held the same way. */
export const replyApplied = (agent: CompiledAgent, context: AgentContext, answer: Answer) => {
  const applied = applyReply({ ...context, brain: answer.brain }, answer.reply, offeredTools(agent, context));
  return {
    ...applied,
    brain: agent.answers ? agent.answers.settle(answer, applied.brain) : applied.brain,
    ...(answer.state && { outputState: answer.state }),
    ...agent.pricing.book?.(context, answer.reply.usage),
  };
};

/** A reply applied, its afterReply point opened (unless the reply failed the run). */
export const afterReply = (agent: CompiledAgent, context: AgentContext, answer: Answer) => {
  const next = replyApplied(agent, context, answer);
  // The afterReply point opens with the reply it is given (kept until it is done).
  const key = keyOf({ kind: 'point', hook: 'afterReply', ...turnAt(context, next.brain.context.turnsTaken) });
  // The reply's fields hold no compactionPasses: the key first keeps this object's shape one V8 has
  // seen (a literal that starts with a spread gets a map of its own per call when a key follows).
  if (next.brain.context.outcome?.type === 'Failed') return { compactionPasses: 0, ...next };
  return { compactionPasses: 0, ...next, ...(agent.points && { operations: agent.points.afterReply(context.operations, key, answer.reply) }) };
};

/** The agent.tools the run offers, in any process: the agent's own plus what its `toolset` step recorded (see ToolSource). */
export const offeredTools = (agent: CompiledAgent, context: AgentContext): Offered => {
  if (agent.finalOffered && context.outputState?.finalCall) return agent.finalOffered;
  const recorded = context.offered;
  // Tool sources are the entry agent's: an agent handed the conversation has its own agent.tools only.
  if (!agent.hasSources || !recorded || (agent.speakers && agent.speakers.of(context.agent).name !== agent.speakers.entry)) return ownOffered(agent, context);
  let set = offeredMemo.get(agent, recorded);
  if (!set) {
    const definitions = [...ownOffered(agent, context).definitions, ...recorded.definitions];
    offeredMemo.set(agent, recorded, (set = { definitions, names: definitions.map((tool) => tool.name) }));
  }
  return set;
};

/** The prune about to be applied, as `prune.finished` reports it. */
export const pruneReport = (agent: CompiledAgent, context: AgentContext) => {
  const { pruned, tokensSaved } = pendingPrune(context.brain, context.policy, agent.pruning, agent.config.pruner)!;
  const before = context.brain.context.contextTokens;
  return { pruned, tokensSaved, before, after: Math.max(0, before - tokensSaved) };
};

/** The batch's bookkeeping cleared: a new batch (or none) starts from here. */
export const resetBatch = (agent: CompiledAgent, context: AgentContext) => ({
  toolJournal: [],
  approvals: { ...context.approvals, waiting: [], decisions: {} },
  childUsage: {},
  ...(agent.toolPolicy && { policyChecked: [] }),
  // A run stopped mid-check (cancel, seal, failure) leaves no check open.
  ...(context.guard?.check && { guard: { ...context.guard, check: null } }),
  doubt: undefined,
  startedCalls: undefined,
  ending: undefined,
});


/**
 * The context an actor starts from: a stored state checked as a persisted snapshot is, or fresh
 * input checked field by field (a refused one ends the actor at once, see `freshContext`).
 */
export const initialContext = (agent: CompiledAgent, input: AgentInput | void, restore: readonly ContextHook[]): AgentContext =>
  input?.stored ? restoredContext(agent, input.stored, restore) : freshContext(agent, input);

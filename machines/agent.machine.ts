import { assign, emit, enqueueActions, setup, type ActorRefFrom } from 'xstate';
import {
  conversationOf,
  feedBrain,
  feedOrFail,
  freshBrain,
  pendingCalls,
  stepTypeOf,
  takeStep,
  type BrainState,
} from '../src/agent/brain-state.js';
import type { AgentConfig } from '../src/agent/config.js';
import {
  approvalService,
  compactorService,
  modelService,
  promptParts,
  runnableCalls,
  toolsService,
  type CompactionOutput,
  type DriverView,
  type ServiceDeps,
  type ServiceEvent,
  type ServiceInput,
} from '../src/agent/services.js';
import { interruptedResult } from '../src/agent/interrupt.js';
import {
  NO_APPROVALS,
  decisionFor,
  deniedResult,
  isWaiting,
  recordDecision,
  type ApprovalEvent,
} from '../src/agent/approvals.js';
import { BudgetSchema, PricesSchema, budgetExceeded, costUsd } from '../src/agent/budget.js';
import { serviceKey as keyOf } from '../src/agent/keys.js';
import {
  InvalidConfigError,
  PruningSchema,
  pendingPrune,
  pruneLineProblem,
  type Pruning,
} from '../src/agent/pruning.js';
import type { ModelReply, Usage } from '../src/model.js';
import {
  PolicySchema,
  type Message,
  type Outcome,
  type Policy,
  type PolicyInput,
  type Step,
  type ToolCall,
  type ToolMessage,
  type UserMessage,
} from '../src/schemas.js';
import { estimateMessageTokens, estimateTokens } from '../src/tokens.js';
import { feedProblem } from '../src/feed-problems.js';
import { DEFAULT_TOOL_CONCURRENCY } from '../src/tools/run-tools.js';
import { ToolSet } from '../src/tools/define-tool.js';

/**
 * The driver: owns one conversation, asks the brain for the next step under the current
 * policy, invokes the matching service and feeds the result back. Its own state is only which
 * IO is in flight, and its states carry the brain's names, so the inspector shows the brain.
 */

export interface AgentInput {
  sessionId?: string;
  /** Starts a run at once, and the actor finishes with that run's output (single-run mode). */
  prompt?: string | UserMessage;
  /** Committed conversation to continue from. */
  history?: Message[];
  policy?: PolicyInput;
}

export interface AgentOutput {
  outcome: Outcome;
  /** The committed conversation after the run: what survives, coherent. */
  messages: Message[];
  usage: Usage;
  /** The run's cost, when the config gives prices. */
  costUsd?: number;
}

export interface AgentContext extends DriverView {
  /** Single-run mode: finish with the first run's output instead of idling. */
  once: boolean;
  /** A prompt given as input, started on entry. */
  queued: UserMessage | null;
  /** Runs started in this session; part of every idempotency key. */
  runIndex: number;
  runUsage: Usage;
  sessionUsage: Usage;
  /** How the last run ended; its messages are the brain's history (never stored twice). */
  lastRun: { outcome: Outcome; usage: Usage; costUsd?: number } | null;
  /** Tokens of the operations' prompt parts counted in the brain's estimate. */
  extrasTokens: number;
  /** When the current run started (ms since the epoch): the driver's only clock read, for budgets. */
  runStartedAt: number;
}

export type AgentEvent =
  | { type: 'input'; message: string | UserMessage }
  | { type: 'cancel' }
  | { type: 'steer'; message: string | UserMessage }
  | { type: 'seal'; reason: string }
  | { type: 'policy'; policy: PolicyInput }
  /** Continues a run that was in flight when the session was stored (see durable sessions). */
  | { type: 'resume' }
  /** Between runs: drops committed history past `len`, snapped to a coherent cut. */
  | { type: 'rewind'; len: number }
  | ApprovalEvent
  | ServiceEvent;

export type AgentEmitted =
  | { type: 'text.delta'; turn: number; delta: string }
  /** A model call failed and is tried again: text streamed for this turn so far is void. */
  | { type: 'model.retry'; turn: number; retry: number; delayMs: number; error: unknown }
  | { type: 'tool.started'; call: ToolCall }
  | { type: 'tool.finished'; call: ToolCall; result: ToolMessage }
  | { type: 'turn.finished'; turn: number; reply: ModelReply }
  | { type: 'compaction.finished'; reason: CompactionOutput['reason']; before: number; after: number; rewritten: boolean }
  | { type: 'prune.finished'; pruned: number; tokensSaved: number; before: number; after: number }
  | { type: 'policy.rejected'; reason: string }
  | { type: 'approval.requested'; calls: ToolCall[] }
  /** The run's output, with what the whole session has used so far (cost when prices are given). */
  | { type: 'run.finished'; output: AgentOutput; sessionUsage: Usage; sessionCostUsd?: number };

/** The last run's output: its outcome and usage, with the conversation as it stands after it. */
export function outputOf(context: AgentContext): AgentOutput | null {
  return context.lastRun && { ...context.lastRun, messages: context.brain.context.history };
}

/** A stored brain that is neither finished nor fresh: a run to continue from its last decision. */
export const runInFlight = (brain: BrainState): boolean =>
  brain.value !== 'Terminal' && (brain.value !== 'Start' || brain.context.pending.length > 0);

const NO_USAGE: Usage = { inputTokens: 0, outputTokens: 0 };
const addUsage = (a: Usage, b: Usage | undefined): Usage =>
  b ? { inputTokens: a.inputTokens + b.inputTokens, outputTokens: a.outputTokens + b.outputTokens } : a;
const asUserMessage = (message: string | UserMessage): UserMessage =>
  typeof message === 'string' ? { role: 'user', content: message } : message;

const stepIs = (type: Step['type']) => ({ context }: { context: AgentContext }) =>
  stepTypeOf(context.brain, context.policy) === type;

/** The run's input: a fresh brain over the committed conversation, with the estimate refreshed. */
function startRun(context: AgentContext, message: UserMessage, definitions: ServiceDeps['tools']['definitions']): BrainState {
  const previous = context.brain;
  let brain = feedBrain(freshBrain(previous.context.history), { type: 'acceptInput', message });
  const anchor = previous.context.contextTokens;
  const tokens = anchor > 0 ? anchor + estimateTokens([message]) : estimateTokens(conversationOf(brain), definitions);
  brain = feedBrain(brain, { type: 'setContextTokens', tokens });
  return brain;
}

/** Each call's result if it has one yet: finished, pre-answered by the brain, or denied. */
function batchResults(context: AgentContext): { call: ToolCall; result: ToolMessage | undefined }[] {
  const done = new Map(context.toolJournal.map((result) => [result.toolCallId, result]));
  return pendingCalls(context.brain).map(({ call, preAnswered }) => {
    const decision = decisionFor(context.approvals, call);
    const denied = decision && !decision.approved ? deniedResult(call, decision) : undefined;
    return { call, result: done.get(call.id) ?? preAnswered ?? denied };
  });
}

/** The calls of the batch that have no result and wait for a human's decision. */
const waitingCalls = (context: AgentContext): ToolCall[] =>
  batchResults(context)
    .filter(({ call, result }) => result === undefined && isWaiting(context.approvals, call))
    .map(({ call }) => call);

/** Feeds the finished batch; calls without a result (a cancelled or sealed run) are interrupted. */
function feedBatch(context: AgentContext): BrainState {
  if (context.brain.value !== 'AwaitingTools') return context.brain;
  const results = batchResults(context).map(({ call, result }) => result ?? interruptedResult(call));
  return feedBrain(context.brain, { type: 'toolResults', messages: results });
}

/** Run exits (seed 000 + issue 3): Completed commits, Failed discards, the rest salvage. */
function finishBrain(brain: BrainState): BrainState {
  const outcome = brain.context.outcome!;
  const exit = outcome.type === 'Completed' ? 'commitPending' : outcome.type === 'Failed' ? 'discardPending' : 'salvagePending';
  return feedBrain(brain, { type: exit });
}

const errorInfo = (type: string, error: unknown) => ({
  type,
  message: error instanceof Error ? error.message : String(error),
});

/** A policy the pruning configuration allows, or a typed error saying why not. */
function checkedPolicy(policy: PolicyInput | undefined, pruning: Pruning | undefined): Policy {
  const resolved = PolicySchema.parse(policy ?? {});
  const problem = pruneLineProblem(pruning, resolved);
  if (problem) throw new InvalidConfigError(problem);
  return resolved;
}

export function createAgentMachine(config: AgentConfig) {
  const operations = config.operations ?? [];
  const pruning = config.pruning && PruningSchema.parse(config.pruning);
  const defaultPolicy = checkedPolicy(config.policy, pruning);
  /** A policy event changes only the fields it names. */
  const mergedPolicy = (context: AgentContext, change: PolicyInput): Policy =>
    PolicySchema.parse({ ...context.policy, ...change });
  const policyProblem = (context: AgentContext, change: PolicyInput): string | null => {
    const parsed = PolicySchema.safeParse({ ...context.policy, ...change });
    if (!parsed.success) return `invalid policy: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`;
    return pruneLineProblem(pruning, parsed.data);
  };
  const budget = config.budget && BudgetSchema.parse(config.budget);
  const prices = config.prices && PricesSchema.parse(config.prices);
  if (budget?.maxCostUsd !== undefined && !prices) throw new InvalidConfigError('budget.maxCostUsd needs prices');
  /** Checked after tool results and before each model call, when the brain is between steps. */
  const overBudget = (context: AgentContext): string | null =>
    context.brain.value === 'Start' || context.brain.value === 'AwaitingModel'
      ? budgetExceeded(budget, prices, {
          usage: context.runUsage,
          toolCalls: context.brain.context.totalToolCalls,
          elapsedMs: Date.now() - context.runStartedAt,
        })
      : null;
  // Built once: a tool name contributed twice (config or operations) fails here, loudly.
  const tools = new ToolSet([...(config.tools ?? []), ...operations.flatMap((op) => op.tools ?? [])]);
  const deps: ServiceDeps = {
    model: config.model,
    retry: config.retry ?? {},
    tools,
    operations,
    compactor: config.compactor,
    toolConcurrency: config.toolConcurrency ?? DEFAULT_TOOL_CONCURRENCY,
  };
  const extrasCache = new WeakMap<object, number>();
  /** Size of the prompt parts the next model call will carry (seed 000: counted before deciding). */
  const extrasFor = (context: AgentContext): number => {
    const brain = context.brain;
    if (operations.length === 0 || (brain.value !== 'Start' && brain.value !== 'AwaitingModel')) return context.extrasTokens;
    let tokens = extrasCache.get(brain.context);
    if (tokens === undefined) {
      const ctx = { sessionId: context.sessionId, turn: brain.context.turnsTaken + 1, messages: conversationOf(brain) };
      const parts = promptParts(operations, ctx);
      tokens = parts.reduce((sum, part) => sum + estimateMessageTokens(part), 0);
      extrasCache.set(brain.context, tokens);
    }
    return tokens;
  };

  /** The tool batch's services share one input: the turn and the batch's key (also its journal key). */
  const toolBatchInput = ({ context }: { context: AgentContext }): ServiceInput => {
    const turn = context.brain.context.turnsTaken;
    return { turn, key: keyOf(context, turn, 'tools') };
  };
  const toolFailure = {
    target: '#agent.Running.Start',
    actions: { type: 'failWith', params: ({ event }: { event: { error: unknown } }) => ({ type: 'ToolError', error: event.error }) },
  } as const;

  return setup({
    types: {
      context: {} as AgentContext,
      events: {} as AgentEvent,
      input: {} as AgentInput | void,
      output: {} as AgentOutput,
      emitted: {} as AgentEmitted,
    },
    actors: {
      model: modelService(deps),
      tools: toolsService(deps),
      approvals: approvalService(deps),
      compactor: compactorService(deps),
    },
    guards: {
      promptQueued: ({ context }) => context.queued !== null,
      runInFlight: ({ context }) => runInFlight(context.brain),
      rewindable: ({ context, event }) =>
        event.type === 'rewind' && feedProblem(context.brain.context, { type: 'rewindTo', len: event.len }) === null,
      singleRun: ({ context }) => context.once,
      runOverBudget: ({ context }) => overBudget(context) !== null,
      approvalsPossible: () => [...tools].some((tool) => tool.needsApproval !== undefined && tool.needsApproval !== false),
      batchComplete: ({ context }) => batchResults(context).every(({ result }) => result !== undefined),
      callsRunnable: ({ context }) => {
        return runnableCalls(context, pendingCalls(context.brain)).length > 0;
      },
      nothingWaiting: ({ context }) => waitingCalls(context).length === 0,
      callLLM: stepIs('CallLLM'),
      callTools: stepIs('CallTools'),
      compact: stepIs('Compact'),
      shouldPrune: ({ context }) => pendingPrune(context.brain, context.policy, pruning, config.pruner) !== null,
      extrasChanged: ({ context }) => extrasFor(context) !== context.extrasTokens,
      policyAcceptable: ({ context, event }) => event.type === 'policy' && policyProblem(context, event.policy) === null,
    },
    actions: {
      beginRun: assign(({ context, event }) => {
        const message = event.type === 'input' ? asUserMessage(event.message) : context.queued!;
        return {
          brain: startRun(context, message, tools.definitions),
          queued: null,
          runIndex: context.runIndex + 1,
          runUsage: NO_USAGE,
          toolJournal: [],
          approvals: { ...context.approvals, waiting: [], decisions: {} },
          runStartedAt: Date.now(),
        };
      }),
      takeStep: assign({ brain: ({ context }) => takeStep(context.brain, context.policy) }),
      rewindBrain: assign({
        brain: ({ context, event }) =>
          event.type === 'rewind' ? feedBrain(context.brain, { type: 'rewindTo', len: event.len }) : context.brain,
      }),
      sealOverBudget: assign({
        brain: ({ context }) => feedBrain(context.brain, { type: 'seal', reason: overBudget(context)! }),
      }),
      awaitApproval: assign({
        approvals: ({ context }, waiting: string[]) => ({ ...context.approvals, waiting }),
      }),
      emitApprovalRequested: emit(({ context }) => ({
        type: 'approval.requested' as const,
        calls: waitingCalls(context),
      })),
      recordDecision: enqueueActions(({ context, event, enqueue }) => {
        if (event.type !== 'approve' && event.type !== 'deny') return;
        const calls = pendingCalls(context.brain);
        const approvals = recordDecision(context.approvals, calls, event);
        if (approvals === context.approvals) return;
        enqueue.assign({ approvals });
        // A denial is the call's result: listeners see it like any other.
        const finished = new Set(context.toolJournal.map((result) => result.toolCallId));
        for (const { call, preAnswered } of calls) {
          const decision = decisionFor(approvals, call);
          if (preAnswered || finished.has(call.id) || decisionFor(context.approvals, call) || decision?.approved !== false) continue;
          enqueue.emit({ type: 'tool.started', call });
          enqueue.emit({ type: 'tool.finished', call, result: deniedResult(call, decision) });
        }
      }),
      journalResults: assign({
        toolJournal: ({ context }, results: ToolMessage[]) => {
          const known = new Set(context.toolJournal.map((result) => result.toolCallId));
          return [...context.toolJournal, ...results.filter((result) => !known.has(result.toolCallId))];
        },
      }),
      refreshExtras: assign(({ context }) => {
        const extrasTokens = extrasFor(context);
        const tokens = Math.max(0, context.brain.context.contextTokens - context.extrasTokens + extrasTokens);
        return { brain: feedBrain(context.brain, { type: 'setContextTokens', tokens }), extrasTokens };
      }),
      prune: assign(({ context }) => {
        const { messages, tokensSaved } = pendingPrune(context.brain, context.policy, pruning, config.pruner)!;
        const brain = feedBrain(context.brain, { type: 'adoptPruned', messages });
        const tokens = Math.max(0, context.brain.context.contextTokens - tokensSaved);
        return { brain: feedBrain(brain, { type: 'setContextTokens', tokens }) };
      }),
      emitPruned: emit(({ context }) => {
        const { pruned, tokensSaved } = pendingPrune(context.brain, context.policy, pruning, config.pruner)!;
        const before = context.brain.context.contextTokens;
        return { type: 'prune.finished' as const, pruned, tokensSaved, before, after: Math.max(0, before - tokensSaved) };
      }),
      rejectPolicy: emit(({ context, event }) => ({
        type: 'policy.rejected' as const,
        reason: event.type === 'policy' ? (policyProblem(context, event.policy) ?? '') : '',
      })),
      acceptReply: assign(({ context }, reply: ModelReply) => {
        const conversation = conversationOf(context.brain);
        const tokens = reply.usage
          ? reply.usage.inputTokens + reply.usage.outputTokens
          : estimateTokens([...conversation, reply.message], tools.definitions);
        return {
          brain: feedOrFail(
            context.brain,
            {
              type: 'modelResponse',
              response: reply.message,
              contextTokens: tokens,
              availableTools: tools.names,
              finishReason: reply.finishReason,
            },
            'ModelError',
          ),
          runUsage: addUsage(context.runUsage, reply.usage),
          sessionUsage: addUsage(context.sessionUsage, reply.usage),
        };
      }),
      emitTurnFinished: emit(({ context }, reply: ModelReply) => ({
        type: 'turn.finished' as const,
        turn: context.brain.context.turnsTaken,
        reply,
      })),
      acceptToolResults: assign(({ context }) => {
        const results = batchResults(context).map(({ result }) => result!);
        let brain = feedBrain(context.brain, { type: 'toolResults', messages: results });
        // Refresh the estimate after tool results (seed 000): the last reply's size plus what came back.
        const tokens = context.brain.context.contextTokens + estimateTokens(results);
        brain = feedBrain(brain, { type: 'setContextTokens', tokens });
        return { brain, toolJournal: [], approvals: { ...context.approvals, waiting: [], decisions: {} } };
      }),
      acceptCompaction: assign(({ context }, { before, after, messages }: CompactionOutput) => {
        const contextWindow = context.policy.contextWindow;
        return {
          brain: feedOrFail(
            context.brain,
            messages
              ? { type: 'compactionResult', compacted: messages, before, after, contextWindow }
              : { type: 'compactionNoop', before, after, contextWindow },
            'CompactionError',
          ),
          // A rewritten conversation is measured without prompt parts; they are counted afresh.
          extrasTokens: messages ? 0 : context.extrasTokens,
        };
      }),
      emitCompactionFinished: emit((_, { reason, before, after, messages }: CompactionOutput) => ({
        type: 'compaction.finished' as const,
        reason,
        before,
        after,
        rewritten: messages !== undefined,
      })),
      failWith: assign({
        brain: ({ context }, { type, error }: { type: string; error: unknown }) =>
          feedBrain(context.brain, { type: 'fail', error: errorInfo(type, error) }),
      }),
      cancelRun: assign({
        brain: ({ context }) => feedBrain(feedBatch(context), { type: 'cancel' }),
        toolJournal: [],
        approvals: ({ context }) => ({ ...context.approvals, waiting: [], decisions: {} }),
      }),
      sealRun: assign({
        brain: ({ context, event }) => {
          if (event.type !== 'seal' || context.brain.value === 'Terminal') return context.brain;
          return feedBrain(feedBatch(context), { type: 'seal', reason: event.reason });
        },
        toolJournal: [],
        approvals: ({ context }) => ({ ...context.approvals, waiting: [], decisions: {} }),
      }),
      steerRun: assign({
        brain: ({ context, event }) =>
          event.type === 'steer' || event.type === 'input'
            ? feedBrain(context.brain, { type: 'steer', message: asUserMessage(event.message) })
            : context.brain,
      }),
      changePolicy: assign({
        policy: ({ context, event }) => (event.type === 'policy' ? mergedPolicy(context, event.policy) : context.policy),
      }),
      journalToolResult: assign({
        toolJournal: ({ context, event }) =>
          event.type === 'service.toolFinished' ? [...context.toolJournal, event.result] : context.toolJournal,
      }),
      emitTextDelta: emit(({ event }) => {
        if (event.type !== 'service.textDelta') throw new Error('unreachable');
        return { type: 'text.delta' as const, turn: event.turn, delta: event.delta };
      }),
      emitRetry: emit(({ event }) => {
        if (event.type !== 'service.retry') throw new Error('unreachable');
        const { turn, retry, delayMs, error } = event;
        return { type: 'model.retry' as const, turn, retry, delayMs, error };
      }),
      emitToolStarted: emit(({ event }) => {
        if (event.type !== 'service.toolStarted') throw new Error('unreachable');
        return { type: 'tool.started' as const, call: event.call };
      }),
      emitToolFinished: emit(({ event }) => {
        if (event.type !== 'service.toolFinished') throw new Error('unreachable');
        return { type: 'tool.finished' as const, call: event.call, result: event.result };
      }),
      finishRun: assign(({ context }) => {
        const brain = finishBrain(context.brain);
        const cost = costUsd(context.runUsage, prices);
        return {
          brain,
          lastRun: { outcome: brain.context.outcome!, usage: context.runUsage, ...(cost !== undefined && { costUsd: cost }) },
        };
      }),
      emitRunFinished: emit(({ context }) => {
        const sessionCostUsd = costUsd(context.sessionUsage, prices);
        return {
          type: 'run.finished' as const,
          output: outputOf(context)!,
          sessionUsage: context.sessionUsage,
          ...(sessionCostUsd !== undefined && { sessionCostUsd }),
        };
      }),
    },
  }).createMachine({
    id: 'agent',
    context: ({ input }) => ({
      sessionId: input?.sessionId ?? 'session',
      brain: freshBrain(input?.history ?? []),
      policy: input?.policy ? checkedPolicy(input.policy, pruning) : defaultPolicy,
      toolJournal: [],
      once: input?.prompt !== undefined,
      queued: input?.prompt === undefined ? null : asUserMessage(input.prompt),
      runIndex: 0,
      runUsage: NO_USAGE,
      sessionUsage: NO_USAGE,
      lastRun: null,
      extrasTokens: 0,
      approvals: NO_APPROVALS,
      runStartedAt: 0,
    }),
    initial: 'Idle',
    on: {
      policy: [{ guard: 'policyAcceptable', actions: 'changePolicy' }, { actions: 'rejectPolicy' }],
    },
    states: {
      Idle: {
        always: { guard: 'promptQueued', target: 'Running', actions: 'beginRun' },
        on: {
          input: { target: 'Running', actions: 'beginRun' },
          resume: { guard: 'runInFlight', target: 'Running' },
          rewind: { guard: 'rewindable', actions: 'rewindBrain' },
        },
      },
      Running: {
        initial: 'Start',
        on: {
          cancel: { target: '.Start', actions: 'cancelRun' },
          seal: { target: '.Start', actions: 'sealRun' },
          steer: { actions: 'steerRun' },
          approve: { actions: 'recordDecision' },
          deny: { actions: 'recordDecision' },
          // A user message sent while a run goes is steering: delivered at the next coherent point.
          input: { actions: 'steerRun' },
          'service.textDelta': { actions: 'emitTextDelta' },
          'service.retry': { actions: 'emitRetry' },
          'service.toolStarted': { actions: 'emitToolStarted' },
          'service.toolFinished': { actions: ['journalToolResult', 'emitToolFinished'] },
        },
        states: {
          /** Asks the brain; the policy is re-read here on every step. */
          Start: {
            always: [
              // Budgets are checked between steps: going past one seals the run (seed 004).
              { guard: 'runOverBudget', target: 'Start', reenter: true, actions: 'sealOverBudget' },
              // Pruning comes before any decision, so it always runs before summarizing.
              { guard: 'extrasChanged', target: 'Start', reenter: true, actions: 'refreshExtras' },
              { guard: 'shouldPrune', target: 'Start', reenter: true, actions: ['emitPruned', 'prune'] },
              { guard: 'callLLM', target: 'AwaitingModel', actions: 'takeStep' },
              { guard: 'callTools', target: 'AwaitingTools' },
              { guard: 'compact', target: 'AwaitingCompaction', actions: 'takeStep' },
              { target: '#agent.Terminal', actions: 'takeStep' },
            ],
          },
          AwaitingModel: {
            invoke: {
              src: 'model',
              input: ({ context }): ServiceInput => {
                const turn = context.brain.context.turnsTaken + 1;
                return { turn, key: keyOf(context, turn, 'model') };
              },
              onDone: {
                target: 'Start',
                actions: [
                  { type: 'acceptReply', params: ({ event }) => event.output },
                  { type: 'emitTurnFinished', params: ({ event }) => event.output },
                ],
              },
              onError: { target: 'Start', actions: { type: 'failWith', params: ({ event }) => ({ type: 'ModelError', error: event.error }) } },
            },
          },
          AwaitingTools: {
            initial: 'Routing',
            states: {
              Routing: {
                always: [{ guard: 'approvalsPossible', target: 'CheckingApprovals' }, { target: 'Working' }],
              },
              CheckingApprovals: {
                invoke: {
                  src: 'approvals',
                  input: toolBatchInput,
                  onDone: { target: 'Working', actions: { type: 'awaitApproval', params: ({ event }) => event.output } },
                  onError: toolFailure,
                },
              },
              /** Calls that may run do, while calls that need a human wait for a decision. */
              Working: {
                type: 'parallel',
                always: { guard: 'batchComplete', target: '#agent.Running.Start', actions: 'acceptToolResults' },
                states: {
                  Execution: {
                    initial: 'Executing',
                    states: {
                      Executing: {
                        invoke: {
                          src: 'tools',
                          input: toolBatchInput,
                          onDone: { target: 'Paused', actions: { type: 'journalResults', params: ({ event }) => event.output } },
                          onError: toolFailure,
                        },
                      },
                      /** Nothing may run now; an approval makes a call runnable again. */
                      Paused: { always: { guard: 'callsRunnable', target: 'Executing' } },
                    },
                  },
                  Approval: {
                    initial: 'Checking',
                    states: {
                      Checking: {
                        always: [{ guard: 'nothingWaiting', target: 'Settled' }, { target: 'AwaitingApproval' }],
                      },
                      /** The run yields here until every waiting call has a decision (approve / deny events). */
                      AwaitingApproval: {
                        entry: 'emitApprovalRequested',
                        always: { guard: 'nothingWaiting', target: 'Settled' },
                      },
                      Settled: {},
                    },
                  },
                },
              },
            },
          },
          AwaitingCompaction: {
            invoke: {
              src: 'compactor',
              input: ({ context }) => {
                const turn = context.brain.context.turnsTaken;
                return { turn, key: keyOf(context, turn, 'compaction'), reason: context.brain.context.compactionReason! };
              },
              onDone: {
                target: 'Start',
                actions: [
                  { type: 'acceptCompaction', params: ({ event }) => event.output },
                  { type: 'emitCompactionFinished', params: ({ event }) => event.output },
                ],
              },
              onError: {
                target: 'Start',
                actions: { type: 'failWith', params: ({ event }) => ({ type: 'CompactionError', error: event.error }) },
              },
            },
          },
        },
      },
      /** The run ended: apply its exit to the conversation and report it. */
      Terminal: {
        entry: ['finishRun', 'emitRunFinished'],
        always: [{ guard: 'singleRun', target: 'Done' }, { target: 'Idle' }],
      },
      Done: { type: 'final' },
    },
    output: ({ context }) => outputOf(context)!,
  });
}

export type AgentMachine = ReturnType<typeof createAgentMachine>;
export type AgentActor = ActorRefFrom<AgentMachine>;

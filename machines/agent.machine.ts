import { assign, emit, setup, type ActorRefFrom } from 'xstate';
import {
  conversationOf,
  feedBrain,
  feedOrFail,
  freshBrain,
  stepOf,
  stepTypeOf,
  takeStep,
  type BrainState,
} from '../src/agent/brain-state.js';
import type { AgentConfig } from '../src/agent/config.js';
import {
  compactorService,
  modelService,
  promptParts,
  toolsService,
  type CompactionOutput,
  type DriverView,
  type ServiceDeps,
  type ServiceEvent,
  type ServiceInput,
} from '../src/agent/services.js';
import { interruptedResult } from '../src/agent/interrupt.js';
import { serviceKey as keyOf } from '../src/agent/keys.js';
import {
  InvalidConfigError,
  PruningSchema,
  pendingPrune,
  pruneLineProblem,
  type Pruning,
} from '../src/agent/pruning.js';
import type { ModelReply, Usage } from '../src/model.js';
import { withRetry } from '../src/models/retry.js';
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
  lastRun: { outcome: Outcome; usage: Usage } | null;
  /** Tokens of the operations' prompt parts counted in the brain's estimate. */
  extrasTokens: number;
}

export type AgentEvent =
  | { type: 'input'; message: string | UserMessage }
  | { type: 'cancel' }
  | { type: 'steer'; message: string | UserMessage }
  | { type: 'seal'; reason: string }
  | { type: 'policy'; policy: PolicyInput }
  /** Continues a run that was in flight when the session was stored (see durable sessions). */
  | { type: 'resume' }
  | ServiceEvent;

export type AgentEmitted =
  | { type: 'text.delta'; turn: number; delta: string }
  | { type: 'tool.started'; call: ToolCall }
  | { type: 'tool.finished'; call: ToolCall; result: ToolMessage }
  | { type: 'turn.finished'; turn: number; reply: ModelReply }
  | { type: 'compaction.finished'; reason: CompactionOutput['reason']; before: number; after: number; rewritten: boolean }
  | { type: 'prune.finished'; pruned: number; tokensSaved: number; before: number; after: number }
  | { type: 'policy.rejected'; reason: string }
  | { type: 'run.finished'; output: AgentOutput };

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

/** Results for every pending call: journaled ones as they are, the rest interrupted. */
function finalizeInterruptedTools(context: AgentContext): BrainState {
  const step = stepOf(context.brain, context.policy);
  if (step.type !== 'CallTools') return context.brain;
  const done = new Map(context.toolJournal.map((result) => [result.toolCallId, result]));
  const results = step.calls.map(({ call, preAnswered }) => done.get(call.id) ?? preAnswered ?? interruptedResult(call));
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
  /** A policy event changes only the fields it names. */
  const mergedPolicy = (context: AgentContext, change: PolicyInput): Policy =>
    PolicySchema.parse({ ...context.policy, ...change });
  const policyProblem = (context: AgentContext, change: PolicyInput): string | null => {
    const parsed = PolicySchema.safeParse({ ...context.policy, ...change });
    if (!parsed.success) return `invalid policy: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`;
    return pruneLineProblem(pruning, parsed.data);
  };
  const operations = config.operations ?? [];
  const pruning = config.pruning && PruningSchema.parse(config.pruning);
  const defaultPolicy = checkedPolicy(config.policy, pruning);
  // Built once: a tool name contributed twice (config or operations) fails here, loudly.
  const tools = new ToolSet([...(config.tools ?? []), ...operations.flatMap((op) => op.tools ?? [])]);
  const deps: ServiceDeps = {
    model: config.retry === false ? config.model : withRetry(config.model, config.retry),
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
      compactor: compactorService(deps),
    },
    guards: {
      promptQueued: ({ context }) => context.queued !== null,
      runInFlight: ({ context }) => runInFlight(context.brain),
      singleRun: ({ context }) => context.once,
      callLLM: stepIs('CallLLM'),
      callTools: stepIs('CallTools'),
      compact: stepIs('Compact'),
      shouldPrune: ({ context }) => pendingPrune(context.brain, context.policy, pruning) !== null,
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
        };
      }),
      takeStep: assign({ brain: ({ context }) => takeStep(context.brain, context.policy) }),
      refreshExtras: assign(({ context }) => {
        const extrasTokens = extrasFor(context);
        const tokens = Math.max(0, context.brain.context.contextTokens - context.extrasTokens + extrasTokens);
        return { brain: feedBrain(context.brain, { type: 'setContextTokens', tokens }), extrasTokens };
      }),
      prune: assign(({ context }) => {
        const { messages, tokensSaved } = pendingPrune(context.brain, context.policy, pruning)!;
        const brain = feedBrain(context.brain, { type: 'adoptPruned', messages });
        const tokens = Math.max(0, context.brain.context.contextTokens - tokensSaved);
        return { brain: feedBrain(brain, { type: 'setContextTokens', tokens }) };
      }),
      emitPruned: emit(({ context }) => {
        const { pruned, tokensSaved } = pendingPrune(context.brain, context.policy, pruning)!;
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
      acceptToolResults: assign(({ context }, results: ToolMessage[]) => {
        let brain = feedBrain(context.brain, { type: 'toolResults', messages: results });
        // Refresh the estimate after tool results (seed 000): the last reply's size plus what came back.
        const tokens = context.brain.context.contextTokens + estimateTokens(results);
        brain = feedBrain(brain, { type: 'setContextTokens', tokens });
        return { brain, toolJournal: [] };
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
        brain: ({ context }) => feedBrain(finalizeInterruptedTools(context), { type: 'cancel' }),
        toolJournal: [],
      }),
      sealRun: assign({
        brain: ({ context, event }) => {
          if (event.type !== 'seal' || context.brain.value === 'Terminal') return context.brain;
          return feedBrain(finalizeInterruptedTools(context), { type: 'seal', reason: event.reason });
        },
        toolJournal: [],
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
        return { brain, lastRun: { outcome: brain.context.outcome!, usage: context.runUsage } };
      }),
      emitRunFinished: emit(({ context }) => ({ type: 'run.finished' as const, output: outputOf(context)! })),
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
        },
      },
      Running: {
        initial: 'Start',
        on: {
          cancel: { target: '.Start', actions: 'cancelRun' },
          seal: { target: '.Start', actions: 'sealRun' },
          steer: { actions: 'steerRun' },
          // A user message sent while a run goes is steering: delivered at the next coherent point.
          input: { actions: 'steerRun' },
          'service.textDelta': { actions: 'emitTextDelta' },
          'service.toolStarted': { actions: 'emitToolStarted' },
          'service.toolFinished': { actions: ['journalToolResult', 'emitToolFinished'] },
        },
        states: {
          /** Asks the brain; the policy is re-read here on every step. */
          Start: {
            always: [
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
            invoke: {
              src: 'tools',
              input: ({ context }): ServiceInput => {
                const turn = context.brain.context.turnsTaken;
                return { turn, key: keyOf(context, turn, 'tools') };
              },
              onDone: { target: 'Start', actions: { type: 'acceptToolResults', params: ({ event }) => event.output } },
              onError: { target: 'Start', actions: { type: 'failWith', params: ({ event }) => ({ type: 'ToolError', error: event.error }) } },
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

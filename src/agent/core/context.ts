import { z } from 'zod';
import { InvalidSnapshotError } from '../../errors.js';
import { parseLoopSnapshot } from '../../brain/loop-snapshot.js';
import { LOOP_SNAPSHOT_VERSION, PolicySchema, ToolMessageSchema, UsageSchema, UserMessageSchema } from '../../schemas.js';
import { TRACEPARENT_PATTERN } from '../../telemetry/traceparent.js';
import type { Message, Policy, UserMessage } from '../../schemas.js';
import { GuardStateSchema } from '../guardrails/guardrails.js';
import { AgentOutcomeSchema } from '../protocol/failure.js';
import { freshBrain, type BrainState } from './brain-state.js';
import { NO_OPERATIONS, OperationsStateSchema } from '../operations/operation-state.js';
import { NO_USAGE } from './run-rules.js';
import { ModelsStateSchema } from '../fallback/fallback.js';
import { ModelAttemptSchema } from '../protocol/delivery.js';
import { BudgetPauseSchema } from '../budget/budget-pause.js';
import { OutputStateSchema } from '../structured-output/structured-output.js';
import { ActiveAgentSchema } from './speakers.js';
import { ApprovalsSchema, DoubtStateSchema, NO_APPROVALS } from './call-decisions.js';
import { ScopeSchema } from '../protocol/scope.js';
import { MAX_SOURCE_NAME_CHARS } from '../../tools/tool-source.js';

const count = z.number().int().nonnegative();

/** What one model used in a run, with its cost at that model's prices where known. */
const ModelSpendSchema = z.object({ model: z.string(), usage: UsageSchema, costUsd: z.number().optional() });

/** A tool as the model is offered it: plain JSON, as a `toolset` step records it. */
export const ToolDefinitionSchema = z.object({ name: z.string().min(1), description: z.string(), inputSchema: z.record(z.string(), z.unknown()) });

/**
 * For each tool a `toolset` step recorded, the source that listed it: its name, or the index in
 * the agent's `toolSources` of a source without one (every source, in snapshots of older builds).
 */
export const OfferedSourcesSchema = z.array(z.union([z.string().min(1).max(MAX_SOURCE_NAME_CHARS), count]));

/**
 * The driver's context: everything a persisted agent snapshot holds. The brain is checked as a
 * whole by the brain's own restore (provider-valid history, pending consistent with the calls
 * it waits for); the rest by this schema.
 */
export const AgentContextSchema = z.object({
  sessionId: z.string(),
  /** The memory scope the session was opened with (see `ScopeSchema`); absent for a session without one. */
  scope: ScopeSchema.optional(),
  brain: z.object({ value: z.string(), context: z.record(z.string(), z.unknown()) }),
  policy: PolicySchema,
  /** Results of the current tool batch that have arrived. */
  toolJournal: z.array(ToolMessageSchema),
  approvals: ApprovalsSchema,
  /** Single-run mode: finish with the first run's output instead of idling. */
  once: z.boolean(),
  /** A prompt given as input, started on entry. */
  queued: UserMessageSchema.nullable(),
  /** Runs started in this session; part of every idempotency key. */
  runIndex: count,
  runUsage: UsageSchema,
  sessionUsage: UsageSchema,
  /** How the last run ended; its messages are the brain's history (never stored twice). */
  lastRun: z
    .object({
      outcome: AgentOutcomeSchema,
      usage: UsageSchema,
      costUsd: z.number().optional(),
      usageByModel: z.array(ModelSpendSchema).optional(),
    })
    .nullable(),
  /** Tokens of the instructions and prompt parts counted in the brain's estimate. */
  extrasTokens: count,
  /** Compaction passes in a row since the run's last model reply (see `MAX_COMPACTION_PASSES`). */
  compactionPasses: count.optional(),
  /** While a cancel waits for a hook in flight: how long it waits (ms). */
  cancelGraceMs: count.optional(),
  /** When the current run started (ms since the epoch): the driver's only clock read, for budgets. */
  runStartedAt: count,
  /** The operations' state slices, the hook point in progress and a yield the run waits on. */
  operations: OperationsStateSchema,
  /**
   * The trace context (W3C traceparent) of the current run's span when telemetry is on: a run
   * resumed elsewhere continues the same trace. Absent in snapshots taken without telemetry.
   */
  trace: z.string().regex(TRACEPARENT_PATTERN).nullable().optional(),
  /**
   * What the run's tool sources listed (its `toolset` step): every later step of the run, in any
   * process, offers and accepts these. Null until listed (and for an agent without sources);
   * absent in snapshots of older builds. `sources`: which source listed each definition (its name,
   * else its index), so a call goes only to that source (absent in snapshots of older builds:
   * see `resolveOffered`).
   */
  offered: z
    .object({ definitions: z.array(ToolDefinitionSchema), sources: OfferedSourcesSchema.optional() })
    .refine(({ definitions, sources }) => !sources || sources.length === definitions.length, { message: 'sources must name one source per definition' })
    .nullable()
    .optional(),
  /**
   * The model call in flight and how many times it was made (retries and resumes): its text's
   * delivery ids. Absent in snapshots of older builds (the next call is attempt 1).
   */
  attempt: ModelAttemptSchema.nullable().optional(),
  /** The run's raised budget limits and paused time (see budget-pause.ts); absent until a run pauses or is raised. */
  budgetPause: BudgetPauseSchema.optional(),
  /**
   * Child sessions (agent tools) of the current batch whose usage the run has counted: counted
   * once, by model too (`models`, at the child's prices; absent in records of older builds).
   */
  childUsage: z.record(z.string(), UsageSchema.extend({ models: z.array(ModelSpendSchema).optional() })).optional(),
  /**
   * Calls of the current batch the tool policy has decided (its denials are decisions, its
   * needs-approval calls wait): a restore never asks it again. Absent without a policy.
   */
  policyChecked: z.array(z.string()).optional(),
  /** An agent with an output schema: the run's answers sent back and its final call. Absent otherwise (and in older snapshots). */
  outputState: OutputStateSchema.optional(),
  /**
   * With a list of models: the one the run uses (a run restored elsewhere goes on with it) and
   * what each used, in the run and the session. Absent for an agent with one model.
   */
  models: ModelsStateSchema.optional(),
  /** With handoffs: the agent that has the conversation, once it was handed over. Absent: the entry agent. */
  agent: ActiveAgentSchema.optional(),
  /** With handoffs: how many the current run has made (see `HandoffsConfig.maxHandoffs`). Absent without handoffs, and in older snapshots (none yet). */
  handoffs: count.optional(),
  /** The guardrail check in progress with its verdicts so far, the last that passed, the run's feedback rounds. Absent without guardrails. */
  guard: GuardStateSchema.optional(),
  /** Calls of the current batch in doubt after a restart, their decisions and reruns (see in-doubt.ts). Absent when none was. */
  doubt: DoubtStateSchema.optional(),
  /**
   * Calls of the current batch the IO has started (their `tool.started`): a call the run stops
   * without a result is answered as cut while running, any other as never started. Not in a
   * `DurableSession`'s row (no write per start): a reopened batch's calls start again, or are in doubt.
   */
  startedCalls: z.array(z.string()).optional(),
  /**
   * A cancel or a seal that came while tool calls ran: the run ends so once the results already on
   * their way are in (see the chart's `Ending`). Not in a `DurableSession`'s row.
   */
  ending: z.union([z.object({ type: z.literal('cancel') }), z.object({ type: z.literal('seal'), reason: z.string() })]).optional(),
});

export type AgentContext = Omit<z.infer<typeof AgentContextSchema>, 'brain' | 'toolJournal'> & {
  brain: BrainState;
  toolJournal: readonly z.infer<typeof ToolMessageSchema>[];
};

/**
 * The driver context of a session that has run nothing yet: a new one, or a fork of a stored
 * session's prefix. With a `queued` prompt the actor runs that once and stops.
 */
export function freshAgentContext(start: { sessionId: string; scope?: string | undefined; history: Message[]; policy: Policy; queued: UserMessage | null }): AgentContext {
  return {
    sessionId: start.sessionId,
    ...(start.scope !== undefined && { scope: start.scope }),
    brain: freshBrain(start.history),
    policy: start.policy,
    toolJournal: [],
    once: start.queued !== null,
    queued: start.queued,
    runIndex: 0,
    runUsage: NO_USAGE,
    sessionUsage: NO_USAGE,
    lastRun: null,
    extrasTokens: 0,
    compactionPasses: 0,
    approvals: NO_APPROVALS,
    runStartedAt: 0,
    operations: NO_OPERATIONS,
  };
}

/**
 * A driver context that came from outside (a persisted snapshot), checked before anything runs
 * on it. Throws `InvalidSnapshotError` naming the path of the first problem.
 */
export function parseAgentContext(value: unknown): AgentContext {
  const parsed = AgentContextSchema.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new InvalidSnapshotError(`context.${issue.path.join('.')}: ${issue.message}`);
  }
  const { brain, ...rest } = parsed.data;
  try {
    const restored = parseLoopSnapshot({ version: LOOP_SNAPSHOT_VERSION, state: brain.value, ...brain.context });
    return { ...rest, brain: { value: restored.state, context: restored.context } };
  } catch (error) {
    throw new InvalidSnapshotError(`context.brain.${(error as Error).message.replace(/^cannot restore loop snapshot: /, '')}`);
  }
}

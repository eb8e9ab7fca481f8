import { z } from 'zod';

/** A tool call requested by the model. `args` is whatever the model sent; tools validate it. */
export const ToolCallSchema = z.object({
  id: z.string().min(1),
  name: z.string().min(1),
  args: z.unknown(),
});
export type ToolCall = z.infer<typeof ToolCallSchema>;

export const SystemMessageSchema = z.object({ role: z.literal('system'), content: z.string() });
export const UserMessageSchema = z.object({ role: z.literal('user'), content: z.string() });
export const AssistantMessageSchema = z.object({
  role: z.literal('assistant'),
  content: z.string(),
  toolCalls: z.array(ToolCallSchema).optional(),
});
export const ToolMessageSchema = z.object({
  role: z.literal('tool'),
  toolCallId: z.string().min(1),
  toolName: z.string().min(1),
  content: z.string(),
  isError: z.boolean().optional(),
});

export const MessageSchema = z.discriminatedUnion('role', [
  SystemMessageSchema,
  UserMessageSchema,
  AssistantMessageSchema,
  ToolMessageSchema,
]);
export type Message = z.infer<typeof MessageSchema>;
export type UserMessage = z.infer<typeof UserMessageSchema>;
export type AssistantMessage = z.infer<typeof AssistantMessageSchema>;
export type ToolMessage = z.infer<typeof ToolMessageSchema>;

/** A tool call waiting for dispatch. Calls to unknown tools arrive already answered. */
export const PendingToolCallSchema = z.object({
  call: ToolCallSchema,
  preAnswered: ToolMessageSchema.optional(),
});
export type PendingToolCall = z.infer<typeof PendingToolCallSchema>;

/**
 * A guardrail that tripped: its name, the stage it guards, and the (plain JSON) info it gave.
 *
 * @example
 * ```ts
 * const tripped = TrippedGuardrailSchema.parse({ name: 'no-secrets', stage: 'input', info: { found: 'api key' } });
 * ```
 */
export const TrippedGuardrailSchema = z.object({ name: z.string().min(1), stage: z.enum(['input', 'output']), info: z.unknown().optional() });
export type TrippedGuardrail = z.infer<typeof TrippedGuardrailSchema>;

/** `guardrail`: only on a `GuardrailTripped` failure. */
export const LoopErrorInfoSchema = z.object({ type: z.string().min(1), message: z.string(), guardrail: TrippedGuardrailSchema.optional() });
export type LoopErrorInfo = z.infer<typeof LoopErrorInfoSchema>;

/** Why a model stopped, normalized across providers. */
export const FinishReasonSchema = z.enum(['stop', 'length', 'content-filter', 'tool-calls', 'cancelled', 'other']);
export type FinishReason = z.infer<typeof FinishReasonSchema>;

export const UsageSchema = z.object({
  inputTokens: z.number().int().nonnegative(),
  outputTokens: z.number().int().nonnegative(),
});
export type Usage = z.infer<typeof UsageSchema>;

export const OutcomeSchema = z.discriminatedUnion('type', [
  z.object({
    type: z.literal('Completed'),
    finalText: z.string(),
    /** Present when the last reply stopped for another reason than a natural stop (e.g. 'length'). */
    finishReason: FinishReasonSchema.exclude(['stop']).optional(),
  }),
  z.object({ type: z.literal('Cancelled') }),
  z.object({ type: z.literal('MaxTurnsExceeded') }),
  z.object({ type: z.literal('Sealed'), reason: z.string() }),
  z.object({ type: z.literal('Failed'), error: LoopErrorInfoSchema }),
]);
export type Outcome = z.infer<typeof OutcomeSchema>;

export const CompactionReasonSchema = z.enum(['Emergency', 'ThresholdExceeded']);
export type CompactionReason = z.infer<typeof CompactionReasonSchema>;

export const StepSchema = z.discriminatedUnion('type', [
  z.object({ type: z.literal('CallLLM'), turn: z.number().int().positive() }),
  z.object({
    type: z.literal('CallTools'),
    turn: z.number().int().positive(),
    calls: z.array(PendingToolCallSchema),
  }),
  z.object({ type: z.literal('Compact'), reason: CompactionReasonSchema }),
  z.object({ type: z.literal('Done'), outcome: OutcomeSchema }),
]);
export type Step = z.infer<typeof StepSchema>;

const tokenCount = z.number().int().nonnegative();

/** Settings for one decision. Never stored: it travels with every `next` request. */
export const PolicySchema = z.object({
  maxTurns: tokenCount.default(200),
  contextWindow: tokenCount.default(200_000),
  /** Percent of the window above which auto-compaction triggers (strictly above). */
  compactThreshold: z.number().min(0).max(100).default(80),
  autoCompact: z.boolean().default(true),
});
export type Policy = z.output<typeof PolicySchema>;
export type PolicyInput = z.input<typeof PolicySchema>;
export const DEFAULT_POLICY: Policy = Object.freeze(PolicySchema.parse({}));

export const StateNameSchema = z.enum([
  'Start',
  'AwaitingModel',
  'AwaitingTools',
  'AwaitingCompaction',
  'Terminal',
]);
export type StateName = z.infer<typeof StateNameSchema>;

/** The brain's context: the seed's fields plus the tool-call counter, the steering queue and the outcome. */
export const LoopContextSchema = z.object({
  history: z.array(MessageSchema),
  pending: z.array(MessageSchema),
  pendingTools: z.array(PendingToolCallSchema),
  turnsTaken: tokenCount,
  contextTokens: tokenCount,
  cancelled: z.boolean(),
  lastCompactionTokens: tokenCount.nullable(),
  deferredCompaction: z.boolean(),
  totalToolCalls: tokenCount,
  /** Why the current compaction pass runs; set only while AwaitingCompaction. */
  compactionReason: CompactionReasonSchema.nullable(),
  /** User messages queued by `steer`, delivered at the next coherent point. */
  steering: z.array(UserMessageSchema),
  /** Set exactly when the state is Terminal. */
  outcome: OutcomeSchema.nullable(),
});
export type LoopContext = z.infer<typeof LoopContextSchema>;

export const LOOP_SNAPSHOT_VERSION = 1;

/** What `LoopMachine.toJSON()` returns: the brain's state name and context, versioned. */
export const LoopSnapshotSchema = LoopContextSchema.extend({
  version: z.literal(LOOP_SNAPSHOT_VERSION),
  state: StateNameSchema,
});
export type LoopSnapshotJSON = z.infer<typeof LoopSnapshotSchema>;

/** The parts of XState's persisted snapshot of the brain that `restore` accepts. */
export const PersistedLoopSnapshotSchema = z.object({
  status: z.enum(['active', 'done', 'error', 'stopped']),
  value: StateNameSchema,
  context: LoopContextSchema,
});

export type LoopState =
  | { type: 'Start' }
  | { type: 'AwaitingModel'; turn: number }
  | { type: 'AwaitingTools'; turn: number }
  | { type: 'AwaitingCompaction'; reason: CompactionReason }
  | { type: 'Terminal'; outcome: Outcome };

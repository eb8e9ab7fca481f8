/** What the agent actor takes as input, finishes with and emits: the types a host codes against. */
import type { Message, ToolCall, ToolMessage, UserMessage, CompactionReason, PolicyInput } from '../../schemas.js';
import type { ModelReply, Usage } from '../../model.js';
import type { StructuredOutputError } from '../../errors.js';
import type { ApprovalRequest, RefusalReason } from '../approvals/approval-binding.js';
import type { BrainState } from '../core/brain-state.js';
import { logOf } from '../../brain/message-log.js';
import type { BudgetKind } from '../budget/budget.js';
import type { AgentContext } from '../core/context.js';
import type { ModelSpend } from '../core/pricing.js';
import type { DeliveryId } from './delivery.js';
import type { AgentOutcome } from './failure.js';
import type { FallbackCause, ModelUsage } from '../fallback/fallback.js';
import type { GuardrailTrippedError } from '../guardrails/guardrails.js';
import type { DoubtEmitted } from '../in-doubt/in-doubt.js';
import type { OperationError } from '../operations/operation.js';

export interface AgentInput {
  /**
   * The session's id, the first part of every idempotency key the run hands out. Without one the
   * actor makes its own (`actor-<uuid>`, kept in its snapshot), so no two actors share keys.
   */
  sessionId?: string | undefined;
  /**
   * Whose session this is (a user, a resource, a team): the memory scope its operations and tools
   * are told (`OperationContext.scope`, `ToolContext.scope`) and its child runs inherit. See
   * `agentMemory` (`loopchart/memory`).
   */
  scope?: string | undefined;
  /** Starts a run at once, and the actor finishes with that run's output (single-run mode). */
  prompt?: string | UserMessage | undefined;
  /** Committed conversation to continue from. */
  history?: Message[] | undefined;
  policy?: PolicyInput | undefined;
  /**
   * A stored session's state to continue from (what `DurableSession` passes): the actor starts
   * at rest on it, and a `resume` event continues a run that was in flight.
   */
  stored?: AgentContext | undefined;
}

export interface AgentOutput {
  outcome: AgentOutcome;
  /** The committed conversation after the run: what survives, coherent. */
  messages: Message[];
  usage: Usage;
  /** The run's cost, when the config gives prices. */
  costUsd?: number | undefined;
  /** With a list of models: what each model used in the run (and cost, at its prices). */
  usageByModel?: (ModelUsage & { costUsd?: number | undefined })[] | undefined;
}


/** Events a client may show carry a `DeliveryId` (see there): a repeat after a reconnect or a crash has the same id. */
export type AgentEmitted =
  | { type: 'text.delta'; id: DeliveryId; turn: number; delta: string }
  /** The model call failed with a fallback trigger: the turn goes to the next model of the list (text streamed so far is void). */
  | { type: 'model.fallback'; turn: number; from: string; to: string; trigger: FallbackCause; error: unknown }
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
  | { type: 'approval.decided'; run: number; toolCallId: string; digest: string; approved: boolean; by?: string | undefined; reason?: string | undefined; always?: true | undefined }
  /** A decision was refused: it changed nothing (an unknown, decided, finished, other run's or changed call). */
  | { type: 'approval.refused'; run: number; toolCallId: string; approved: boolean; refusal: RefusalReason; detail: string; by?: string | undefined; digest?: string | undefined }
  /** The run went past a limit that pauses: it waits for a raise of that limit (or a seal). */
  /** `target`: the path of calls down to the child run that paused (absent: this run); a raise with that target goes there. */
  | { type: 'budget.paused'; kind: BudgetKind; used: number; limit: number; reason: string; target?: string | undefined }
  /** An operation yielded: the run waits for `{ type: 'operation.resume', operation, payload }`. */
  /** `target`: the path of calls down to the child run that waits (absent: this run); `operation.resume` with that target goes there. */
  | { type: 'operation.yielded'; operation: string; reason: string; payload: unknown; target?: string | undefined }
  /** An operation's hook threw, timed out or broke its contract: the run fails with this error. */
  | { type: 'operation.failed'; operation: string; error: OperationError }
  /** An output guardrail refused the final answer: `message` went to the model, which answers again. */
  | { type: 'guardrail.feedback'; turn: number; message: string }
  /** A guardrail tripped: the run ends `Failed(GuardrailTripped)` with this error. */
  | { type: 'guardrail.tripped'; error: GuardrailTrippedError }
  /** The model asked for the same batch `times` times in a row: its calls got a note instead of running. */
  | { type: 'repetition.noted'; turn: number; times: number; calls: ToolCall[] }
  /** The run's output, with what the whole session has used so far (cost when prices are given). */
  | { type: 'run.finished'; id: DeliveryId; output: AgentOutput; sessionUsage: Usage; sessionCostUsd?: number | undefined }
  /** The conversation was handed to agent `name` (see `AgentConfig.handoffs`): its instructions, tools and model take over. */
  | { type: 'agent.handoff'; run: number; turn: number; name: string; from: string }
  /** A run started with this message (its index counts the session's runs from 1). */
  | { type: 'run.started'; id: DeliveryId; run: number; message: UserMessage }
  | DoubtEmitted;

/** The last run's output: its outcome and usage, with the conversation as it stands after it. */
export function outputOf(context: AgentContext): AgentOutput | null {
  return context.lastRun && { ...context.lastRun, messages: context.brain.context.history };
}

/** A stored brain that is neither finished nor fresh: a run to continue from its last decision. */
export const runInFlight = (brain: BrainState): boolean =>
  brain.value !== 'Terminal' && (brain.value !== 'Start' || logOf(brain.context).pendingLength > 0);

/** What a running child tells its parent's chart. */
export type SubagentReport =
  /** The child (or one of its own children) waits for a human: calls with ids as the child knows them. */
  | { type: 'approval.requested'; calls: readonly ToolCall[]; requests: readonly ApprovalRequest[] }
  /** The child (or one of its own) refused a decision the parent routed down: the id as the child knows it. */
  | { type: 'approval.refused'; refused: Extract<AgentEmitted, { type: 'approval.refused' }> }
  /** The child (or one of its own children), resumed after a crash, has calls in doubt: it waits for a person's decision on each. */
  | { type: 'tool.inDoubt'; calls: readonly ToolCall[]; requests: readonly ApprovalRequest[] }
  /** The child refused a decision on a call in doubt that the parent routed down: the id as the child knows it. */
  | { type: 'doubt.refused'; refused: Extract<AgentEmitted, { type: 'doubt.refused' }> }
  /** The child (or one of its own children) waits for a person: its budget paused, or an operation yielded (not approvals: see above). */
  | { type: 'waiting'; event: Extract<AgentEmitted, { type: 'budget.paused' | 'operation.yielded' }> }
  /**
   * The child's run so far (as it spends, and once more at its end): what it spent since the last
   * report joins the parent's run, so each child is counted once. `models`: the same by model, at
   * the child's own prices (see `Pricing.spent`), which the parent books under those models.
   */
  | { type: 'usage'; childId: string; usage: Usage; models?: readonly ModelSpend[] | undefined };

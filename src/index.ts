/**
 * `loopchart`: what a first agent and a durable session need. The agent (its machine, runAgent,
 * tools, models, compaction, executors), the brain, durable sessions and their stores, replay
 * and fork, and every error they throw. Elsewhere, loaded only when imported:
 * `loopchart/schemas` (zod schemas, limits, defaults and the checks behind them),
 * `loopchart/sqlite`, `loopchart/postgres`, `loopchart/ai-sdk`, `loopchart/mcp`,
 * `loopchart/testing` (scriptedModel), `loopchart/viewer`, `loopchart/restate`, `loopchart/policies`
 * (built-in tool policies).
 */
export type {
  AssistantMessage,
  CompactionReason,
  FinishReason,
  LoopContext,
  LoopErrorInfo,
  LoopSnapshotJSON,
  LoopState,
  Message,
  Outcome,
  PendingToolCall,
  Policy,
  PolicyInput,
  StateName,
  Step,
  ToolCall,
  ToolMessage,
  Usage,
  UserMessage,
} from './schemas.js';

// The agent.
export { createAgentMachine, type AgentMachine, type AgentActor, type WithExecutor } from '../machines/agent.machine.js';
export { APPROVALS_OPERATION } from './agent/approvals/approval-events.js';
export { type AgentInput, type AgentOutput, type AgentEmitted } from './agent/protocol/actor-types.js';
export { type AgentContext } from './agent/core/context.js';
export { type AgentEvent } from './agent/protocol/agent-event.js';
export type { AgentConfig } from './agent/core/config.js';
export type { Compactor, CompactionRequest, CompactionResult } from './compaction/contract.js';
export type { ApprovalEvent } from './agent/approvals/approvals.js';
export type { Approvals, DoubtAction } from './agent/core/call-decisions.js';
export type { ApprovalRequest, RefusalReason } from './agent/approvals/approval-binding.js';
export type { Budget, Prices } from './agent/budget/budget.js';
export type { FallbackCause, FallbackPredicate, FallbackTrigger, ModelChoice } from './agent/fallback/fallback.js';
export type { HandoffAgent, HandoffsConfig, HistoryPresentation } from './agent/handoffs/handoffs.js';
export { runAgent, streamAgent, type RunAgentOptions, type RunAgentResult, type AgentStreamEvent } from './agent/hosts/run-agent.js';
export type { ApprovalAnswer, ApproveFunction } from './agent/hosts/unattended.js';
export { agentTool, type AgentToolOptions } from './agent/subagents/agent-tool.js';
export { AgentStepper, type SteppedSession, type StepEffect, type StepResult, type StepStatus } from './agent/hosts/stepper.js';
export type { HookContext, InterruptedStep, Operation, OperationContext, OperationFailurePoint, OperationStep, PreparedRequest } from './agent/operations/operation.js';
export type { AgentOutcome, Failure, FailureType } from './agent/protocol/failure.js';
export type { ExternalEvent } from './agent/protocol/events.js';
export { DeliveryLedger, type DeliveryId, type DeliveredEvent } from './agent/protocol/delivery.js';
export { GuardrailError, GuardrailTrippedError, type Guardrail, type GuardrailInput, type GuardrailStage, type GuardrailVerdict, type GuardrailsConfig } from './agent/guardrails/guardrails.js';
export { ToolPolicyError, type ToolPolicy, type ToolPolicyRequest, type ToolPolicyVerdict, type EarlierCall } from './agent/approvals/tool-policy.js';
export { composeExecutors, inProcessExecutor, type Executor, type SideEffect, type SideEffectKind, type SideEffectInputs, type SideEffectOutputs } from './agent/protocol/executor.js';
export type { TelemetryOptions, TelemetryTracer } from './telemetry/options.js';
export { summarizingInspector } from './inspect.js';

// Tools, models, compaction.
export { defineTool, type Tool, type ToolContext, type ToolSpec, type JsonSchemaToolSpec, type ApprovalContext } from './tools/define-tool.js';
export type { ToolSource } from './tools/tool-source.js';
export type { JsonSchema } from './tools/json-schema.js';
export { listDirTool, readFileTool, writeFileTool, calculatorTool } from './tools/builtin.js';
export type { Model, ModelRequest, ModelReply, ToolDefinition } from './model.js';
export { openAICompatibleModel, type OpenAICompatibleOptions } from './models/openai-compatible.js';
export { withRetry, type RetryOptions } from './models/retry.js';
export { estimateTokens } from './tokens.js';
export { pruneToolResults, type PruneOptions, type PruneResult } from './compaction/prune.js';
export { summarizingCompactor, type SummarizingCompactorOptions } from './compaction/summarize.js';
export type { PruningInput } from './agent/core/pruning.js';

// The brain.
export { LoopMachine, type LoopMachineOptions } from './brain/loop-machine.js';
export { loopMachine, nextStep, type LoopSnapshot, type LoopInput } from '../machines/loop.machine.js';
export type { LoopEvent, LoopEventType } from './brain/loop-events.js';

// Durable sessions.
export { DurableSession, type OpenSessionOptions } from './sessions/durable-session.js';
export { openSessionStore } from './stores/open.js';
export { MemorySessionStore } from './stores/memory.js';
export type { SessionStore, SessionSummary, StepWrite, StoredSession, TraceRecord } from './stores/session-store.js';
export { replaySession, replayTrace, type ReplayReport, type ReplayDivergence } from './sessions/replay.js';
export { forkSession, type ForkOptions, type ForkResult } from './sessions/fork.js';
export { readSessionTrace, type TraceEntry, type ReadTraceEntry } from './sessions/trace.js';

// Every error the above throw (those of loopchart/sqlite and loopchart/mcp live there).
export * from './errors.js';
export { InvalidModelReplyError, ModelError } from './model.js';
export { MalformedStreamError, ModelDeadlineError, ReadTimeoutError } from './models/errors.js';
export { DuplicateToolError, ExpressionError, FileToolError, InvalidToolError, PathOutsideRootError } from './tools/errors.js';
export { InvalidSummaryError } from './compaction/summarize.js';
export { OperationError, OperationStateError } from './agent/operations/operation.js';
export { StepTimeoutError } from './agent/hosts/stepper.js';
export { SubagentDepthError, SubagentError } from './agent/subagents/subagents.js';
export { TelemetryUnavailableError } from './telemetry/otel-api.js';
export { SessionNotIdleError, SessionScopeError, SessionClosedError } from './sessions/durable-session.js';
export { ApprovalRefusedError, decideStored, type Verdict } from './sessions/stored-decision.js';
export { decideDoubtStored, type DoubtVerdict } from './sessions/stored-doubt.js';
export { ToolInDoubtError } from './agent/protocol/failure.js';
export type { DoubtEmitted } from './agent/in-doubt/in-doubt.js';
export type { InDoubtPolicy } from './tools/define-tool.js';
export { SessionRowError } from './sessions/session-row.js';
export { ReplayUnavailableError } from './sessions/replay.js';
export { ForkError } from './sessions/fork.js';
export {
  CorruptSessionError,
  InvalidSessionIdError,
  InvalidWriteError,
  SessionBusyError,
  SessionNotFoundError,
  StoreBusyError,
  StoreCorruptError,
  StoreError,
  StoreFullError,
  StoreSchemaVersionError,
  StoreUnavailableError,
  type CorruptPart,
} from './stores/errors.js';

/**
 * `loopchart`: the brain, the driver, tools, models, compaction and sessions. Database drivers
 * and optional integrations live in subpaths that load only when imported:
 * `loopchart/sqlite`, `loopchart/postgres`, `loopchart/ai-sdk`, `loopchart/testing`.
 */
export * from './schemas.js';
export * from './errors.js';
export type { LoopEvent, LoopEventType } from './loop-events.js';
export { coherentCut } from './conversation.js';
export { loopSnapshotProblem, parseLoopSnapshot, type ParsedLoopSnapshot } from './loop-snapshot.js';
export { jsonValueProblem, MAX_JSON_DEPTH, type JsonValueLimits } from './json-value.js';
export { LoopMachine, type LoopMachineOptions } from './loop-machine.js';
export { summarizingInspector } from './inspect.js';
export { loopMachine, nextStep, decisionOrder, type LoopSnapshot, type LoopInput } from '../machines/loop.machine.js';
export type { Model, ModelRequest, ModelReply, ToolDefinition, FinishReason, Usage } from './model.js';
export { InvalidModelReplyError, ModelError } from './model.js';
export {
  createAgentMachine,
  type AgentMachine,
  type AgentActor,
  type AgentInput,
  type AgentOutput,
  type AgentContext,
  type AgentEvent,
  type AgentEmitted,
  type WithExecutor,
  DEFAULT_MAX_TOOL_CALLS_PER_REPLY,
  APPROVALS_OPERATION,
} from '../machines/agent.machine.js';
export {
  composeExecutors,
  inProcessExecutor,
  type Executor,
  type SideEffect,
  type SideEffectKind,
  type SideEffectInputs,
  type SideEffectOutputs,
} from './agent/executor.js';
export type { TelemetryOptions, TelemetryTracer } from './telemetry/options.js';
export { TelemetryUnavailableError } from './telemetry/otel-api.js';
export { ExternalEventSchemas, type ExternalEvent } from './agent/events.js';
export type { AgentConfig, Compactor, CompactionRequest, CompactionResult } from './agent/config.js';
export { DEFAULT_OPERATION_TIMEOUT_MS, OperationError, OperationStateError } from './agent/operation.js';
export type { HookContext, Operation, OperationContext, OperationStep, PreparedRequest } from './agent/operation.js';
export {
  AgentStepper,
  DEFAULT_STEP_TIMEOUT_MS,
  StepTimeoutError,
  type SteppedSession,
  type StepResult,
  type StepStatus,
} from './agent/stepper.js';
export { OPERATION_HOOKS, type OperationHook, type OperationsState } from './agent/operation-state.js';
export { defineTool, type Tool, type ToolContext, type ToolSpec, type JsonSchemaToolSpec, type ApprovalContext } from './tools/define-tool.js';
export type { ToolSource } from './tools/tool-source.js';
export type { JsonSchema } from './tools/json-schema.js';
export { McpServerError, McpServerStartError, McpToolError } from './mcp/errors.js';
export { withRetry, type RetryOptions } from './models/retry.js';
export { estimateTokens } from './tokens.js';
export { listDirTool, readFileTool, writeFileTool, calculatorTool } from './tools/builtin.js';
export { DuplicateToolError, ExpressionError, FileToolError, InvalidToolError, PathOutsideRootError } from './tools/errors.js';
export { openAICompatibleModel, type OpenAICompatibleOptions } from './models/openai-compatible.js';
export { MalformedStreamError, ModelDeadlineError, ReadTimeoutError } from './models/errors.js';
export type { SessionStore, SessionSummary, StepWrite, StoredSession } from './stores/session-store.js';
export {
  CorruptSessionError,
  InvalidWriteError,
  SessionBusyError,
  SessionNotFoundError,
  StoreBusyError,
  StoreSchemaVersionError,
  type CorruptPart,
} from './stores/errors.js';
export {
  InvalidSessionIdError,
  MAX_SESSION_ID_LENGTH,
  StoreCorruptError,
  StoreError,
  StoreFullError,
  StoreUnavailableError,
} from './stores/errors.js';
export { sessionIdProblem } from './stores/step.js';
export { SqliteDriverUnavailableError } from './stores/sqlite-driver.js';
export { MemorySessionStore } from './stores/memory.js';
export { openSessionStore } from './stores/open.js';
export { pruneToolResults, type PruneOptions, type PruneResult } from './compaction/prune.js';
export { InvalidSummaryError, summarizingCompactor, type SummarizingCompactorOptions } from './compaction/summarize.js';
export { InvalidConfigError, type PruningInput } from './agent/pruning.js';
export { DurableSession, SessionNotIdleError, type OpenSessionOptions } from './sessions/durable-session.js';
export { SessionRowError } from './sessions/session-row.js';
export { replaySession, replayTrace, describeStep, ReplayUnavailableError, type ReplayReport, type ReplayDivergence } from './sessions/replay.js';
export { forkSession, ForkError, type ForkOptions, type ForkResult } from './sessions/fork.js';
export { readSessionTrace, TraceEntrySchema, type TraceEntry, type ReadTraceEntry } from './sessions/trace.js';
export type { TraceRecord } from './stores/session-store.js';
export type { Approvals, ApprovalEvent } from './agent/approvals.js';
export type { Budget, Prices } from './agent/budget.js';
export { runAgent, streamAgent, type RunAgentOptions, type RunAgentResult, type AgentStreamEvent } from './run-agent.js';
export * from './reliability.js';

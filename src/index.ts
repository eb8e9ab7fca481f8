export * from './schemas.js';
export * from './errors.js';
export type { LoopEvent, LoopEventType } from './loop-events.js';
export { coherentCut, coalesceAdjacentAssistants } from './conversation.js';
export { LoopMachine, type LoopMachineOptions } from './loop-machine.js';
export { summarizingInspector } from './inspect.js';
export {
  loopMachine,
  nextStep,
  decisionOrder,
  loopGuards,
  type LoopSnapshot,
  type LoopInput,
} from '../machines/loop.machine.js';
export type { Model, ModelRequest, ModelReply, ToolDefinition, FinishReason, Usage } from './model.js';
export { ModelError } from './model.js';
export {
  createAgentMachine,
  type AgentMachine,
  type AgentActor,
  type AgentInput,
  type AgentOutput,
  type AgentContext,
  type AgentEvent,
  type AgentEmitted,
} from '../machines/agent.machine.js';
export type { AgentConfig, Compactor, CompactionRequest, CompactionResult } from './agent/config.js';
export type { Operation, OperationContext, PreparedRequest } from './agent/operation.js';
export { defineTool, toolDefinitions, ToolSet, type Tool, type ToolContext } from './tools/define-tool.js';
export { runToolCalls, type RunToolCallsOptions } from './tools/run-tools.js';
export { withRetry, isRetryable, type RetryOptions } from './models/retry.js';
export { scriptedModel, type ScriptEntry, type ScriptedReply } from './models/scripted.js';
export { estimateTokens } from './tokens.js';
export { listDirTool, readFileTool, writeFileTool, calculatorTool } from './tools/builtin.js';
export { DuplicateToolError, InvalidToolError } from './tools/errors.js';
export { openAICompatibleModel, type OpenAICompatibleOptions } from './models/openai-compatible.js';
export { aiSdkModel } from './models/ai-sdk.js';
export { MalformedStreamError, ReadTimeoutError } from './models/errors.js';
export * from './stores/index.js';
export { pruneToolResults, prunedMarker, type PruneOptions, type PruneResult } from './compaction/prune.js';
export { summarizingCompactor, type SummarizingCompactorOptions } from './compaction/summarize.js';
export { InvalidConfigError, type PruningInput } from './agent/pruning.js';
export { DurableSession, type OpenSessionOptions } from './sessions/durable-session.js';
export { SessionRowError, SESSION_ROW_VERSION } from './sessions/session-row.js';
export type { Approvals, ApprovalEvent } from './agent/approvals.js';
export type { Budget, Prices } from './agent/budget.js';
export { outputOf } from '../machines/agent.machine.js';

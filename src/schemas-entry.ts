/**
 * `loopchart/schemas`: what loopchart checks where things enter it, for code that reads or
 * writes loopchart's data itself (a store of its own, a gateway, a viewer). The zod schemas of
 * messages, outcomes, policies, brain snapshots, host events and trace entries; the rule every
 * model reply passes; the limits on what a provider, a tool or a caller may send, and the
 * defaults; the pure checks behind them; and the brain's decision table.
 *
 * It is this file, not `src/schemas.ts` (the module that defines the conversation schemas),
 * because the subpath gathers checks from several modules.
 */
export * from './schemas.js';
export { MAX_REPORTED_TOKENS, ModelReplySchema, normalizeUsage, parseModelReply } from './model.js';
export { MAX_SSE_EVENT_LENGTH, MAX_SSE_LINE_LENGTH } from './models/sse.js';
export { DEFAULT_TOOL_TIMEOUT_MS } from './tools/run-tools.js';
export { DEFAULT_AGENT_TOOL_TIMEOUT_MS } from './agent/subagents/agent-tool.js';
export { DEFAULT_MAX_SUBAGENT_DEPTH } from './agent/subagents/subagents.js';
export { DEFAULT_MAX_HANDOFFS } from './agent/handoffs/handoffs.js';
export { DEFAULT_MAX_ATTRIBUTE_LENGTH } from './telemetry/options.js';
export { jsonValueProblem, MAX_JSON_DEPTH, type JsonValueLimits } from './json-value.js';
export { loopSnapshotProblem, parseLoopSnapshot, type ParsedLoopSnapshot } from './brain/loop-snapshot.js';
export { coherentCut } from './brain/conversation.js';
export { decisionOrder } from '../machines/loop.machine.js';
export { describeStep } from './sessions/replay.js';
export { ExternalEventSchemas, type ExternalEvent } from './agent/protocol/events.js';
export { TraceEntrySchema, type TraceEntry, type ReadTraceEntry } from './sessions/trace.js';
export { DEFAULT_MAX_TOOL_CALLS_PER_REPLY } from './agent/core/compile.js';
export { DEFAULT_CANCEL_GRACE_MS, DEFAULT_OPERATION_TIMEOUT_MS } from './agent/operations/operation.js';
export { DEFAULT_TOOL_POLICY_TIMEOUT_MS, ToolPolicyVerdictSchema } from './agent/approvals/tool-policy.js';
export { DEFAULT_GUARDRAIL_TIMEOUT_MS, DEFAULT_MAX_GUARDRAIL_FEEDBACK, GuardrailVerdictSchema } from './agent/guardrails/guardrails.js';
export { DEFAULT_STEP_TIMEOUT_MS } from './agent/hosts/stepper.js';
export { OPERATION_HOOKS, type OperationHook, type OperationsState } from './agent/operations/operation-state.js';
export { MAX_SESSION_ID_LENGTH } from './stores/errors.js';
export { sessionIdProblem } from './stores/step.js';
export { FAILURE_TYPES, AgentOutcomeSchema } from './agent/protocol/failure.js';
export { DeliveryIdSchema } from './agent/protocol/delivery.js';
export { DEFAULT_REPETITION_LIMIT } from './agent/repetition/repetition.js';
export { RefusalReasonSchema, callDigest } from './agent/approvals/approval-binding.js';
export { BUDGET_OPERATION, BudgetRaiseSchema } from './agent/budget/budget-pause.js';
export { DoubtActionSchema } from './agent/core/call-decisions.js';
export { InDoubtPolicySchema } from './tools/define-tool.js';
export { FALLBACK_TRIGGERS, fallbackTrigger } from './agent/fallback/fallback.js';
export { EFFECT_SPECIFICATION_VERSION } from './agent/protocol/executor.js';

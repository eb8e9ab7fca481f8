import type { Compactor } from '../../compaction/contract.js';
import type { PruneOptions, PruneResult } from '../../compaction/prune.js';
import type { Model } from '../../model.js';
import type { RetryOptions } from '../../models/retry.js';
import type { Message, PolicyInput } from '../../schemas.js';
import type { Tool } from '../../tools/define-tool.js';
import type { ToolSource } from '../../tools/tool-source.js';
import type { Executor } from '../protocol/executor.js';
import type { Operation } from '../operations/operation.js';
import type { PruningInput } from './pruning.js';
import type { Budget, Prices } from '../budget/budget.js';
import type { TelemetryOptions } from '../../telemetry/options.js';
import type { ToolPolicy } from '../approvals/tool-policy.js';
import type { OutputSchema } from '../structured-output/structured-output.js';
import type { FallbackPredicate, FallbackTrigger, ModelChoice } from '../fallback/fallback.js';
import type { HandoffsConfig } from '../handoffs/handoffs.js';
import type { GuardrailsConfig } from '../guardrails/guardrails.js';
import { optionKeys } from '../../known-keys.js';

export interface AgentConfig {
  /**
   * The model, or models in fallback order: a call that fails with one of `fallbackOn` (after
   * that model's own retries) goes to the next one, which the run keeps to its end (the next run
   * starts on the first again). An entry may be `{ model, prices }` for its cost.
   */
  model: Model | readonly ModelChoice[];
  /**
   * With a list of models: the failures that move to the next model. Default: all of
   * `FALLBACK_TRIGGERS` (a rate limit, a 5xx or network failure, a timeout, a context too long);
   * a plain `Error` from a custom model is none of them and does not fall back. A function
   * `(error) => boolean` decides instead (only `true` falls back; a throw does not).
   */
  fallbackOn?: readonly FallbackTrigger[] | FallbackPredicate | undefined;
  /**
   * The system prompt: sent first on every model call, counted in the context estimate, never
   * stored in the conversation (so changing it takes effect on the next call).
   */
  instructions?: string | undefined;
  tools?: readonly Tool[] | undefined;
  /**
   * Tools listed again at the start of every run, such as an MCP server's (`mcpTools`): the run
   * uses `tools` plus what its sources listed, as one set (names must stay unique).
   */
  toolSources?: readonly ToolSource[] | undefined;
  /** Composed in order before every model call; see `Operation`. */
  operations?: readonly Operation[] | undefined;
  compactor?: Compactor | undefined;
  /** How many tool calls run at once. Default 4. */
  toolConcurrency?: number | undefined;
  /** Retry policy for model calls; `false` turns retries off. */
  retry?: RetryOptions | false | undefined;
  /** The starting policy; a `policy` event changes it for the very next step. */
  policy?: PolicyInput | undefined;
  /**
   * Prune old tool results when the estimate crosses `threshold` percent of the window, before
   * any summarizing: the line must sit strictly below `compactThreshold`.
   */
  pruning?: PruningInput | undefined;
  /** The pruning pass itself; default `pruneToolResults`. Must keep count, roles and tool-call ids. */
  pruner?: ((messages: readonly Message[], options: PruneOptions) => PruneResult) | undefined;
  /**
   * Limits per run, checked between steps; going past one seals the run with the reason, or with
   * `pause` (true, or the kinds that pause) waits in `BudgetPaused` for a `budget.raise` or a seal.
   */
  budget?: Budget | undefined;
  /**
   * Off by default. A model call that finally fails (after its retries and any fallback) with a
   * 429 carrying a retry time of at most `maxWaitMs` (default 15 minutes) pauses the run in
   * `BudgetPaused` and makes the same call again at that time; a `budget.raise` resumes at once,
   * a seal ends the run.
   */
  pauseOnUsageLimit?: boolean | { maxWaitMs?: number | undefined } | undefined;
  /** Token prices, for cost accounting and `budget.maxCostUsd`. */
  prices?: Prices | undefined;
  /**
   * Runs every side effect (model, tool, compaction and approval calls); default in-process.
   * See `Executor`: wrap it to log, trace, journal or hand effects to a durable engine.
   */
  executor?: Executor | undefined;
  /**
   * The driver's clock (ms since the epoch; default `Date.now`): when a run starts and how long
   * it has gone (budgets). A durable engine that replays a run passes a journaled clock, so the
   * replay reads the same times and makes the same decisions.
   */
  clock?: (() => number) | undefined;
  /**
   * OpenTelemetry traces of every run (GenAI semantic conventions); off by default. See
   * `TelemetryOptions`. `@opentelemetry/api` is loaded only when this is set.
   */
  telemetry?: TelemetryOptions | undefined;
  /** Tool calls one reply may ask for; the excess get error results instead of running. Default 128. */
  maxToolCallsPerReply?: number | undefined;
  /**
   * Repetition detection: the model asking for the same batch of tool calls (names and
   * arguments, in any order and key order) this many times in a row gets, instead of the
   * last batch's results, a note saying so; once more and the run ends `Sealed('repetition: …')`.
   * Default 3; `false` turns it off (a model that legitimately polls the same call).
   */
  repetition?: number | false | undefined;
  /**
   * Decides each tool call before its approval rule and before anything runs: allow, deny (the
   * reason is the call's result) or needs-approval (the approval path). A list combines: the
   * first deny wins. Built-ins: `loopchart/policies`. See `ToolPolicy`.
   */
  toolPolicy?: ToolPolicy | readonly ToolPolicy[] | undefined;
  /** How long a tool policy may take for one call, in ms. Default `DEFAULT_TOOL_POLICY_TIMEOUT_MS` (10 s). */
  toolPolicyTimeoutMs?: number | undefined;
  /**
   * The final answer's schema (zod 4, or a JSON Schema object; its root an object): a run
   * completes only with an answer that validates, given as `outcome.output`. A model that reads
   * the response format (`Model.supports`) is asked through the provider's JSON-schema mode, any
   * other through a `final_answer` tool. A schema that cannot be enforced is an
   * `InvalidConfigError` here.
   */
  output?: OutputSchema | undefined;
  /** Invalid answers sent back to the model with the validation error before the run fails `StructuredOutputError`. Default 2. */
  outputRetries?: number | undefined;
  /**
   * When `maxTurns` or a budget would end the run, make one last call that asks for the answer
   * in the schema (no other tools offered; a budget may be passed by that one call). Default true.
   */
  finalOutputCall?: boolean | undefined;
  /**
   * Agents this one can hand the conversation to, each offered as a `transfer_to_<name>` tool:
   * its instructions, tools and model take over and the conversation goes on. Who speaks is
   * recorded with the session. See `HandoffsConfig`.
   */
  handoffs?: HandoffsConfig | undefined;
  /**
   * Checks on each run's input (before its first model call) and its final answer (before it
   * completes): pass, trip (`Failed(GuardrailTripped)`) or, on the answer, feedback the model
   * answers again. See `Guardrail`.
   */
  guardrails?: GuardrailsConfig | undefined;
}

/** Every key an agent config may have: any other is an `InvalidConfigError` naming the closest. */
export const AGENT_CONFIG_KEYS = optionKeys<AgentConfig>()({
  model: true,
  fallbackOn: true,
  instructions: true,
  tools: true,
  toolSources: true,
  operations: true,
  compactor: true,
  toolConcurrency: true,
  retry: true,
  policy: true,
  pruning: true,
  pruner: true,
  budget: true,
  pauseOnUsageLimit: true,
  prices: true,
  executor: true,
  clock: true,
  telemetry: true,
  maxToolCallsPerReply: true,
  repetition: true,
  toolPolicy: true,
  toolPolicyTimeoutMs: true,
  output: true,
  outputRetries: true,
  finalOutputCall: true,
  handoffs: true,
  guardrails: true,
});

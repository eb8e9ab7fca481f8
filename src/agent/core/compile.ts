import { InvalidConfigError } from '../../errors.js';
import { objectSlot } from '../../object-slot.js';
import { PolicySchema, type Message, type Policy, type PolicyInput } from '../../schemas.js';
import { estimateMessageTokens } from '../../tokens.js';
import { hasApprovalRule, ToolSet } from '../../tools/define-tool.js';
import { ListingCache, sourceRefs } from '../../tools/offered-tools.js';
import { DEFAULT_TOOL_CONCURRENCY } from '../../tools/run-tools.js';
import { AgentTracing } from '../tracing/agent-tracing.js';
import { APPROVALS_OPERATION } from '../approvals/approval-events.js';
import { BudgetSchema, PricesSchema, type Budget, type Prices } from '../budget/budget.js';
import { BUDGET_OPERATION } from '../budget/budget-pause.js';
import { AGENT_CONFIG_KEYS, type AgentConfig } from './config.js';
import { checkKnownKeys, parseOptions } from '../../known-keys.js';
import { retrySettings } from '../../models/retry.js';
import { composeExecutors, executorVersionProblem, inProcessExecutor, type Executor } from '../protocol/executor.js';
import { modelList, type ModelList } from '../fallback/fallback.js';
import { planGuardrails, type GuardrailPlan } from '../guardrails/guardrails.js';
import { compileTeam, handoffModels, teamSpeakers, type Team } from '../handoffs/handoffs.js';
import type { Speakers } from './speakers.js';
import type { IoDeps } from '../protocol/io-protocol.js';
import type { Operation } from '../operations/operation.js';
import { planOperations, type OperationPlan } from '../operations/operation-rules.js';
import { operationPoints } from '../operations/points.js';
import type { HookPoints } from './hook-points.js';
import type { Offered } from './offered.js';
import { requestPreparer } from '../operations/operation-context.js';
import { PruningSchema, pruneLineProblem, type Pruning } from './pruning.js';
import { repetitionLimit } from '../repetition/repetition.js';
import type { AnswerRules } from './answer.js';
import type { Pricing } from './pricing.js';
import { flatPricing } from '../budget/pricing.js';
import { modelPricing, type PricedModel } from '../budget/model-pricing.js';
import { isAgentTool } from '../protocol/call-scope.js';
import { answerRules, compileOutput, finalCallTools, type OutputState, type StructuredOutput } from '../structured-output/structured-output.js';
import { planToolPolicies, type ToolPolicyPlan } from '../approvals/tool-policy.js';
import { usageLimitRule, type UsageLimitRule } from '../budget/usage-limit.js';

/** Tool calls one reply may ask for by default; the excess gets error results instead of running. */
export const DEFAULT_MAX_TOOL_CALLS_PER_REPLY = 128;


/** The tools a model call offers (see offered.ts). */
export type { Offered };

/**
 * An agent configuration checked and resolved once, before any run: everything the driver's
 * rules read besides the run's own context. Frozen.
 */
export interface CompiledAgent {
  readonly config: AgentConfig;
  readonly clock: () => number;
  readonly operations: readonly Operation[];
  readonly plan: OperationPlan;
  /** With operations: how the loop reaches them (see hook-points.ts); none without. */
  readonly points: HookPoints | null;
  readonly pruning: Pruning | undefined;
  readonly defaultPolicy: Policy;
  readonly budget: Budget | undefined;
  readonly prices: Prices | undefined;
  /** What its runs and its session cost (see pricing.ts): one price list, or by model, each model at its own prices. */
  readonly pricing: Pricing;
  readonly models: ModelList;
  readonly maxCalls: number;
  readonly repetition: number | null;
  readonly instructionsTokens: number;
  readonly structured: StructuredOutput | undefined;
  /** How a reply becomes the answer when an output schema judges it (see answer.ts); none: as it is. */
  readonly answers: AnswerRules<OutputState> | undefined;
  readonly team: Team | null;
  /** With handoffs: who speaks now, and how the conversation is shown to them (see speakers.ts); none: the agent speaks for itself. */
  readonly speakers: Speakers | null;
  readonly tools: ToolSet;
  readonly toolPolicy: ToolPolicyPlan | null;
  readonly guardrails: GuardrailPlan | null;
  /** A batch goes through the approval region when a call may need a decision: a tool's rule or the policy's. */
  readonly gated: boolean;
  readonly usageLimit: UsageLimitRule;
  readonly hasSources: boolean;
  /** The entry agent's own tools. */
  readonly entryTools: Offered;
  /** The one tool a final output call offers, when the agent has an output schema with a tool. */
  readonly finalOffered: Offered | undefined;
  readonly tracing: AgentTracing | undefined;
  /** What the IO actor runs with (models, tools, operations, executor, …). */
  readonly io: IoDeps;
}

/**
 * A cache of a pure function of an agent and an object that never changes (a brain's context, an
 * event): one slot per object, which remembers the agent its value was computed for. Invisible:
 * a miss computes again.
 */
export interface AgentMemo<V> {
  get(agent: CompiledAgent, key: object): V | undefined;
  set(agent: CompiledAgent, key: object, value: V): void;
}

/** A new `AgentMemo`, made once per process for each function it caches. */
export function agentMemo<V>(): AgentMemo<V> {
  const slot = objectSlot<object, { agent: CompiledAgent; value: V }>();
  return {
    get: (agent, key) => {
      const hit = slot.get(key);
      return hit?.agent === agent ? hit.value : undefined;
    },
    set: (agent, key, value) => slot.set(key, { agent, value }),
  };
}

/** Executors that carry an agent's tracing, so a machine rebuilt on one does not trace twice. */
const tracedBy = new WeakMap<Executor, AgentTracing>();

/** Records that `executor` already carries `tracing` (a machine rebuilt on it must not add its own). */
export function markTraced(executor: Executor, tracing: AgentTracing | undefined): void {
  if (tracing) tracedBy.set(executor, tracing);
}

/**
 * Checks and resolves an agent configuration: names, limits, schemas, prices, tools and the
 * operation list, each once (`InvalidConfigError` naming what is wrong). The driver's chart and
 * rules read only the result.
 *
 * @example
 * ```ts
 * const agent = compileAgent({ model: scriptedModel([{ text: 'hi' }]), instructions: 'Be brief.' });
 * console.log(agent.maxCalls, agent.tools.names); // 128 []
 * ```
 */
export function compileAgent(config: AgentConfig): CompiledAgent {
  if (typeof config !== 'object' || config === null || Array.isArray(config)) throw new InvalidConfigError('the agent config must be an object { model, ... }');
  // Strict: a misspelt key is named with the closest known one, not ignored.
  checkKnownKeys(config, AGENT_CONFIG_KEYS, 'agent config');
  const operations = config.operations ?? [];
  const plan = planOperations(operations);
  const pruning = config.pruning && parseOptions(PruningSchema, config.pruning, 'pruning');
  const defaultPolicy = checkedPolicy(config.policy, pruning);
  const budget = config.budget && parseOptions(BudgetSchema, config.budget, 'budget');
  const prices = config.prices && parseOptions(PricesSchema, config.prices, 'prices');
  // Checked here, not when the IO wraps the models: a bad setting there threw from inside XState's start, which ended the process.
  if (config.retry !== undefined && config.retry !== false) retrySettings(config.retry);
  const models = modelList(config.model, config.fallbackOn, prices);
  const maxCalls = config.maxToolCallsPerReply ?? DEFAULT_MAX_TOOL_CALLS_PER_REPLY;
  if (!Number.isInteger(maxCalls) || maxCalls < 1) throw new InvalidConfigError(`maxToolCallsPerReply must be a positive integer, got ${maxCalls}`);
  // Checked here: 0 or less left every tool call queued (the run never settled), NaN threw from setMaxListeners in the IO's start.
  const concurrency = config.toolConcurrency ?? DEFAULT_TOOL_CONCURRENCY;
  if (!Number.isInteger(concurrency) || concurrency < 1) throw new InvalidConfigError(`toolConcurrency must be a positive integer, got ${String(concurrency)}`);
  // Checked here: one that is no function threw a TypeError as the run started.
  if (config.clock !== undefined && typeof config.clock !== 'function') throw new InvalidConfigError(`clock must be a function returning ms since the epoch, got ${typeof config.clock}`);
  // A compactor or pruner of another type was never called (silently no compaction), an executor failed every run.
  for (const name of ['compactor', 'pruner', 'executor'] as const) {
    if (config[name] !== undefined && typeof config[name] !== 'function') throw new InvalidConfigError(`${name} must be a function, got ${typeof config[name]}`);
  }
  if (config.instructions !== undefined && typeof config.instructions !== 'string') throw new InvalidConfigError('instructions must be a string');
  const repetition = repetitionLimit(config.repetition);
  const instructions: Message | undefined = config.instructions ? { role: 'system', content: config.instructions } : undefined;
  // Every model that may speak decides how the answer travels: the entry agent's list and the handoff agents' own.
  const structured = compileOutput(config, [...models.entries.map((entry) => entry.model), ...handoffModels(config.handoffs)]);
  // A tool name contributed twice (config, operations, the answer's tool) fails here, loudly.
  const shared = [...operations.flatMap((op) => op.tools ?? []), ...(structured?.tool ? [structured.tool] : [])];
  checkToolList(config.tools);
  const team = compileTeam({ handoffs: config.handoffs, instructions: config.instructions, own: config.tools ?? [], shared, models: models.entries.length });
  const tools = new ToolSet(team ? team.tools : [...(config.tools ?? []), ...shared]);
  // The models the agent calls itself, by their index in the IO's list: its own, then its handoff agents' (at their prices, else the agent's).
  const priced: PricedModel[] = [
    ...models.entries.map((entry) => ({ name: entry.model.name, prices: entry.prices })),
    ...(team?.models ?? []).map((own) => ({ name: own.model.name, prices: own.prices ?? prices })),
  ];
  if (budget?.maxCostUsd !== undefined && priced.some((model) => !model.prices)) throw new InvalidConfigError('budget.maxCostUsd needs prices');
  const speakers = team && teamSpeakers(team);
  const toolPolicy = planToolPolicies(config);
  const guardrails = planGuardrails(config.guardrails);
  const gated = [...tools].some(hasApprovalRule) || toolPolicy !== null;
  // Approvals are the built-in approval-like operation, checked after the beforeTools point.
  if (gated) approvalsOrderProblem(plan);
  const usageLimit = usageLimitRule(config.pauseOnUsageLimit);
  if ((budget?.pause || usageLimit) && plan.byName.has(BUDGET_OPERATION)) throw new InvalidConfigError(`operation name '${BUDGET_OPERATION}' is taken by budgets that pause`);
  // Two sources of one name: a restored run could not tell which listed a tool.
  sourceRefs(config.toolSources ?? []);
  const { io, tracing } = ioDeps(config, { models, team, tools, plan, toolPolicy, guardrails, instructions, structured });
  return Object.freeze({
    config,
    clock: config.clock ?? Date.now,
    operations,
    plan,
    points: operations.length > 0 ? operationPoints(operations, plan) : null,
    pruning,
    defaultPolicy,
    budget,
    prices,
    pricing: pricingFor(models, priced, speakers, tools),
    models,
    maxCalls,
    repetition,
    instructionsTokens: instructions ? estimateMessageTokens(instructions) : 0,
    structured,
    answers: structured && answerRules(structured),
    team,
    speakers,
    tools,
    toolPolicy,
    guardrails,
    gated,
    usageLimit,
    hasSources: io.toolSources.length > 0,
    entryTools: { definitions: tools.definitions, names: tools.names },
    finalOffered: structured && finalCallTools(structured),
    tracing,
    io,
  });
}

/**
 * How the agent's runs are priced: by model when a run may use more than one (a list, a handoff
 * agent's own model, a child agent's), each call under the model that made it; else one price list.
 */
function pricingFor(models: ModelList, priced: readonly PricedModel[], speakers: Speakers | null, tools: ToolSet): Pricing {
  const byModel = models.listed || priced.length > models.entries.length || [...tools].some(isAgentTool);
  if (!byModel) return flatPricing(priced[0]!.prices, priced[0]!.name);
  // The speaking agent's own model, else the list's model in use.
  return modelPricing(priced, (context) => speakers?.of(context.agent).model ?? context.models?.active.index ?? 0);
}

type IoParts = Pick<CompiledAgent, 'models' | 'team' | 'tools' | 'plan' | 'toolPolicy' | 'guardrails' | 'structured'> & { instructions: Message | undefined };

/** The IO actor's dependencies, with the executor wrapped in the agent's spans when it traces. */
function ioDeps(config: AgentConfig, parts: IoParts): { io: IoDeps; tracing: AgentTracing | undefined } {
  // A machine rebuilt from this one (`withClock`) keeps its tracing: its executor already has it.
  const inherited = config.executor && tracedBy.get(config.executor);
  const tracing = inherited ?? (config.telemetry ? new AgentTracing(config.telemetry, parts.models.entries[0]!.model.name) : undefined);
  const executor = config.executor ?? inProcessExecutor;
  const versionProblem = executorVersionProblem(executor);
  if (versionProblem) throw new InvalidConfigError(versionProblem);
  const io: IoDeps = {
    models: [...parts.models.entries.map((entry) => entry.model), ...(parts.team?.models ?? []).map((own) => own.model)],
    retry: config.retry ?? {},
    tools: parts.tools,
    toolSources: config.toolSources ?? [],
    listings: new ListingCache(),
    operations: parts.plan,
    compactor: config.compactor,
    toolConcurrency: config.toolConcurrency ?? DEFAULT_TOOL_CONCURRENCY,
    instructions: parts.instructions,
    ...(parts.plan.list.length > 0 && { prepareRequest: requestPreparer(parts.plan.list) }),
    toolPolicy: parts.toolPolicy,
    responseFormat: parts.structured?.responseFormat,
    guardrails: parts.guardrails,
    // Spans wrap the configured executor: they time the effect as it really runs.
    executor: tracing && !inherited ? composeExecutors(executor, tracing.wrap) : executor,
    // A run whose IO stops before it ends (the actor stopped while the run waits) ends its span.
    ...(tracing && { onStop: (key: string | undefined) => tracing.ioStopped(key) }),
  };
  markTraced(io.executor, tracing);
  return { io, tracing };
}

/**
 * A policy the pruning configuration allows (strict: an unknown key names the closest), or the
 * error `make` builds saying why not (`InvalidConfigError` naming `where` by default).
 */
export function checkedPolicy(
  policy: PolicyInput | undefined,
  pruning: Pruning | undefined,
  make: (message: string) => Error = (message) => new InvalidConfigError(message),
  where = 'policy',
): Policy {
  const resolved = parseOptions(PolicySchema, policy ?? {}, where, make);
  const problem = pruneLineProblem(pruning, resolved);
  if (problem) throw make(problem);
  return resolved;
}

/**
 * The agent's own tools are a list of tools (what defineTool makes): a string or a list holding
 * something else passed here and failed as a raw TypeError ("reading 'name'") when a run started.
 */
function checkToolList(tools: unknown): void {
  if (tools === undefined) return;
  if (!Array.isArray(tools)) throw new InvalidConfigError(`tools must be a list of tools (defineTool), got ${typeof tools}`);
  tools.forEach((tool: unknown, index) => {
    const { name, execute } = (typeof tool === 'object' && tool !== null ? tool : {}) as { name?: unknown; execute?: unknown };
    if (typeof name !== 'string' || typeof execute !== 'function') throw new InvalidConfigError(`tools[${index}] must be a tool (defineTool) with a name and execute`);
  });
}

/**
 * The approvals operation runs its check after the beforeTools point, so (seed 003) no
 * operation may run tools before it, and none may take its name.
 */
function approvalsOrderProblem(plan: OperationPlan): void {
  if (plan.byName.has(APPROVALS_OPERATION)) throw new InvalidConfigError(`operation name '${APPROVALS_OPERATION}' is taken by the built-in approvals when a tool needs approval`);
  const runner = plan.list.find((op) => op.runsTools);
  if (runner) {
    throw new InvalidConfigError(
      `operation '${runner.name}' runs tools, but tools here need approval, and the approvals operation checks calls after the beforeTools point: ` +
        `the calls it answered would never be approved (seed 003)`,
    );
  }
}

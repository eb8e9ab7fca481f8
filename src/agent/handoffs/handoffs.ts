import { z } from 'zod';
import type { Model } from '../../model.js';
import type { Message, ToolCall, ToolMessage } from '../../schemas.js';
import { estimateMessageTokens } from '../../tokens.js';
import { defineTool, ToolSet, type Tool } from '../../tools/define-tool.js';
import { InvalidConfigError } from '../../errors.js';
import { checkKnownKeys, optionKeys, parseOptions } from '../../known-keys.js';
import { PricesSchema, type Prices } from '../budget/budget.js';
import type { ActiveAgent, Speaker as CoreSpeaker, Speakers } from '../core/speakers.js';

/**
 * How the conversation is shown to the agent that has it after a handoff (a view: the stored
 * conversation stays whole, so handing back shows everything again):
 * - `'whole'` (the default): every message, tool traffic included. The facts an earlier agent's
 *   tools found are often only in their results, and an unchanged prefix keeps the provider's
 *   prompt cache.
 * - `'filtered'`: without the tool traffic of tools the active agent does not have (the earlier
 *   agents' calls, their transfers, and those calls' results); text stays.
 * - a function of the whole conversation and the handoff, such as a summary (synchronous: it is
 *   applied on every model call; compute an expensive summary beforehand).
 *
 * @example
 * ```ts
 * import type { HistoryPresentation } from 'loopchart';
 *
 * const lastFour: HistoryPresentation = (messages) => messages.filter((m) => m.role === 'user').slice(-4);
 * ```
 */
export type HistoryPresentation = 'whole' | 'filtered' | ((messages: readonly Message[], handoff: { agent: string; from: string }) => Message[]);

/**
 * An agent the conversation can be handed to: its instructions, tools and model take over.
 *
 * @example
 * ```ts
 * import type { HandoffAgent } from 'loopchart';
 * import { scriptedModel } from 'loopchart/testing';
 *
 * const billing: HandoffAgent = {
 *   name: 'billing',
 *   description: 'Refunds and invoices.',
 *   instructions: 'You handle refunds.',
 *   model: scriptedModel([{ text: 'Refunded.' }]),
 *   handoffs: ['triage'],
 * };
 * ```
 */
export interface HandoffAgent {
  /** Letters, digits, `_` and `-`, starting with a letter; unique in the team. Its tool is `transfer_to_<name>`. */
  name: string;
  /** What it does: the description of its transfer tool, which the other agents' models read. */
  description: string;
  instructions?: string | undefined;
  tools?: readonly Tool[] | undefined;
  /** Default: the agent's own model (its list, with its fallback). */
  model?: Model | undefined;
  /**
   * What its own model's tokens cost (needs `model`): its replies are booked under that model in
   * `usageByModel` and priced at these. Default the entry agent's `prices`.
   */
  prices?: Prices | undefined;
  /** Agents it may hand to, by name (the entry agent's too: cycles are fine). Default none. */
  handoffs?: readonly string[] | undefined;
  /** How it sees the conversation; default the team's `history`. */
  history?: HistoryPresentation | undefined;
}

/**
 * `AgentConfig.handoffs`: the agents this one can hand the conversation to. The agent being
 * configured is the entry agent (`name`, default `'main'`); it may hand to every agent listed
 * unless `to` says otherwise. Session-wide settings (limits, operations, compaction, output
 * schema, executor) stay the entry agent's whoever speaks.
 *
 * @example
 * ```ts
 * import { createAgentMachine, type HandoffsConfig } from 'loopchart';
 * import { scriptedModel } from 'loopchart/testing';
 *
 * const handoffs: HandoffsConfig = {
 *   name: 'triage',
 *   agents: [{ name: 'billing', description: 'Refunds.', instructions: 'You handle refunds.', handoffs: ['triage'] }],
 *   history: 'filtered',
 * };
 * const agent = createAgentMachine({ model: scriptedModel([{ text: 'Hi' }]), handoffs });
 * ```
 */
export interface HandoffsConfig {
  name?: string | undefined;
  /** The entry agent's transfer tool description, when an agent may hand back to it. */
  description?: string | undefined;
  agents: readonly HandoffAgent[];
  /** Agents the entry agent may hand to; default all of `agents`. */
  to?: readonly string[] | undefined;
  /** Default `'whole'` (see `HistoryPresentation`). */
  history?: HistoryPresentation | undefined;
  /**
   * Handoffs one run may make (a positive integer); the transfer past it is refused and the run
   * ends `Sealed` with a reason starting `maxHandoffs:`, keeping its conversation as every limit
   * does. Default `DEFAULT_MAX_HANDOFFS` (10).
   */
  maxHandoffs?: number | undefined;
}

/**
 * Handoffs per run unless `HandoffsConfig.maxHandoffs` says otherwise. Agents that hand the
 * conversation round in a cycle (A → B → A …) would otherwise go on until `maxTurns` (200 model
 * calls by default). 10 is OpenAI Agents JS's default turn limit: a real triage chain hands over
 * two or three times, so ten leaves room for a few round trips while a cycle stops after about
 * eleven model calls.
 *
 * @example
 * ```ts
 * import { DEFAULT_MAX_HANDOFFS } from 'loopchart/schemas';
 *
 * console.log(DEFAULT_MAX_HANDOFFS); // 10
 * ```
 */
export const DEFAULT_MAX_HANDOFFS = 10;

/** One agent of a team as the chart uses it while it speaks (see core/speakers.ts), and how it is shown the conversation. */
export interface Speaker extends CoreSpeaker {
  history: HistoryPresentation;
}

export interface Team {
  entry: string;
  /** Handoffs one run may make (see `HandoffsConfig.maxHandoffs`). */
  maxHandoffs: number;
  speakers: ReadonlyMap<string, Speaker>;
  /** Every tool any agent may call, once each (the driver runs calls from this set). */
  tools: readonly Tool[];
  /** The handoff agents' own models, appended to the driver's list, each with its agent's `prices` (if given). */
  models: readonly { readonly model: Model; readonly prices: Prices | undefined }[];
}

const HANDOFFS_KEYS = optionKeys<HandoffsConfig>()({ name: true, description: true, agents: true, to: true, history: true, maxHandoffs: true });
const AGENT_KEYS = optionKeys<HandoffAgent>()({ name: true, description: true, instructions: true, tools: true, model: true, prices: true, handoffs: true, history: true });

const NAME = /^[A-Za-z][A-Za-z0-9_-]{0,51}$/;
const TRANSFER_PREFIX = 'transfer_to_';

/** The tool whose call hands the conversation to `name`. */
export const transferToolName = (name: string): string => `${TRANSFER_PREFIX}${name}`;

function transferTool(agent: { name: string; description: string }): Tool {
  return defineTool({
    name: transferToolName(agent.name),
    description: `Hand the conversation to ${agent.name}: ${agent.description}`,
    input: z.object({}),
    execute: () => `Transferred to ${agent.name}.`,
  });
}

const instructionsOf = (text: string | undefined): Message | undefined => (text ? { role: 'system', content: text } : undefined);

/**
 * The handoff agents' own models, read before the team is compiled (checked there): they speak in
 * the run too, so what every speaking model can read (an output schema's JSON mode) counts them.
 */
export function handoffModels(handoffs: HandoffsConfig | undefined): Model[] {
  const agents = (handoffs as { agents?: unknown } | undefined)?.agents;
  if (!Array.isArray(agents)) return [];
  return agents.flatMap((agent: unknown) => {
    const model = (agent as { model?: unknown } | null)?.model;
    return typeof model === 'object' && model !== null ? [model as Model] : [];
  });
}

/**
 * The team a config describes, checked once: names well formed and unique, every target known.
 * `own`: the entry agent's tools; `shared`: tools every agent is offered (operations', the
 * answer's); `models`: how many models the entry agent has. Null without handoffs.
 */
export function compileTeam(input: {
  handoffs: HandoffsConfig | undefined;
  instructions: string | undefined;
  own: readonly Tool[];
  shared: readonly Tool[];
  models: number;
}): Team | null {
  const { handoffs } = input;
  if (!handoffs) return null;
  checkKnownKeys(handoffs, HANDOFFS_KEYS, 'handoffs');
  if (!Array.isArray(handoffs.agents as unknown)) throw new InvalidConfigError('handoffs.agents must be a list of agents');
  handoffs.agents.forEach((agent, i) => checkKnownKeys(agent, AGENT_KEYS, `handoffs.agents[${i}]`));
  const entry = handoffs.name ?? 'main';
  const maxHandoffs = handoffs.maxHandoffs ?? DEFAULT_MAX_HANDOFFS;
  if (!Number.isInteger(maxHandoffs) || maxHandoffs < 1) throw new InvalidConfigError(`handoffs.maxHandoffs must be a positive integer, got ${String(maxHandoffs)}`);
  const agents = [{ name: entry, description: handoffs.description ?? 'the agent the conversation started with', to: handoffs.to ?? handoffs.agents.map((a) => a.name) }, ...handoffs.agents.map((a) => ({ ...a, to: a.handoffs ?? [] }))];
  const byName = new Map<string, (typeof agents)[number]>();
  for (const agent of agents) {
    if (typeof agent.name !== 'string' || !NAME.test(agent.name)) throw new InvalidConfigError(`handoff agent name ${JSON.stringify(agent.name)} must be letters, digits, _ or -, starting with a letter`);
    if (byName.has(agent.name)) throw new InvalidConfigError(`handoff agent name '${agent.name}' is used twice`);
    byName.set(agent.name, agent);
  }
  for (const agent of agents) {
    for (const target of agent.to) {
      if (!byName.has(target)) throw new InvalidConfigError(`agent '${agent.name}' hands off to '${target}', which is not in the team`);
      if (target === agent.name) throw new InvalidConfigError(`agent '${agent.name}' cannot hand off to itself`);
    }
  }
  const transfers = new Map(agents.slice(1).map((agent) => [agent.name, transferTool(agent)]));
  if (agents[0]!.to.length > 0) transfers.set(entry, transferTool(agents[0]!));
  const speakers = new Map<string, Speaker>();
  const all = new Set<Tool>();
  const models: { model: Model; prices: Prices | undefined }[] = [];
  for (const [i, agent] of agents.entries()) {
    const configured = i === 0 ? input.own : (handoffs.agents[i - 1]!.tools ?? []);
    const offered = [...configured, ...input.shared, ...agent.to.map((target) => transfers.get(target)!)];
    // Checked per agent (a name twice is a DuplicateToolError), and across agents below.
    const set = new ToolSet(offered);
    for (const tool of offered) all.add(tool);
    const own = i === 0 ? undefined : handoffs.agents[i - 1]!;
    const instructions = instructionsOf(i === 0 ? input.instructions : own!.instructions);
    if (own?.prices !== undefined && !own.model) throw new InvalidConfigError(`handoffs.agents[${i - 1}].prices: agent '${agent.name}' has no model of its own to price (it speaks with the entry agent's)`);
    if (own?.model) models.push({ model: own.model, prices: own.prices === undefined ? undefined : parseOptions(PricesSchema, own.prices, `handoffs.agents[${i - 1}].prices`) });
    speakers.set(agent.name, {
      name: agent.name,
      instructions,
      instructionsTokens: instructions ? estimateMessageTokens(instructions) : 0,
      offered: { definitions: set.definitions, names: set.names },
      model: own?.model ? input.models + models.length - 1 : null,
      history: own?.history ?? handoffs.history ?? 'whole',
    });
  }
  const names = new Map<string, Tool>();
  for (const tool of all) {
    if (names.has(tool.name)) throw new InvalidConfigError(`two different tools are named '${tool.name}' in the team: agents may share a tool, not a name`);
    names.set(tool.name, tool);
  }
  return { entry, maxHandoffs, speakers, tools: [...all], models };
}

/** Whether the run has made all the handoffs it may (the next transfer is refused). */
export const handoffLimitReached = (team: Team, handoffs: number | undefined): boolean => (handoffs ?? 0) >= team.maxHandoffs;

/**
 * The batch's results when its transfer is refused at the limit, and the reason the run is sealed
 * with: the transfer's own result says it did not happen (the conversation is kept).
 */
export function refusedHandoff(team: Team, to: string, results: readonly ToolMessage[]): { results: ToolMessage[]; reason: string } {
  const limit = team.maxHandoffs;
  const transfer = results.findIndex((result) => result.toolName === transferToolName(to) && !result.isError);
  const note = `Not transferred: this run already handed the conversation over ${limit} times (maxHandoffs ${limit}).`;
  return {
    results: results.map((result, i) => (i === transfer ? { ...result, content: note, isError: true } : result)),
    reason: `maxHandoffs: handoff to '${to}' refused, the run already handed the conversation over ${limit} times (limit ${limit})`,
  };
}

/** The agent that speaks now. */
export const speakerOf = (team: Team, active: ActiveAgent | undefined): Speaker => team.speakers.get(active?.name ?? team.entry)!;

/**
 * A team's speakers as the loop asks them (see core/speakers.ts): who speaks now and how the
 * conversation is shown to them.
 *
 * @example
 * ```ts
 * declare const team: Team;
 * const speakers = teamSpeakers(team);
 * console.log(speakers.of(undefined).name === team.entry); // true: a run starts with the entry agent
 * ```
 */
export const teamSpeakers = (team: Team): Speakers => ({
  entry: team.entry,
  of: (active) => speakerOf(team, active),
  present: (active, messages) => presentHistory(speakerOf(team, active), active, messages),
});

/** Why a stored active agent cannot go on with this team (another configuration), or null. */
export function activeAgentProblem(team: Team | null, active: ActiveAgent | undefined): string | null {
  if (!active) return null;
  if (!team) return `the session is with agent '${active.name}', but this agent has no handoffs`;
  return team.speakers.has(active.name) ? null : `the session is with agent '${active.name}', which this team does not have`;
}

/**
 * What a finished batch does to who speaks: the first transfer call (in call order) that
 * succeeded hands over; a later transfer in the same batch gets an error result instead of
 * its own, since only one agent can take the conversation.
 */
export function settleHandoff(
  team: Team,
  active: ActiveAgent | undefined,
  batch: readonly { call: ToolCall; result: ToolMessage | undefined }[],
): { to: ActiveAgent; results: ToolMessage[] } | null {
  const from = speakerOf(team, active).name;
  let to: string | null = null;
  const results: ToolMessage[] = [];
  for (const { call, result } of batch) {
    const target = call.name.startsWith(TRANSFER_PREFIX) ? call.name.slice(TRANSFER_PREFIX.length) : null;
    const transfers = target !== null && team.speakers.has(target) && result !== undefined && !result.isError;
    if (transfers && to === null) to = target;
    else if (transfers) {
      results.push({ ...result, content: `Not transferred: this reply already hands the conversation to ${to}.`, isError: true });
      continue;
    }
    if (result) results.push(result);
  }
  return to === null ? null : { to: { name: to, from }, results };
}

/** The conversation without the tool traffic of tools outside `names` (see `'filtered'`). */
export function withoutForeignTools(messages: readonly Message[], names: ReadonlySet<string>): Message[] {
  const dropped = new Set<string>();
  const out: Message[] = [];
  for (const message of messages) {
    if (message.role === 'tool') {
      if (!dropped.has(message.toolCallId)) out.push(message);
      continue;
    }
    if (message.role !== 'assistant' || !message.toolCalls?.length) {
      out.push(message);
      continue;
    }
    const kept = message.toolCalls.filter((call) => names.has(call.name) || (dropped.add(call.id), false));
    if (kept.length === message.toolCalls.length) out.push(message);
    else if (kept.length > 0) out.push({ ...message, toolCalls: kept });
    else if (message.content) out.push({ role: 'assistant', content: message.content });
  }
  return out;
}

const PresentedSchema = z.array(z.object({ role: z.enum(['system', 'user', 'assistant', 'tool']) }).loose());

/** The conversation as the speaking agent is shown it (see `HistoryPresentation`). */
export function presentHistory(speaker: Speaker, active: ActiveAgent | undefined, messages: readonly Message[]): readonly Message[] {
  const how = speaker.history;
  if (!active || how === 'whole') return messages;
  if (how === 'filtered') return withoutForeignTools(messages, new Set(speaker.offered.names));
  const shown = how(messages, { agent: active.name, from: active.from });
  if (!PresentedSchema.safeParse(shown).success) throw new TypeError(`the history presentation of agent '${speaker.name}' returned no list of messages`);
  return shown;
}

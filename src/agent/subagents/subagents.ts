import { z } from 'zod';
import type { ToolCall, ToolMessage, Usage } from '../../schemas.js';
import { pendingCalls, type BrainState } from '../core/brain-state.js';
import { addUsage } from '../core/run-rules.js';
import type { ModelSpend } from '../core/pricing.js';
import { sessionIdProblem } from '../../stores/step.js';
import { InvalidSessionIdError } from '../../stores/errors.js';
import type { AgentOutcome } from '../protocol/failure.js';
import { LoopchartError } from '../../errors.js';

/**
 * The rules of agents inside agents, as pure functions: how a child session is named, how the
 * tree addresses a call deep inside it, and what a child's run gives its parent as a tool result.
 */

/** Separates the levels of the tree in a child session id and in a qualified call id. */
export const TREE_SEPARATOR = '/';

/**
 * The session id of the child run a tool call starts: `<parent>/<call key>`, where the call key
 * is the call's idempotency key within the parent (run, turn, call id), so it is unique in the
 * parent and the same in every process that repeats the call. Checked like any session id
 * (`InvalidSessionIdError`): the parts come from the model and from whoever named the parent.
 * For example `support-42:run-1:turn-1:tools:call_7` in session `support-42` starts
 * `support-42/run-1:turn-1:call_7`.
 */
export function childSessionId(parentSessionId: string, idempotencyKey: string): string {
  const own = idempotencyKey.startsWith(`${parentSessionId}:`) ? idempotencyKey.slice(parentSessionId.length + 1) : idempotencyKey;
  const id = `${parentSessionId}${TREE_SEPARATOR}${own.replace(':tools:', ':')}`;
  const problem = sessionIdProblem(id);
  if (problem) throw new InvalidSessionIdError(id, problem);
  return id;
}

/**
 * The part of a child session's id after its parent's (see `childSessionId`):
 * `/run-<r>:turn-<t>:<call id>`. The call id is the model's and may hold anything, a `/` too
 * (`team/run-1:turn-1:a/b`), so the rest of the id is not looked into.
 */
const CHILD_PART = /\/run-\d+:turn-\d+:./s;

/** Whether `sessionId` has the shape `childSessionId` gives: a session its parent's call makes and drives. */
export const isChildSessionId = (sessionId: string): boolean => CHILD_PART.test(sessionId);

/** A child's call id as its parent shows it: the path of parent call ids down to it. */
export const qualifiedCallId = (parentCallId: string, childCallId: string): string => `${parentCallId}${TREE_SEPARATOR}${childCallId}`;

/**
 * Where a qualified id points by its first separator: the parent's call whose child holds it, and
 * the id the child knows it by; null for a plain id. A model's call id may hold the separator too
 * (`a/b`), so this reading is only right where no call of the run does: route by the run's calls
 * with `routeAmong`.
 */
export function routeOf(id: string): CallRoute | null {
  const at = id.indexOf(TREE_SEPARATOR);
  if (at <= 0 || at === id.length - 1) return null;
  return { callId: id.slice(0, at), rest: id.slice(at + 1) };
}

/** A qualified id routed: the call of this level whose child holds it, and the id that child knows it by. */
export type CallRoute = { callId: string; rest: string };

/** An id that reads as more than one call of the batch (`readings`: each call it may name or go down to): refused, never guessed. */
export type AmbiguousRoute = { ambiguous: string[] };

/**
 * Where `id` points among the calls of the batch a run waits on (`callIds`, as the model named
 * them, a `/` in them too): the one call whose id is `id` itself (null: a call of this level's
 * own), or whose id and the separator begin it (the route down to its child). The model names
 * the calls, so `a` and `a/b` may both be there, and `a/b/p1` may be call `b/p1` of the child of
 * `a` as well as call `p1` of the child of `a/b`: when more than one call of the batch reads so,
 * the id is ambiguous, refused by the caller rather than sent to either. No call of the batch
 * reads so: the first separator's reading (`routeOf`), which names a call that runs no child
 * and so is refused as such.
 *
 * @example
 * ```ts
 * routeAmong('a/b/p1', ['a/b', 'c']); // { callId: 'a/b', rest: 'p1' }
 * routeAmong('a/b', ['a/b']); // null: the batch's own call a/b
 * routeAmong('a/b/p1', ['a', 'a/b']); // { ambiguous: ['a', 'a/b'] }
 * ```
 */
export function routeAmong(id: string, callIds: Iterable<string>): CallRoute | AmbiguousRoute | null {
  const batch = new Set(callIds);
  const readings = [...batch].filter((callId) => callId === id || (id.length > callId.length + 1 && id.startsWith(`${callId}${TREE_SEPARATOR}`)));
  if (readings.length > 1) return { ambiguous: readings.sort() };
  const [callId] = readings;
  if (callId === undefined) return routeOf(id);
  return callId === id ? null : { callId, rest: id.slice(callId.length + 1) };
}

/** Whether a route is an ambiguous id's (see `routeAmong`). */
export const isAmbiguous = <T extends object>(route: T | AmbiguousRoute | null): route is AmbiguousRoute => route !== null && 'ambiguous' in route;

/** The ids of the calls of the batch a run waits on: what its qualified ids are routed by. */
export const batchCallIds = (brain: BrainState): string[] => pendingCalls(brain).map(({ call }) => call.id);

/** Where `id` points in this run (see `routeAmong`): among the calls of the batch it waits on. */
export const routeIn = (context: { brain: BrainState }, id: string): CallRoute | AmbiguousRoute | null => routeAmong(id, batchCallIds(context.brain));

/** Why an ambiguous id is refused (`unknown-call`: it names no one call). */
export const ambiguityDetail = (id: string, route: AmbiguousRoute): string =>
  `'${id.slice(0, 200)}' may name a call of more than one call of the batch (${route.ambiguous.map((callId) => `'${callId.slice(0, 100)}'`).join(', ')}): it is refused, not guessed`;

/**
 * Whether a child of the call a qualified id routes to (`c1` of `c1/p1`) may be running: that call
 * is one of the batch the run waits on, still without its result. When not (the run cancelled or
 * over, the call finished), no child is there to take a decision routed down: it is refused here.
 * An ambiguous id (see `routeAmong`) has no such child.
 */
export function childMayRun(context: { brain: BrainState; toolJournal: readonly ToolMessage[] }, toolCallId: string): boolean {
  const route = routeIn(context, toolCallId);
  return route !== null && !isAmbiguous(route) && callMayRunChild(context, route.callId);
}

/** Whether call `callId` of this run may be running a child: one of the batch the run waits on, still without its result. */
export const callMayRunChild = (context: { brain: BrainState; toolJournal: readonly ToolMessage[] }, callId: string): boolean =>
  pendingCalls(context.brain).some(({ call }) => call.id === callId) && !context.toolJournal.some((result) => result.toolCallId === callId);

/** A decision (`toolCallId`) or a steer (`target`) the parent routes to a child. */
export type RoutableEvent = { type: string; toolCallId?: string | undefined; target?: string | undefined };

/**
 * Where a parent sends an event meant for a child, and the event as that child takes it, routed
 * among the calls of the batch (`callIds`, see `routeAmong`): a decision for `c1/c7` goes to the
 * child of call `c1` as a decision for `c7`; a steer with target `c1` goes to that child as a
 * plain steer, with `c1/c7` as a steer targeting `c7`. Null for an event of the parent's own;
 * `ambiguous` for an id more than one call of the batch reads as its own (refused).
 */
export function routedEvent(event: RoutableEvent, callIds: Iterable<string>): { callId: string; event: RoutableEvent } | AmbiguousRoute | null {
  if (event.toolCallId !== undefined) {
    const route = routeAmong(event.toolCallId, callIds);
    if (route === null || isAmbiguous(route)) return route;
    return { callId: route.callId, event: { ...event, toolCallId: route.rest } };
  }
  if (event.target === undefined || event.target === '') return null;
  const { target, ...rest } = event;
  const route = routeAmong(target, callIds);
  if (route === null) return { callId: target, event: rest };
  return isAmbiguous(route) ? route : { callId: route.callId, event: { ...rest, target: route.rest } };
}

/**
 * A child run did not complete, or answered in a shape its tool refuses. Thrown inside the agent
 * tool, so the parent gets it as an error tool result (its message) and its run goes on.
 *
 * @example
 * ```ts
 * import { SubagentError } from 'loopchart';
 *
 * // The parent's model reads it as an error result: "subagent 'research' ended Failed: ModelError: ..."
 * const error: unknown = new SubagentError('research', 'ended Cancelled');
 * if (SubagentError.isInstance(error)) console.log(error.code, error.agent); // 'SubagentFailed' 'research'
 * ```
 */
export class SubagentError extends LoopchartError {
  /** The agent tool's name. */
  readonly agent: string;
  constructor(agent: string, problem: string) {
    super('SubagentFailed', `subagent '${agent}' ${problem}`);
    this.agent = agent;
  }
}

/**
 * How deep a child run may start in the tree of agents by default: a top-level agent's child is
 * depth 1. Five levels is more than a coordinator, its workers and their helpers need, and an
 * agent that calls itself is stopped there with an error that names the depth, before the child
 * session ids (each level adds the call's key) pass the 256-character limit of a session id.
 *
 * @example
 * ```ts
 * import { agentTool } from 'loopchart';
 * import { DEFAULT_MAX_SUBAGENT_DEPTH } from 'loopchart/schemas';
 *
 * agentTool({ agent: machine, name: 'helper', description: 'Helps.', maxDepth: DEFAULT_MAX_SUBAGENT_DEPTH + 2 });
 * ```
 */
export const DEFAULT_MAX_SUBAGENT_DEPTH = 5;

/**
 * An agent tool was called where its child would run deeper than its `maxDepth`. Thrown before
 * the child starts (no child session is created), inside the tool: the parent's model reads it
 * as an error result (its message names the depth and the limit) and its run goes on.
 *
 * @example
 * ```ts
 * import { SubagentDepthError } from 'loopchart';
 *
 * const error: unknown = new SubagentDepthError('research', 6, 5);
 * if (SubagentDepthError.isInstance(error)) console.log(error.code, error.depth, error.maxDepth); // 'SubagentDepth' 6 5
 * ```
 */
export class SubagentDepthError extends LoopchartError {
  /** The agent tool's name. */
  readonly agent: string;
  /** The depth the child would have run at (a top-level agent's child is 1). */
  readonly depth: number;
  readonly maxDepth: number;
  constructor(agent: string, depth: number, maxDepth: number) {
    super('SubagentDepth', `subagent '${agent}' not started: it would run at depth ${depth} of the tree of agents, past its maxDepth ${maxDepth}`);
    this.agent = agent;
    this.depth = depth;
    this.maxDepth = maxDepth;
  }
}

/** Throws `SubagentDepthError` when a child at `depth` is past `maxDepth`. */
export function checkDepth(agent: string, depth: number, maxDepth: number): void {
  if (depth > maxDepth) throw new SubagentDepthError(agent, depth, maxDepth);
}

/**
 * The tool result a finished child gives its parent: its structured output when it has one, else
 * its final text; checked against `output` when the tool names a schema (a JSON text is parsed
 * first). Anything but Completed, or a result the schema refuses, throws `SubagentError`, which
 * the tool runner turns into an error result: the parent reads why and goes on.
 */
export function childResult(agent: string, outcome: AgentOutcome | undefined, output?: z.ZodType): unknown {
  if (!outcome) throw new SubagentError(agent, `ended without an outcome`);
  if (outcome.type !== 'Completed') {
    const why = outcome.type === 'Failed' ? `: ${outcome.error.type}: ${outcome.error.message}` : outcome.type === 'Sealed' ? `: ${outcome.reason}` : '';
    throw new SubagentError(agent, `ended ${outcome.type}${why}`);
  }
  const structured = (outcome as { output?: unknown }).output;
  if (!output) return structured !== undefined ? structured : outcome.finalText;
  let value = structured;
  if (value === undefined) {
    try {
      value = JSON.parse(outcome.finalText);
    } catch {
      throw new SubagentError(agent, `answered text that is not JSON, and its tool expects structured output`);
    }
  }
  const parsed = output.safeParse(value);
  if (!parsed.success) throw new SubagentError(agent, `answered a malformed result: ${z.prettifyError(parsed.error)}`);
  return parsed.data;
}

/** A child's calls as its parent shows them: ids qualified by the parent's call id. */
export const qualifiedCalls = (parentCallId: string, calls: readonly ToolCall[]): ToolCall[] =>
  calls.map((call) => ({ ...call, id: qualifiedCallId(parentCallId, call.id) }));

/** What a parent's run has counted of one child run: its usage, and by model (absent in records of builds that kept none). */
export type CountedChild = Usage & { models?: ModelSpend[] | undefined };

/**
 * A child's usage added to its parent's run and session. `usage` is the child's run so far (it
 * reports as it spends, and once more when it ends), so what is added is what it spent since the
 * last report: the whole tree is counted once, also when the parent's run ends (cancel, seal, the
 * time budget) while the child still runs and its last report comes too late, and a call repeated
 * after a crash finds its child counted. `models`: the same by model, at the child's prices. Null
 * when nothing new was spent; else what to assign and what was added, by model when known (which
 * the run books under the child's models, see `acceptSubagentReport`).
 */
export function childUsageCounted(
  context: { runUsage: Usage; sessionUsage: Usage; childUsage?: Readonly<Record<string, CountedChild>> | undefined },
  childId: string,
  usage: Usage,
  models?: readonly ModelSpend[] | undefined,
): { assign: { runUsage: Usage; sessionUsage: Usage; childUsage: Record<string, CountedChild> }; added: Usage; addedByModel: ModelSpend[] | null } | null {
  const counted = countChildUsage(context.childUsage, childId, usage, models);
  if (!counted) return null;
  const { added, addedByModel } = counted;
  return { assign: { runUsage: addUsage(context.runUsage, added), sessionUsage: addUsage(context.sessionUsage, added), childUsage: counted.counted }, added, addedByModel };
}

const NONE: Usage = { inputTokens: 0, outputTokens: 0 };
const minus = (a: Usage, b: Usage): Usage => ({ inputTokens: Math.max(0, a.inputTokens - b.inputTokens), outputTokens: Math.max(0, a.outputTokens - b.outputTokens) });
const most = (a: Usage, b: Usage): Usage => ({ inputTokens: Math.max(a.inputTokens, b.inputTokens), outputTokens: Math.max(a.outputTokens, b.outputTokens) });
const isNone = (usage: Usage) => usage.inputTokens === 0 && usage.outputTokens === 0;

/**
 * What a child spent by model since `before` counted it (its report is its run so far): each
 * model's new tokens, with their cost where both counts know it.
 */
function spentSince(before: readonly ModelSpend[], now: readonly ModelSpend[]): ModelSpend[] {
  return now.flatMap((row) => {
    const prior = before.find((known) => known.model === row.model);
    const usage = minus(row.usage, prior?.usage ?? NONE);
    if (isNone(usage)) return [];
    const cost = row.costUsd !== undefined && (!prior || prior.costUsd !== undefined) ? Math.max(0, row.costUsd - (prior?.costUsd ?? 0)) : undefined;
    return [{ model: row.model, usage, ...(cost !== undefined && { costUsd: cost }) }];
  });
}

/** The record of a child's models after a report: each model at the most counted of it. */
function mergedModels(before: readonly ModelSpend[], now: readonly ModelSpend[]): ModelSpend[] {
  const rows = new Map(before.map((row) => [row.model, row]));
  for (const row of now) {
    const prior = rows.get(row.model);
    const cost = prior && prior.costUsd !== undefined && row.costUsd !== undefined ? Math.max(prior.costUsd, row.costUsd) : prior ? undefined : row.costUsd;
    rows.set(row.model, { model: row.model, usage: prior ? most(prior.usage, row.usage) : row.usage, ...(cost !== undefined && { costUsd: cost }) });
  }
  return [...rows.values()];
}

/**
 * A child's usage so far against what its parent's run counted of it (`counted`, by child
 * session, for the current batch): what to add (by model when the report and the record both
 * say), and the new record; null when nothing is new. A child counted by a build that kept no
 * models adds its usage as before, unsplit (`addedByModel` null: the parent books it as its own).
 */
export function countChildUsage(
  counted: Readonly<Record<string, CountedChild>> | undefined,
  childId: string,
  usage: Usage,
  models?: readonly ModelSpend[] | undefined,
): { added: Usage; addedByModel: ModelSpend[] | null; counted: Record<string, CountedChild> } | null {
  const known = counted && Object.hasOwn(counted, childId) ? counted[childId]! : undefined;
  const split = models !== undefined && (!known || known.models !== undefined);
  const addedByModel = split ? spentSince(known?.models ?? [], models) : null;
  // Split, the totals are the models' sum, so the run's usage and its books agree.
  const added = addedByModel ? addedByModel.reduce((sum, row) => addUsage(sum, row.usage), NONE) : minus(usage, known ?? NONE);
  if (isNone(added) && known) return null;
  const total = most(known ?? NONE, usage);
  const now: CountedChild = split ? { ...total, models: mergedModels(known?.models ?? [], models) } : total;
  return { added, addedByModel, counted: { ...counted, [childId]: now } };
}

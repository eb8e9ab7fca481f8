import { createActor } from 'xstate';
import { z } from 'zod';
import type { AgentMachine } from '../../../machines/agent.machine.js';
import type { AgentOutput } from '../protocol/actor-types.js';
import { defineTool, type Tool, type ToolContext } from '../../tools/define-tool.js';
import { checkDepth, childResult, childSessionId, DEFAULT_MAX_SUBAGENT_DEPTH } from './subagents.js';
import { InvalidConfigError } from '../../errors.js';
import { checkKnownKeys, optionKeys } from '../../known-keys.js';
import { isRewirableMachine } from '../protocol/executor.js';
import { isParentStopped } from '../protocol/io-protocol.js';
import { currentScope, markAgentTool, markDepth, stopActor, type ChildHandle, type ChildSession, type RunScope } from '../protocol/call-scope.js';
import type { SubagentReport } from '../protocol/actor-types.js';
import type { Usage } from '../../schemas.js';
import type { AgentContext } from '../core/context.js';
import { pricingOf, type ModelSpend } from '../core/pricing.js';
import { APPROVALS_OPERATION } from '../approvals/approval-events.js';

/** The default input of an agent tool (and of an agent served over MCP): the task, in words. */
export const TaskInput = z.object({ task: z.string().min(1).describe('What the agent should do, with everything it needs to know') });

/**
 * How long one call of an agent tool may run by default (10 minutes, waits for a human inside
 * the child included): a child that hangs gives its parent an error result, not a hung run.
 *
 * @example
 * ```ts
 * import { agentTool } from 'loopchart';
 * import { DEFAULT_AGENT_TOOL_TIMEOUT_MS } from 'loopchart/schemas';
 *
 * agentTool({ agent: machine, name: 'reviewer', description: 'Reviews a change.', timeoutMs: 3 * DEFAULT_AGENT_TOOL_TIMEOUT_MS });
 * ```
 */
export const DEFAULT_AGENT_TOOL_TIMEOUT_MS = 10 * 60_000;

/**
 * What `agentTool` needs: the child agent, the tool's name and description, and optionally the
 * arguments' schema, how they become the child's prompt, the result's schema and a timeout.
 *
 * @example
 * ```ts
 * import { z } from 'zod';
 * import type { AgentToolOptions } from 'loopchart';
 *
 * const options: AgentToolOptions<z.ZodObject<{ city: z.ZodString }>> = {
 *   agent: machine,
 *   name: 'weather',
 *   description: 'Finds the weather of a city.',
 *   input: z.object({ city: z.string() }),
 *   prompt: ({ city }) => `What is the weather in ${city}? Answer as JSON {"celsius": number}.`,
 *   output: z.object({ celsius: z.number() }),
 * };
 * ```
 */
export interface AgentToolOptions<S extends z.ZodType = typeof TaskInput> {
  /** The child: its own instructions, tools, model, compaction and limits. */
  agent: AgentMachine;
  name: string;
  description: string;
  /** The arguments the parent's model gives; default `{ task: string }`. */
  input?: S | undefined;
  /** The child's first message from the arguments; default the `task`, or the arguments as JSON. */
  prompt?: ((args: z.output<S>) => string) | undefined;
  /**
   * The result's schema: the child's structured output (or its final text parsed as JSON) must
   * match, else the parent gets an error result. Without it the result is the structured output
   * when the child has one, else its final text.
   */
  output?: z.ZodType | undefined;
  /** Default `DEFAULT_AGENT_TOOL_TIMEOUT_MS`; `Infinity` turns it off. */
  timeoutMs?: number | undefined;
  /**
   * The deepest level of the tree of agents its child may run at (a top-level agent's child is 1);
   * default `DEFAULT_MAX_SUBAGENT_DEPTH` (5). A call past it is an error result naming the depth
   * (`SubagentDepthError`), checked before any child session is created.
   */
  maxDepth?: number | undefined;
}

const AGENT_TOOL_KEYS = optionKeys<AgentToolOptions>()({ agent: true, name: true, description: true, input: true, prompt: true, output: true, timeoutMs: true, maxDepth: true });

/**
 * An agent as a tool: a call starts a child run of `agent` (its own conversation, instructions,
 * tools, model, compaction and limits) with the call's arguments as its prompt, and the child's
 * final text, or structured output, is the result. The child is an actor of the parent's actor
 * system (the parent's inspector sees it); under a `DurableSession` it is a session of its own on
 * the same store, `<parent>/<call key>`, resumed where it was after a crash and never run twice.
 * A child that fails, times out or answers a malformed result gives the parent an error result.
 * Approvals the child waits for surface at the parent (`approval.requested`, ids
 * `<call id>/<child call id>`) and are decided there, as are its calls in doubt after a crash
 * (`tool.inDoubt`, decided with `doubt.decide` on the qualified id); `cancel` reaches it; its
 * usage joins the parent's run, once.
 *
 * @example
 * ```ts
 * import { agentTool, createAgentMachine } from 'loopchart';
 * import { scriptedModel } from 'loopchart/testing';
 *
 * const researcher = createAgentMachine({ model: scriptedModel([{ text: 'Tea was first drunk in China.' }]), instructions: 'Research briefly.' });
 * const coordinator = createAgentMachine({
 *   model: scriptedModel([{ toolCalls: [{ name: 'research', args: { task: 'Where was tea first drunk?' } }] }, { text: 'In China.' }]),
 *   tools: [agentTool({ agent: researcher, name: 'research', description: 'Researches one question.' })],
 * });
 * ```
 */
export function agentTool<S extends z.ZodType = typeof TaskInput>(options: AgentToolOptions<S>): Tool {
  checkKnownKeys(options, AGENT_TOOL_KEYS, `agentTool '${String((options as { name?: unknown } | undefined)?.name)}'`);
  const input = (options.input ?? TaskInput) as z.ZodType;
  const prompt = (options.prompt ?? defaultPrompt) as (args: unknown) => string;
  const maxDepth = options.maxDepth ?? DEFAULT_MAX_SUBAGENT_DEPTH;
  // Checked here: an agent or prompt of the wrong type was accepted, to fail only when the tool was called.
  // An agent still undefined is allowed: one that calls itself is set on the options after it is made.
  const agent: unknown = options.agent;
  if (agent !== undefined && !isRewirableMachine(agent)) throw new InvalidConfigError(`agentTool '${String(options.name)}': agent must be an agent (createAgentMachine)`);
  if (typeof prompt !== 'function') throw new InvalidConfigError(`agentTool '${String(options.name)}': prompt must be a function (args) => string`);
  if (!Number.isInteger(maxDepth) || maxDepth < 1) throw new InvalidConfigError(`agentTool '${String(options.name)}': maxDepth must be a whole number >= 1, got ${String(maxDepth)}`);
  return markAgentTool(defineTool({
    name: options.name,
    description: options.description,
    input,
    timeoutMs: options.timeoutMs ?? DEFAULT_AGENT_TOOL_TIMEOUT_MS,
    execute: async (args: unknown, ctx: ToolContext) => {
      const scope = currentScope();
      // Before anything of the child exists: its depth in the tree, then its session id.
      const depth = (scope?.depth ?? 0) + 1;
      checkDepth(options.name, depth, maxDepth);
      const sessionId = childSessionId(scope?.sessionId ?? 'session', ctx.idempotencyKey);
      const output = await runChild(options.agent, { sessionId, scope: ctx.scope }, prompt(args), scope, ctx.signal, depth);
      scope?.report({ type: 'usage', childId: sessionId, usage: output?.usage ?? { inputTokens: 0, outputTokens: 0 }, ...(output?.models && { models: output.models }) });
      return childResult(options.name, output?.outcome as AgentOutput['outcome'] | undefined, options.output);
    },
  }));
}

/** The default first message of an agent run from its tool's arguments: the task, or the arguments as JSON. */
export function defaultPrompt(args: unknown): string {
  const task = (args as { task?: unknown }).task;
  return typeof task === 'string' ? task : JSON.stringify(args);
}

/** A child run's end: its outcome, its usage, and the same by model at its own prices (see `Pricing.spent`). */
type Output = { outcome: unknown; usage: AgentOutput['usage']; models?: ModelSpend[] | undefined } | null;

/** What the relay reads of a child actor's snapshots: its run so far. */
type Subscribable = { subscribe?(observer: { next: (snapshot: { context?: AgentContext | undefined }) => void; error: () => void }): unknown };

/** What a child run has spent by model, priced by its own agent (its machine's pricing), when known. */
const spentBy = (agent: AgentMachine, context: AgentContext): { models: ModelSpend[] } | Record<string, never> => {
  const pricing = pricingOf(agent);
  return pricing ? { models: pricing.spent(context) } : {};
};

/** The child's output with what it spent by model, read from its context at its end. */
const withSpent = (agent: AgentMachine, output: Output, context: AgentContext): Output => (output ? { ...output, ...spentBy(agent, context) } : output);

/** One child run to its end: in its own durable session under a durable parent, else as a plain actor. */
function runChild(agent: AgentMachine, session: { sessionId: string; scope: string | undefined }, prompt: string, scope: RunScope | undefined, signal: AbortSignal, depth: number): Promise<Output> {
  const { sessionId } = session;
  const relay = (actor: { on(type: string, handler: (event: never) => void): unknown }) => {
    // Every child actor is relayed before it starts: its own agent tools read their depth from it.
    markDepth(actor, depth);
    // The child's usage reaches the parent as it is spent, not only at the child's end: a parent
    // whose run ends first (cancel, seal, its time budget) has counted what the child bought.
    let reported: Usage | undefined;
    (actor as unknown as Subscribable).subscribe?.({
      next: (snapshot) => {
        const context = snapshot.context;
        const usage = context?.runUsage;
        if (!usage || (reported && usage.inputTokens === reported.inputTokens && usage.outputTokens === reported.outputTokens)) return;
        reported = usage;
        scope?.report({ type: 'usage', childId: sessionId, usage, ...spentBy(agent, context!) });
      },
      // The child's failure is heard where its run is awaited.
      error: () => {},
    });
    actor.on('approval.requested', (event: { calls: []; requests: [] }) => scope?.report({ type: 'approval.requested', calls: event.calls, requests: event.requests }));
    // A decision routed down and refused there: the parent's decide hears why.
    actor.on('approval.refused', (refused: Extract<SubagentReport, { type: 'approval.refused' }>['refused']) => scope?.report({ type: 'approval.refused', refused }));
    // A child resumed after a crash with calls in doubt waits for a person: the parent shows who must decide.
    actor.on('tool.inDoubt', (event: { calls: []; requests: [] }) => scope?.report({ type: 'tool.inDoubt', calls: event.calls, requests: event.requests }));
    actor.on('doubt.refused', (refused: Extract<SubagentReport, { type: 'doubt.refused' }>['refused']) => scope?.report({ type: 'doubt.refused', refused }));
    // Its other waits for a person (a budget paused, an operation yielded) show at the parent too, whose raise or resume with the call's path reaches it.
    const waiting = (event: Extract<SubagentReport, { type: 'waiting' }>['event']) => scope?.report({ type: 'waiting', event });
    actor.on('budget.paused', waiting);
    actor.on('operation.yielded', (event: Extract<SubagentReport, { type: 'waiting' }>['event'] & { operation: string }) => event.operation !== APPROVALS_OPERATION && waiting(event));
  };
  if (scope?.open) {
    const open = scope.open;
    return drive(scope, signal, async () => {
      const child = await open({ machine: agent, sessionId, attach: relay, parent: scope.parent, scope: session.scope });
      // A child that has run is resumed (in flight) or finished: a finished child is never run again.
      if (child.actor.getSnapshot().context.runIndex === 0) child.send({ type: 'input', message: prompt });
      return { child, done: child.whenIdle().then((output) => withSpent(agent, output, child.actor.getSnapshot().context)), release: () => child.close() };
    });
  }
  // Under Restate the child's steps are journaled in the parent's invocation (see restate/steps.ts).
  const machine = scope?.journal ? scope.journal(agent) : agent;
  return drive(scope, signal, async () => {
    const actor = createActor(machine, { input: { sessionId, prompt, scope: session.scope }, ...(scope && { parent: scope.parent }) });
    relay(actor as never);
    const done = new Promise<Output>((resolve, reject) =>
      actor.subscribe({ complete: () => resolve(withSpent(agent, actor.getSnapshot().output ?? null, actor.getSnapshot().context)), error: reject }),
    );
    actor.start();
    return { child: { send: (event: { type: string }) => actor.send(event as never) }, done, release: async () => stopActor(actor) };
  });
}

type Started = { child: ChildHandle | ChildSession; done: Promise<Output>; release: () => Promise<void> };

/**
 * Runs the child with its parent's control attached from the start (a decision routed to the call
 * while the child opens waits for it): what the parent routes to this call goes to the child; an
 * abort cancels it (a stopped parent leaves it where it is, to be resumed).
 */
async function drive(scope: RunScope | undefined, signal: AbortSignal, start: () => Promise<Started>): Promise<Output> {
  let started: Started | undefined;
  const early: { type: string }[] = [];
  const send = (event: { type: string }) => (started ? started.child.send(event as never) : early.push(event));
  const unadopt = scope?.adopt({ send }) ?? (() => {});
  const onAbort = () => {
    if (!started) return;
    if (isParentStopped(signal.reason)) void started.release().catch(() => {});
    else started.child.send({ type: 'cancel' } as never);
  };
  signal.addEventListener('abort', onAbort, { once: true });
  try {
    started = await start();
    for (const event of early.splice(0)) started.child.send(event as never);
    if (signal.aborted) onAbort();
    return await started.done;
  } finally {
    signal.removeEventListener('abort', onAbort);
    unadopt();
    if (started && !isParentStopped(signal.reason)) await started.release();
  }
}

/**
 * The one binder between the driver's pure rules and XState. The chart and its implementations
 * are built once per process; each agent is a machine over them, and its transitions run with
 * that agent as the current one (`inAgent`). A guard, a delay or an action reads it from its
 * arguments: an action declares its kind once (`assign`, `emit`, `send` or `effects`, an ordered
 * list of those) as a function of (agent, context, event), and the helpers here turn it into the
 * XState action the chart names. Each feature's `implementations.ts` builds its record with them.
 */
import { assign as assignAction, emit as emitAction, enqueueActions as enqueueAction, sendTo as sendAction, setup, type AnyActorRef } from 'xstate';
import type { AgentEmitted, AgentInput, AgentOutput } from '../protocol/actor-types.js';
import type { AgentEvent } from '../protocol/agent-event.js';
import { fromIo, type IoRequest } from '../protocol/io-protocol.js';
import type { CompiledAgent } from './compile.js';
import type { AgentContext } from './context.js';
import type { Effect } from './effects.js';

/** What XState gives a guard, a delay or an action. */
export type Args = { context: AgentContext; event: AgentEvent };

/** What a guard, a delay or an action of the driver reads: XState's arguments and the agent whose transition runs. */
export type AgentArgs = Args & { agent: CompiledAgent };

/** A rule of the driver: a pure function of the compiled agent, the run's context and the event being handled. */
export type Rule<T> = (agent: CompiledAgent, context: AgentContext, event: AgentEvent) => T;

/**
 * What a feature does to the context at one of a run's fixed moments, in its slice's record:
 * `runStart` (what a run's start resets of its own state) and `restore` (its part of a stored
 * context checked against this agent: a problem throws `InvalidSnapshotError`). The chart gives
 * each list to the core, so the core loop names no feature.
 */
export type ContextHook = (agent: CompiledAgent, context: AgentContext) => Partial<AgentContext>;

/** Why a feature refuses an event that no transition took (an approval or a resume it cannot be), or null to leave it to the next. */
export type RefusalHook = (agent: CompiledAgent, context: AgentContext, event: AgentEvent) => string | null;

/** The types the chart, its guards and its actions share. */
export const types = {
  context: {} as AgentContext,
  events: {} as AgentEvent,
  input: {} as AgentInput | void,
  output: {} as AgentOutput,
  emitted: {} as AgentEmitted,
};

const creators = setup({ types });
/** XState's action creators typed for the chart, for actions that read no agent. */
export const { assign, emit, sendTo } = creators;

let current: CompiledAgent | undefined;

/**
 * `step` (a machine's transition, its initial state, ...) run with `agent` as the current agent:
 * what its guards, delays and actions read. XState computes a transition synchronously, so the
 * current agent is the one whose machine was asked, and a nested one (a child agent that handles
 * an event at once) gives it back when it returns.
 */
export function inAgent<A extends unknown[], T>(agent: CompiledAgent, step: (...args: A) => T): (...args: A) => T {
  return (...args: A): T => {
    const outer = current;
    current = agent;
    try {
      return step(...args);
    } finally {
      current = outer;
    }
  };
}

/** The agent whose transition runs (see `inAgent`). */
export function currentAgent(): CompiledAgent {
  if (!current) throw new Error('loopchart: a driver guard or action ran outside its agent machine (see inAgent)');
  return current;
}

const withAgent = ({ context, event }: Args): AgentArgs => ({ agent: currentAgent(), context, event });

/** A guard that reads the agent. */
export const when =
  <P = undefined>(test: (args: AgentArgs, params: P) => boolean) =>
  (args: Args, params: P) =>
    test(withAgent(args), params);

/** Which agents a guard made by `configured` can hold for, or an action of `configuredAction` does anything for, by the guard or action. */
const liveness = new WeakMap<object, (agent: CompiledAgent) => boolean>();

/**
 * A guard of a feature that can hold only for an agent configured with it (`isConfigured`):
 * false for any other agent, whatever the context. The chart an agent runs leaves out the
 * branches of guards that cannot hold for it (see `chart-variant.ts`), so a feature that is not
 * configured is not on the agent's path; the test runs here too, so both charts agree.
 */
export function configured<P = undefined>(isConfigured: (agent: CompiledAgent) => boolean, test: (args: AgentArgs, params: P) => boolean) {
  const guard = (args: Args, params: P): boolean => {
    const read = withAgent(args);
    return isConfigured(read.agent) && test(read, params);
  };
  liveness.set(guard, isConfigured);
  return guard;
}

/**
 * An action of a feature that does nothing for an agent not configured with it (`isConfigured`):
 * the chart such an agent runs leaves it out of its lists, as `configured` leaves out a branch.
 * The action must check the same thing itself (the whole chart still runs it): emitting nothing
 * when there is no output schema, tracing nothing without a tracer.
 */
export function configuredAction<A extends object>(isConfigured: (agent: CompiledAgent) => boolean, action: A): A {
  liveness.set(action, isConfigured);
  return action;
}

/** The test of which agents `implementation` (a guard or an action) is live for, if `configured` or `configuredAction` made it; undefined for one live for any agent. */
export const configuredBy = (implementation: unknown): ((agent: CompiledAgent) => boolean) | undefined => liveness.get(implementation as object);

/** A delay (ms) that reads the agent. */
export const delayOf = (ms: (args: AgentArgs) => number) => (args: Args) => ms(withAgent(args));

/** Performs an action's effects in their order (see `Effect`). */
function perform(
  enqueue: { assign(patch: Partial<AgentContext>): void; emit(event: AgentEmitted): void; sendTo(target: 'io', event: IoRequest): void },
  effects: readonly Effect[],
): void {
  for (const effect of effects) {
    if ('assign' in effect) enqueue.assign(effect.assign);
    else if ('emit' in effect) enqueue.emit(effect.emit);
    else enqueue.sendTo('io', effect.send);
  }
}

/** An action whose result is the context change. */
export const assigns = <P = undefined>(fn: (args: AgentArgs, params: P) => Partial<AgentContext>) =>
  assignAction<AgentContext, AgentEvent, P, AgentEvent, never>((args, params) => fn(withAgent(args), params));
/** An action whose result is the event listeners get. */
export const emits = <P = undefined>(fn: (args: AgentArgs, params: P) => AgentEmitted) =>
  emitAction<AgentContext, AgentEvent, P, AgentEvent, AgentEmitted>((args: Args, params: P) => fn(withAgent(args), params));
/** An action whose result is the request for the run's IO actor. */
export const sends = <P = undefined>(fn: (args: AgentArgs, params: P) => IoRequest) =>
  sendAction<AgentContext, AgentEvent, P, AnyActorRef, AgentEvent, never, never>('io', (args: Args, params: P) => fn(withAgent(args), params));
/** An action whose result is an ordered list of those (see `Effect`). */
export const effects = <P = undefined>(fn: (args: AgentArgs, params: P) => readonly Effect[]) =>
  enqueueAction<AgentContext, AgentEvent, P, AgentEvent, never, never, never, never, AgentEmitted>(({ context, event, enqueue }, params) =>
    perform(enqueue, fn(withAgent({ context, event }), params)),
  );

/**
 * The same four kinds for a named rule of (agent, context, event): `settleGuard: rule.effects(settleGuard)`.
 */
export const rule = {
  assign: (fn: Rule<Partial<AgentContext>>) => assigns(({ agent, context, event }) => fn(agent, context, event)),
  emit: (fn: Rule<AgentEmitted>) => emits(({ agent, context, event }) => fn(agent, context, event)),
  send: (fn: Rule<IoRequest>) => sends(({ agent, context, event }) => fn(agent, context, event)),
  effects: (fn: Rule<readonly Effect[]>) => effects(({ agent, context, event }) => fn(agent, context, event)),
};

/** A guard: the event is the IO's report of the side effect whose key the context holds now (a late report of an older one is not). */
export const fromCurrent = (key: (context: AgentContext) => string) => ({ context, event }: Args) =>
  fromIo(event) && (event as { key: string }).key === key(context);

/**
 * The one binder between the driver's pure rules and XState: an action declares its kind once
 * (`assign`, `emit`, `send` or `effects`, an ordered list of those) as a function of
 * (agent, context, event), and `bind(agent)` turns it into the XState action the chart names.
 * Each feature's `implementations.ts` builds its record of guards and actions with it.
 */
import { assign as assignAction, enqueueActions as enqueueAction, sendTo as sendAction, setup, type AnyActorRef } from 'xstate';
import type { AgentEmitted, AgentInput, AgentOutput } from '../protocol/actor-types.js';
import type { AgentEvent } from '../protocol/agent-event.js';
import { fromIo, type IoRequest } from '../protocol/io-protocol.js';
import type { CompiledAgent } from './compile.js';
import type { AgentContext } from './context.js';
import type { Effect } from './effects.js';

/** What a guard or an action reads. */
export type Args = { context: AgentContext; event: AgentEvent };

/** A rule of the driver: a pure function of the compiled agent, the run's context and the event being handled. */
export type Rule<T> = (agent: CompiledAgent, context: AgentContext, event: AgentEvent) => T;

/** The types the chart, its guards and its actions share. */
export const types = {
  context: {} as AgentContext,
  events: {} as AgentEvent,
  input: {} as AgentInput | void,
  output: {} as AgentOutput,
  emitted: {} as AgentEmitted,
};

const creators = setup({ types });
/** XState's action creators typed for the chart, for the few actions written in place. */
export const { assign, emit, sendTo } = creators;
const { enqueueActions } = creators;

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

/** Action creators for the actions the chart gives params (`{ type: 'openPoint', params: 'beforeTools' }`). */
export const assignWith = <P>(fn: (args: Args, params: P) => Partial<AgentContext>) =>
  assignAction<AgentContext, AgentEvent, P, AgentEvent, never>((args, params) => fn(args, params));
export const sendWith = <P>(fn: (args: Args, params: P) => IoRequest) =>
  sendAction<AgentContext, AgentEvent, P, AnyActorRef, AgentEvent, never, never>('io', (args: Args, params: P) => fn(args, params));
export const effectsWith = <P>(fn: (args: Args, params: P) => readonly Effect[]) =>
  enqueueAction<AgentContext, AgentEvent, P, AgentEvent, never, never, never, never, AgentEmitted>(({ context, event, enqueue }, params) =>
    perform(enqueue, fn({ context, event }, params)),
  );

/**
 * The binder for one compiled agent: each rule, declared by its kind, as the XState action that
 * applies it: `const rule = bind(agent)`, then `settleGuard: rule.effects(settleGuard)`.
 */
export function bind(agent: CompiledAgent) {
  return {
    /** The rule's result is the context change. */
    assign: (rule: Rule<Partial<AgentContext>>) => assign(({ context, event }) => rule(agent, context, event)),
    /** The rule's result is the event listeners get. */
    emit: (rule: Rule<AgentEmitted>) => emit(({ context, event }) => rule(agent, context, event)),
    /** The rule's result is the request for the run's IO actor. */
    send: (rule: Rule<IoRequest>) => sendTo('io', ({ context, event }) => rule(agent, context, event)),
    /** The rule's result is an ordered list of those (see `Effect`). */
    effects: (rule: Rule<readonly Effect[]>) =>
      enqueueActions(({ context, event, enqueue }) => perform(enqueue, rule(agent, context, event))),
  };
}

/** A guard: the event is the IO's report of the side effect whose key the context holds now (a late report of an older one is not). */
export const fromCurrent = (key: (context: AgentContext) => string) => ({ context, event }: Args) =>
  fromIo(event) && (event as { key: string }).key === key(context);

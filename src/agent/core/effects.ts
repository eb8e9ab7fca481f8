/**
 * What an action of the driver does, as data: change the context, emit an event, send the IO a
 * request, in order. Actions are pure functions that return these; one binder (bind.ts) performs
 * them, so no feature writes XState's action plumbing itself.
 */
import { deliveryIds } from '../protocol/delivery.js';
import type { AgentEmitted } from '../protocol/actor-types.js';
import type { IoRequest } from '../protocol/io-protocol.js';
import type { ToolCall, ToolMessage } from '../../schemas.js';
import type { AgentContext } from './context.js';

/** One thing an action does, in order: change the context, emit an event, or send the IO a request. */
export type Effect = { assign: Partial<AgentContext> } | { emit: AgentEmitted } | { send: IoRequest };

/** A tool's start or end as listeners get it, with its delivery id. */
export const toolStarted = (context: AgentContext, call: ToolCall) =>
  ({ type: 'tool.started', id: deliveryIds.toolStarted(context.runIndex, context.brain.context.turnsTaken, call.id), call }) as const;
export const toolFinished = (context: AgentContext, call: ToolCall, result: ToolMessage) =>
  ({ type: 'tool.finished', id: deliveryIds.toolFinished(context.runIndex, context.brain.context.turnsTaken, call.id), call, result }) as const;

/**
 * Calls that have their answer without running through the IO (past the per-reply limit, an
 * unknown tool, noted as a repetition, answered by an operation, denied by a person or a policy):
 * each starts and, with its result, finishes for listeners, in the order given. A call without a
 * result only starts (the IO reports its end).
 */
export const answeredCalls = (context: AgentContext, calls: Iterable<{ call: ToolCall; result?: ToolMessage | undefined }>): Effect[] =>
  [...calls].flatMap(({ call, result }) =>
    result ? [{ emit: toolStarted(context, call) }, { emit: toolFinished(context, call, result) }] : [{ emit: toolStarted(context, call) }],
  );

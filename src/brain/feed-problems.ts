import { conversationFault, incoherence, unansweredCall } from './conversation.js';
import { logOf } from './message-log.js';
import { jsonValueFault } from '../json-value.js';
import type { LoopEvent } from './loop-events.js';
import type { LoopContext, Message } from '../schemas.js';

/**
 * What is wrong with a feed whose state accepts it: `illegal` when the machine is not in a
 * condition to take it (a turn in flight), `invalid` when the payload breaks the contract.
 * The brain's guards and the facade's errors both come from here, so they cannot disagree.
 */
export type FeedProblem = { kind: 'illegal' | 'invalid'; problem: string };

// Made once: under `keepNames` (tsup, tsx) a named closure made in a hot function costs a call each time.
const invalid = (problem: string): FeedProblem => ({ kind: 'invalid', problem });

// Safe integers only: a count past 2^53 is not exact, and the snapshot schema refuses it.
const isCount = (n: number) => Number.isSafeInteger(n) && n >= 0;

/**
 * Why the machine, in a state that handles this feed, cannot take it now whatever its payload:
 * checked before the payload, so a refused feed is an IllegalFeedError even when its argument
 * is malformed too.
 */
export function feedIllegality(context: LoopContext, type: LoopEvent['type']): string | null {
  switch (type) {
    case 'rewindTo':
      return logOf(context).pendingLength > 0 ? 'a turn is in flight (pending is not empty)' : null;
    case 'inject': {
      // Only AwaitingTools has pending calls among the states that take inject.
      const { pendingTools } = context;
      if (pendingTools.length === 0) return null;
      const position = logOf(context).length - 1;
      const more = pendingTools.length > 1 ? ` (and ${pendingTools.length - 1} more)` : '';
      return (
        `tool call '${pendingTools[0]!.call.id}'${more} of the reply at position ${position} awaits its result; ` +
        'an injected message would come between them (steer queues a user message until they are answered)'
      );
    }
    default:
      return null;
  }
}

export function feedProblem(context: LoopContext, event: LoopEvent): FeedProblem | null {
  const illegal = feedIllegality(context, event.type);
  if (illegal) return { kind: 'illegal', problem: illegal };
  switch (event.type) {
    case 'acceptInput':
    case 'steer':
      return event.message.role === 'user' ? null : invalid(`expected a user message, got role '${event.message.role}'`);
    case 'modelResponse': {
      if (event.response.role !== 'assistant') return invalid(`expected an assistant message, got role '${event.response.role}'`);
      if (!isCount(event.contextTokens)) return invalid(`contextTokens must be a non-negative integer, got ${event.contextTokens}`);
      if (!Array.isArray(event.availableTools) || event.availableTools.some((name) => typeof name !== 'string')) {
        return invalid('availableTools must be a list of tool names');
      }
      const ids = new Set<string>();
      const calls = event.response.toolCalls ?? [];
      for (let k = 0; k < calls.length; k++) {
        const call = calls[k]!;
        if (ids.has(call.id)) return invalid(`tool call id '${call.id}' appears twice in one reply (call ${k})`);
        ids.add(call.id);
        const args = jsonValueFault(call.args, `response.toolCalls[${k}].args`);
        if (args) return invalid(`${args.path}: ${args.problem}`);
      }
      return null;
    }
    case 'inject':
      return injectProblem(context, event.message);
    case 'toolResults':
      return toolResultsProblem(context, event.messages);
    case 'compactionResult': {
      const counts = compactionCountsProblem(event.before, event.after);
      if (counts) return invalid(counts);
      const broken = incoherence(event.compacted);
      return broken ? invalid(`compacted conversation is not coherent: ${broken}`) : null;
    }
    case 'compactionNoop': {
      const counts = compactionCountsProblem(event.before, event.after);
      return counts ? invalid(counts) : null;
    }
    case 'setContextTokens':
      return isCount(event.tokens) ? null : invalid(`tokens must be a non-negative integer, got ${event.tokens}`);
    case 'seal':
      return typeof event.reason === 'string' ? null : invalid('reason must be a string');
    case 'fail':
      return event.error.type ? null : invalid('error.type must be a non-empty string');
    case 'commitPending': {
      // History keeps the invariant by construction, so pending alone decides.
      const broken = unansweredCall(logOf(context).pendingView());
      return broken ? invalid(`pending is not coherent (${broken}); use salvagePending`) : null;
    }
    case 'rewindTo':
      return isCount(event.len) ? null : invalid(`len must be a non-negative integer, got ${event.len}`);
    case 'adoptPruned':
      return prunedProblem(context, event.messages);
    default:
      return null;
  }
}

function compactionCountsProblem(before: number, after: number): string | null {
  if (!isCount(before) || !isCount(after)) {
    return `before and after must be non-negative integers, got ${before} and ${after}`;
  }
  return null;
}

function toolResultsProblem(context: LoopContext, messages: readonly Message[]): FeedProblem | null {
  // Call id -> its index in the reply: ids are the model's strings, so a Map, never an object.
  const expected = new Map(context.pendingTools.map((pending, k) => [pending.call.id, k]));
  const answered = new Set<string>();
  for (let i = 0; i < messages.length; i++) {
    const message = messages[i]!;
    if (message.role !== 'tool') return invalid(`results[${i}]: expected a tool message, got role '${message.role}'`);
    const id = message.toolCallId;
    if (!expected.has(id)) return invalid(`results[${i}] answers '${id}', which is not a pending tool call`);
    if (answered.has(id)) return invalid(`results[${i}] answers tool call '${id}' (call ${expected.get(id)}) a second time`);
    answered.add(id);
  }
  if (answered.size === expected.size) return null;
  const position = logOf(context).length - 1;
  const missing = [...expected].filter(([id]) => !answered.has(id));
  const named = missing.slice(0, 3).map(([id, k]) => `'${id}' (call ${k})`).join(', ');
  const more = missing.length > 3 ? ` and ${missing.length - 3} more` : '';
  return invalid(`no result for pending tool call ${named}${more} of the reply at position ${position}`);
}

/** A pruned conversation may change contents only: same length, roles and tool-call ids. */
function prunedProblem(context: LoopContext, messages: readonly Message[]): FeedProblem | null {
  const log = logOf(context);
  const expectedLength = log.length;
  if (messages.length !== expectedLength) {
    return invalid(`expected ${expectedLength} messages (pruning keeps the count), got ${messages.length}`);
  }
  for (let i = 0; i < messages.length; i++) {
    const was = log.at(i)!;
    const now = messages[i]!;
    if (shapeKey(was) !== shapeKey(now)) {
      return invalid(`message ${i} changed role or tool-call ids (pruning may change contents only)`);
    }
  }
  // Same shape, so the order still holds; only the arguments can have become unserializable.
  const fault = conversationFault(messages, { openTail: true });
  return fault ? invalid(`message ${fault.index}${fault.field ? `.${fault.field}` : ''}: ${fault.problem}`) : null;
}

function shapeKey(message: Message): string {
  if (message.role === 'assistant') return `assistant:${(message.toolCalls ?? []).map((c) => c.id).join(',')}`;
  if (message.role === 'tool') return `tool:${message.toolCallId}`;
  return message.role;
}

/**
 * `inject` appends to pending as is, so it may not break the order a provider needs: nothing
 * goes between a turn's tool calls and their results (`feedIllegality`), no result answers a
 * call that is not open, and no call is opened that nothing would dispatch. Outside
 * AwaitingTools the conversation has no open call, so an injected tool result answers nothing.
 */
function injectProblem(context: LoopContext, message: Message): FeedProblem | null {
  const position = logOf(context).length;
  if (message.role === 'tool') {
    return {
      kind: 'invalid',
      problem: `tool result for '${message.toolCallId}' (position ${position}) answers no open tool call; results come through toolResults`,
    };
  }
  const opened = message.role === 'assistant' ? message.toolCalls?.[0] : undefined;
  if (opened) {
    return {
      kind: 'invalid',
      problem: `an injected assistant message may not open tool calls ('${opened.id}' at position ${position}): nothing would dispatch them`,
    };
  }
  return null;
}

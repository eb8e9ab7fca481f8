import { conversationFault, incoherence, unansweredCall } from './conversation.js';
import { jsonValueFault } from './json-value.js';
import type { LoopEvent } from './loop-events.js';
import type { LoopContext, Message } from './schemas.js';

/**
 * What is wrong with a feed whose state accepts it: `illegal` when the machine is not in a
 * condition to take it (a turn in flight), `invalid` when the payload breaks the contract.
 * The brain's guards and the facade's errors both come from here, so they cannot disagree.
 */
export type FeedProblem = { kind: 'illegal' | 'invalid'; problem: string };

// Safe integers only: a count past 2^53 is not exact, and the snapshot schema refuses it.
const isCount = (n: number) => Number.isSafeInteger(n) && n >= 0;

export function feedProblem(context: LoopContext, event: LoopEvent): FeedProblem | null {
  const invalid = (problem: string): FeedProblem => ({ kind: 'invalid', problem });
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
      const broken = unansweredCall(context.pending);
      return broken ? invalid(`pending is not coherent (${broken}); use salvagePending`) : null;
    }
    case 'rewindTo':
      if (!isCount(event.len)) return invalid(`len must be a non-negative integer, got ${event.len}`);
      return context.pending.length > 0
        ? { kind: 'illegal', problem: 'a turn is in flight (pending is not empty)' }
        : null;
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
  const invalid = (problem: string): FeedProblem => ({ kind: 'invalid', problem });
  const expected = new Set(context.pendingTools.map((pending) => pending.call.id));
  const answered = new Set<string>();
  for (const message of messages) {
    if (message.role !== 'tool') return invalid(`expected tool messages, got role '${message.role}'`);
    const id = message.toolCallId;
    if (!expected.has(id)) return invalid(`result for '${id}', which is not a pending tool call`);
    if (answered.has(id)) return invalid(`two results for tool call '${id}'`);
    answered.add(id);
  }
  const missing = [...expected].filter((id) => !answered.has(id));
  return missing.length ? invalid(`no result for pending tool call(s) ${missing.map((id) => `'${id}'`).join(', ')}`) : null;
}

/** A pruned conversation may change contents only: same length, roles and tool-call ids. */
function prunedProblem(context: LoopContext, messages: readonly Message[]): FeedProblem | null {
  const invalid = (problem: string): FeedProblem => ({ kind: 'invalid', problem });
  const { history, pending } = context;
  const expectedLength = history.length + pending.length;
  if (messages.length !== expectedLength) {
    return invalid(`expected ${expectedLength} messages (pruning keeps the count), got ${messages.length}`);
  }
  for (let i = 0; i < messages.length; i++) {
    const was = i < history.length ? history[i]! : pending[i - history.length]!;
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
 * goes between a turn's tool calls and their results, no result answers a call that is not
 * open, and no call is opened that nothing would dispatch. Outside AwaitingTools the
 * conversation has no open call, so an injected tool result always answers nothing.
 */
function injectProblem(context: LoopContext, message: Message): FeedProblem | null {
  const { pendingTools } = context;
  if (pendingTools.length > 0) {
    const position = context.history.length + context.pending.length - 1;
    const more = pendingTools.length > 1 ? ` (and ${pendingTools.length - 1} more)` : '';
    return {
      kind: 'illegal',
      problem:
        `tool call '${pendingTools[0]!.call.id}'${more} of the reply at position ${position} awaits its result; ` +
        'an injected message would come between them (steer queues a user message until they are answered)',
    };
  }
  const position = context.history.length + context.pending.length;
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

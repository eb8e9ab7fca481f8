import { incoherence, unansweredCall } from './conversation.js';
import type { LoopEvent } from './loop-events.js';
import type { LoopContext, Message } from './schemas.js';

/**
 * What is wrong with a feed whose state accepts it: `illegal` when the machine is not in a
 * condition to take it (a turn in flight), `invalid` when the payload breaks the contract.
 * The brain's guards and the facade's errors both come from here, so they cannot disagree.
 */
export type FeedProblem = { kind: 'illegal' | 'invalid'; problem: string };

const isCount = (n: number) => Number.isInteger(n) && n >= 0;

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
      for (const call of event.response.toolCalls ?? []) {
        if (ids.has(call.id)) return invalid(`tool call id '${call.id}' appears twice in one reply`);
        ids.add(call.id);
      }
      return null;
    }
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
  return null;
}

function shapeKey(message: Message): string {
  if (message.role === 'assistant') return `assistant:${(message.toolCalls ?? []).map((c) => c.id).join(',')}`;
  if (message.role === 'tool') return `tool:${message.toolCallId}`;
  return message.role;
}

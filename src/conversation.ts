import type { AssistantMessage, Message, ToolCall, ToolMessage } from './schemas.js';

/**
 * The longest prefix of `messages`, at most `limit` long, in which every assistant tool call
 * is answered. Cutting there never separates a tool call from its result, which is the one
 * thing every provider rejects.
 */
export function coherentCut(messages: readonly Message[], limit: number): number {
  const end = Math.min(Math.max(0, Math.floor(limit)), messages.length);
  const unanswered = new Set<string>();
  let cut = 0;
  for (let i = 0; i < end; i++) {
    const message = messages[i]!;
    if (message.role === 'assistant') {
      for (const call of message.toolCalls ?? []) unanswered.add(call.id);
    } else if (message.role === 'tool') {
      unanswered.delete(message.toolCallId);
    }
    if (unanswered.size === 0) cut = i + 1;
  }
  return cut;
}

/**
 * The brain's invariant, with a reason: null when every tool call in `messages` is answered
 * (what `coherentCut` measures), else which call is not. History always satisfies it.
 */
export function unansweredCall(messages: readonly Message[]): string | null {
  const cut = coherentCut(messages, Infinity);
  if (cut === messages.length) return null;
  const answered = new Set<string>();
  for (let i = messages.length - 1; i >= cut; i--) {
    const message = messages[i]!;
    if (message.role === 'tool') answered.add(message.toolCallId);
    if (message.role !== 'assistant') continue;
    const open = message.toolCalls?.find((call) => !answered.has(call.id));
    if (open) return `tool call '${open.id}' at position ${i} has no result`;
  }
  return `the conversation is not coherent after position ${cut}`;
}

/**
 * Stricter, for conversations that come from outside (a compactor, a starting history): what
 * a provider accepts. Every tool call answered exactly once after it, no result without an
 * open call. Ids may repeat across turns (some local models always say 'call_0'), never
 * while open.
 */
export function incoherence(messages: readonly Message[]): string | null {
  const open = new Map<string, number>();
  for (let i = 0; i < messages.length; i++) {
    const message = messages[i]!;
    if (message.role === 'assistant') {
      for (const call of message.toolCalls ?? []) {
        if (open.has(call.id)) return `tool call id '${call.id}' is used twice while unanswered (position ${i})`;
        open.set(call.id, i);
      }
    } else if (message.role === 'tool') {
      if (!open.delete(message.toolCallId)) {
        return `tool result at position ${i} answers no open tool call ('${message.toolCallId}')`;
      }
    }
  }
  const [id, position] = open.entries().next().value ?? [];
  return id === undefined ? null : `tool call '${id}' at position ${position} has no result`;
}

/** The result the brain gives on the model's behalf when it asks for a tool nobody advertised. */
export function unavailableToolResult(call: ToolCall): ToolMessage {
  return {
    role: 'tool',
    toolCallId: call.id,
    toolName: call.name,
    content: `tool '${call.name}' is not available`,
    isError: true,
  };
}

/**
 * Folds each run of adjacent assistant messages into one, the shape a transcript rebuild
 * produces: a summary followed by a tail that opens with an assistant turn becomes one turn.
 * An assistant message that already carries tool calls is never folded into, because its
 * results must follow it directly.
 */
export function coalesceAdjacentAssistants(messages: readonly Message[]): Message[] {
  const out: Message[] = [];
  for (const message of messages) {
    const previous = out.at(-1);
    if (message.role === 'assistant' && previous?.role === 'assistant' && !previous.toolCalls?.length) {
      out[out.length - 1] = foldAssistant(previous, message);
    } else {
      out.push(message);
    }
  }
  return out;
}

function foldAssistant(first: AssistantMessage, second: AssistantMessage): AssistantMessage {
  const content = [first.content, second.content].filter((part) => part.length > 0).join('\n\n');
  return second.toolCalls?.length
    ? { role: 'assistant', content, toolCalls: second.toolCalls }
    : { role: 'assistant', content };
}

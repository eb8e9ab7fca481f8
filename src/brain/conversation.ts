import { jsonValueFault } from '../json-value.js';
import type { AssistantMessage, Message, ToolCall, ToolMessage } from '../schemas.js';

/**
 * The longest prefix of `messages`, at most `limit` long, in which every assistant tool call
 * is answered. Cutting there never separates a tool call from its result, which is the one
 * thing every provider rejects.
 */
export function coherentCut(messages: readonly Message[], limit: number): number {
  const end = Math.min(Math.max(0, Math.floor(limit)), messages.length);
  // Open calls counted per id: two calls open under one id need two results before a cut.
  const unanswered = new Map<string, number>();
  let open = 0;
  let cut = 0;
  for (let i = 0; i < end; i++) {
    const message = messages[i]!;
    if (message.role === 'assistant') {
      for (const call of message.toolCalls ?? []) {
        unanswered.set(call.id, (unanswered.get(call.id) ?? 0) + 1);
        open++;
      }
    } else if (message.role === 'tool') {
      const count = unanswered.get(message.toolCallId) ?? 0;
      if (count > 0) {
        unanswered.set(message.toolCallId, count - 1);
        open--;
      }
    }
    if (open === 0) cut = i + 1;
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

/** Where a conversation stops being one a provider accepts, and why. */
export interface ConversationFault {
  /** Position of the offending message. */
  index: number;
  /** The offending field inside that message, e.g. `toolCallId` or `toolCalls[1].id`; '' for the whole message. */
  field: string;
  /** What is wrong, naming the call id and the positions involved. */
  problem: string;
}

/**
 * Checks `messages` the way a provider reads them: the results of an assistant message's tool
 * calls come right after it, each call answered exactly once, before any other message; no
 * result answers a call that is not open; ids are unique among the calls open at once (they
 * may repeat across turns: some local models always say 'call_0'); every call's arguments are
 * plain JSON. With `openTail` the last assistant message's calls may still be unanswered at
 * the end (a turn waiting for its tools); without it every call must be answered. Linear.
 *
 * @example
 * ```ts
 * conversationFault([{ role: 'tool', toolCallId: 'x', toolName: 'read', content: '' }]);
 * // { index: 0, field: 'toolCallId', problem: "tool result at position 0 answers no open tool call ('x')" }
 * ```
 */
export function conversationFault(
  messages: readonly Message[],
  options: { openTail?: boolean | undefined } = {},
): ConversationFault | null {
  /** The calls of the latest assistant message that has some: id -> answered yet. */
  let block = new Map<string, boolean>();
  let blockAt = -1;
  let open = 0;
  for (let i = 0; i < messages.length; i++) {
    const message = messages[i]!;
    if (message.role === 'tool') {
      const id = message.toolCallId;
      const answered = block.get(id);
      if (answered === false) {
        block.set(id, true);
        open--;
        continue;
      }
      const problem =
        answered === true
          ? `tool result at position ${i} answers tool call '${id}' (position ${blockAt}) a second time`
          : `tool result at position ${i} answers no open tool call ('${id}')`;
      return { index: i, field: 'toolCallId', problem };
    }
    const calls = message.role === 'assistant' ? (message.toolCalls ?? []) : [];
    for (let k = 0; k < calls.length; k++) {
      const id = calls[k]!.id;
      if (block.get(id) === false) {
        const first = blockAt === i ? 'an earlier call in this message' : `its call at position ${blockAt}`;
        return {
          index: i,
          field: `toolCalls[${k}].id`,
          problem: `tool call id '${id}' at position ${i} is used again while ${first} is unanswered`,
        };
      }
      // A new block opens only once the last one is answered; otherwise this message is
      // refused below as coming in between.
      if (open === 0 && blockAt !== i) {
        block = new Map();
        blockAt = i;
      }
      if (blockAt === i) {
        block.set(id, false);
        open++;
      }
    }
    if (open > 0 && blockAt !== i) {
      const id = firstOpen(block);
      return {
        index: i,
        field: '',
        problem: `${message.role} message at position ${i} comes between tool call '${id}' (position ${blockAt}) and its result`,
      };
    }
    for (let k = 0; k < calls.length; k++) {
      const fault = jsonValueFault(calls[k]!.args, `toolCalls[${k}].args`);
      if (fault) return { index: i, field: fault.path, problem: `${fault.problem} (position ${i})` };
    }
  }
  if (open > 0 && !options.openTail) {
    const id = firstOpen(block);
    const k = (messages[blockAt] as AssistantMessage).toolCalls!.findIndex((call) => call.id === id);
    return { index: blockAt, field: `toolCalls[${k}]`, problem: `tool call '${id}' at position ${blockAt} has no result` };
  }
  return null;
}

function firstOpen(block: Map<string, boolean>): string {
  for (const [id, answered] of block) if (!answered) return id;
  return '';
}

/**
 * `conversationFault` as one sentence, for conversations that come from outside (a compactor,
 * a starting history): null when a provider would accept them as they are.
 */
export function incoherence(messages: readonly Message[]): string | null {
  return conversationFault(messages)?.problem ?? null;
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

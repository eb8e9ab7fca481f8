import { isGuardFeedback } from '../agent/guardrails/guardrails.js';
import { isOutputFeedback } from '../agent/structured-output/structured-output.js';
import type { Message } from '../schemas.js';

/**
 * A stored conversation as AI SDK UI messages, for a page that (re)loads a chat: each user
 * message is one, and the replies and tool results up to the next user message are one
 * assistant message with a step per reply. Ids are log positions, stable for a stored log.
 * System messages (instructions, compaction summaries) are not shown, nor the user messages
 * loopchart wrote to the model (an output guardrail's feedback, an answer that did not match the
 * output schema): the page did not send them, and its live stream never showed them, so the
 * replies around one stay one assistant message, as they streamed.
 */
export interface UIMessageOut {
  id: string;
  role: 'user' | 'assistant';
  parts: Array<Record<string, unknown>>;
}

export function toUIMessages(messages: readonly Message[]): UIMessageOut[] {
  const out: UIMessageOut[] = [];
  let assistant: UIMessageOut | undefined;
  const parts = new Map<string, Record<string, unknown>>();
  messages.forEach((message, index) => {
    if (message.role === 'system' || (message.role === 'user' && (isGuardFeedback(message) || isOutputFeedback(message)))) return;
    if (message.role === 'user') {
      assistant = undefined;
      out.push({ id: `m${index}`, role: 'user', parts: [{ type: 'text', text: message.content }] });
      return;
    }
    if (!assistant) {
      assistant = { id: `m${index}`, role: 'assistant', parts: [] };
      out.push(assistant);
    }
    if (message.role === 'assistant') {
      assistant.parts.push({ type: 'step-start' });
      if (message.content) assistant.parts.push({ type: 'text', text: message.content, state: 'done' });
      for (const call of message.toolCalls ?? []) {
        const part: Record<string, unknown> = { type: `tool-${call.name}`, toolCallId: call.id, state: 'input-available', input: call.args };
        parts.set(call.id, part);
        assistant.parts.push(part);
      }
      return;
    }
    const part = parts.get(message.toolCallId);
    if (!part) return;
    if (message.isError) Object.assign(part, { state: 'output-error', errorText: message.content });
    else Object.assign(part, { state: 'output-available', output: message.content });
  });
  return out;
}

import { isGuardFeedback } from '../agent/guardrails/guardrails.js';
import { isOutputFeedback } from '../agent/structured-output/structured-output.js';
import type { Message, ToolCall } from '../schemas.js';
import { callEnd, claimAnswer, shownApproval, type Answers } from './denials.js';
import type { AiSdkVersion } from './ai-sdk-version.js';
import { approvalIdOf } from './ui-chunks.js';

/**
 * A stored conversation as AI SDK UI messages, for a page that (re)loads a chat: each user
 * message is one, and the replies and tool results up to the next user message are one
 * assistant message with a step per reply. Ids are log positions, stable for a stored log.
 * System messages (instructions, compaction summaries) are not shown, nor the user messages
 * loopchart wrote to the model (an output guardrail's feedback, an answer that did not match the
 * output schema): the page did not send them, and its live stream never showed them, so the
 * replies around one stay one assistant message, as they streamed. A call the page denied shows
 * as the stream showed it (see `ShownTo` and `callEnd`).
 */
export interface UIMessageOut {
  id: string;
  role: 'user' | 'assistant';
  parts: Array<Record<string, unknown>>;
}

/**
 * Who the messages are for: the AI SDK version of the page, the chat's stored session id (its
 * approval ids are bound to it) and the calls the session's trace says were answered (see
 * denials.ts; a denial is claimed here, one result each).
 */
export interface ShownTo {
  version: AiSdkVersion;
  chat: string;
  answers: Answers;
}

export function toUIMessages(messages: readonly Message[], shownTo: ShownTo): UIMessageOut[] {
  const out: UIMessageOut[] = [];
  let assistant: UIMessageOut | undefined;
  const parts = new Map<string, { part: Record<string, unknown>; call: ToolCall }>();
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
        parts.set(call.id, { part, call });
        assistant.parts.push(part);
      }
      return;
    }
    const shown = parts.get(message.toolCallId);
    if (!shown) return;
    const { part, call } = shown;
    // A denial shows as the stream showed it to the page that answered (callEnd: one rule for both).
    const denial = claimAnswer(shownTo.answers, call, message, { denials: true });
    const approval = denial && shownApproval(denial, approvalIdOf({ run: denial.run, digest: denial.digest, toolCallId: call.id }, shownTo.chat));
    Object.assign(part, callEnd(shownTo.version, 'page', message, approval));
  });
  return out;
}

import { z } from 'zod';
import { MAX_REASON_LENGTH } from '../agent/protocol/events.js';
import { readBody, type BodyProblem } from '../read-body.js';
import { chatIdProblem } from './route.js';

/**
 * The chat request as it enters: the AI SDK's body (`DefaultChatTransport`: chat id, the page's
 * messages, the trigger) checked with zod, and read into what the handler acts on. The page's
 * messages are not the conversation (the stored session is): only its last message is read, a
 * new user message or the approval answers on the last assistant message.
 */

/** The most messages a request may carry (the page sends its whole list). */
const MAX_MESSAGES = 10_000;

const PartSchema = z.looseObject({ type: z.string().min(1).max(200) });
const TextPartSchema = z.looseObject({ type: z.literal('text'), text: z.string() });
/** An answered approval on a tool part, as `addToolApprovalResponse` leaves it (AI SDK 6 and 7). */
const AnsweredPartSchema = z.looseObject({
  toolCallId: z.string().min(1),
  state: z.literal('approval-responded'),
  approval: z.looseObject({ id: z.string().min(1), approved: z.boolean(), reason: z.string().max(MAX_REASON_LENGTH).optional() }),
});
const UIMessageSchema = z.looseObject({
  id: z.string().max(1000),
  role: z.enum(['system', 'user', 'assistant']),
  parts: z.array(PartSchema).max(100_000),
});
/** An approval answer sent beside the messages (the AI SDK 5 way, see the README). */
const ApprovalAnswerSchema = z.strictObject({ approvalId: z.string().min(1), approved: z.boolean(), reason: z.string().max(MAX_REASON_LENGTH).optional() });

export const ChatRequestSchema = z.looseObject({
  id: z.string().superRefine((id, ctx) => {
    const problem = chatIdProblem(id);
    if (problem) ctx.addIssue({ code: 'custom', message: problem });
  }),
  messages: z.array(UIMessageSchema).min(1).max(MAX_MESSAGES),
  trigger: z.enum(['submit-message', 'regenerate-message']).optional(),
  messageId: z.string().optional(),
  approvals: z.array(ApprovalAnswerSchema).max(1000).optional(),
});

export type ApprovalAnswer = z.output<typeof ApprovalAnswerSchema>;

/** What a chat request asks for. */
export type ChatAsk =
  | { type: 'input'; chatId: string; text: string }
  | { type: 'approvals'; chatId: string; answers: ApprovalAnswer[] };

/** The ask of a parsed body, or why it asks for nothing this handler does. */
export function chatAsk(body: unknown): { ask: ChatAsk } | { problem: string } {
  const parsed = ChatRequestSchema.safeParse(body);
  if (!parsed.success) return { problem: z.prettifyError(parsed.error) };
  const { id: chatId, messages, trigger, approvals } = parsed.data;
  if (trigger === 'regenerate-message') return { problem: 'regenerate is not supported: a session keeps its history (rewind the session instead)' };
  const answers: ApprovalAnswer[] = [...(approvals ?? [])];
  const last = messages.at(-1)!;
  if (last.role === 'assistant') {
    for (const part of last.parts) {
      const answered = AnsweredPartSchema.safeParse(part);
      if (answered.success) {
        const { id, approved, reason } = answered.data.approval;
        answers.push({ approvalId: id, approved, ...(reason !== undefined && { reason }) });
      }
    }
  }
  if (answers.length > 0) return { ask: { type: 'approvals', chatId, answers } };
  if (last.role !== 'user') return { problem: 'the last message is neither a new user message nor an answer to an approval' };
  const texts: string[] = [];
  for (const part of last.parts) {
    const text = TextPartSchema.safeParse(part);
    if (text.success) texts.push(text.data.text);
  }
  const text = texts.join('\n');
  if (text.trim() === '') return { problem: 'the user message has no text' };
  return { ask: { type: 'input', chatId, text } };
}

/**
 * The body as JSON, read as `readBody` reads it (up to `maxBytes`, within `timeoutMs`), or why it
 * cannot be taken.
 */
export async function readJsonBody(request: Request, maxBytes: number, timeoutMs: number): Promise<{ body: unknown } | BodyProblem> {
  if (!request.body) return { problem: 'the request has no body', status: 400 };
  const read = await readBody(request, maxBytes, timeoutMs);
  if ('problem' in read) return read;
  try {
    return { body: JSON.parse(Buffer.from(read.bytes).toString('utf8')) };
  } catch {
    return { problem: 'the body is not JSON', status: 400 };
  }
}

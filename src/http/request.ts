import { z } from 'zod';
import { MAX_REASON_LENGTH } from '../agent/protocol/events.js';
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

/** Why a body cannot be taken, with its status: 413 too large, 408 too slow, 400 anything else. */
export interface BodyProblem {
  problem: string;
  status: 400 | 408 | 413;
}

/**
 * The body as JSON, read up to `maxBytes` (a larger one is refused before it is all read) and
 * within `timeoutMs` (a client that stops sending mid-body is let go, on any runtime: Node's own
 * `requestTimeout` is not there under every framework), or why it cannot be taken.
 */
export async function readJsonBody(request: Request, maxBytes: number, timeoutMs: number): Promise<{ body: unknown } | BodyProblem> {
  const declared = Number(request.headers.get('content-length') ?? NaN);
  if (declared > maxBytes) return { problem: `the body is ${declared} bytes; the limit is ${maxBytes}`, status: 413 };
  if (!request.body) return { problem: 'the request has no body', status: 400 };
  const reader = request.body.getReader();
  const parts: Uint8Array[] = [];
  let size = 0;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), timeoutMs)));
  try {
    for (;;) {
      // A client that goes away mid-body rejects the read: its request is over, no fault of ours.
      const read = await Promise.race([reader.read(), late]).catch(() => 'cut' as const);
      if (read === 'cut') return { problem: 'the body was cut off before its end', status: 400 };
      if (read === 'late') {
        await reader.cancel().catch(() => {});
        return { problem: `the body did not arrive within ${timeoutMs} ms`, status: 408 };
      }
      if (read.done) break;
      size += read.value.byteLength;
      if (size > maxBytes) {
        await reader.cancel().catch(() => {});
        return { problem: `the body is over the limit of ${maxBytes} bytes`, status: 413 };
      }
      parts.push(read.value);
    }
  } finally {
    clearTimeout(timer);
  }
  try {
    return { body: JSON.parse(Buffer.concat(parts).toString('utf8')) };
  } catch {
    return { problem: 'the body is not JSON', status: 400 };
  }
}

/**
 * A ticket-record operation: the ticket the conversation works on, kept with the session (its
 * state slice is stored in the session row, shown by `loopchart sessions show`, restored after a
 * restart). It records every tool the model used and how each reply ended, only by returning
 * effects.
 */
import { z } from 'zod';
import type { Operation } from '../../src/agent/operations/operation.js';

export const TicketState = z.object({
  id: z.string(),
  status: z.enum(['open', 'answered']),
  toolsUsed: z.array(z.string()),
  replies: z.number().int().nonnegative(),
});
export type TicketState = z.infer<typeof TicketState>;

export function ticketOperation(id: string): Operation<TicketState> {
  return {
    name: 'ticket',
    state: { schema: TicketState, initial: { id, status: 'open', toolsUsed: [], replies: 0 } },
    async afterReply(reply, ctx) {
      const answered = reply.finishReason === 'stop' && !reply.message.toolCalls?.length;
      return { state: { ...ctx.state, replies: ctx.state.replies + 1, status: answered ? 'answered' : ctx.state.status } };
    },
    async beforeTools(calls, ctx) {
      return { state: { ...ctx.state, toolsUsed: [...ctx.state.toolsUsed, ...calls.map(({ call }) => call.name)] } };
    },
    prompt: (ctx) => `You are working on ticket ${ctx.state.id} (${ctx.state.status}).`,
  };
}

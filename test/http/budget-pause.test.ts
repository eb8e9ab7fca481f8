/**
 * A run that a budget pauses waits for someone (a raise the product sends): its chat response
 * ends, as for an approval, instead of staying open until the client gives up; the session keeps
 * the paused run, and a raise sent to the stored session continues it.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createChatHandler, type ChatHandler } from '../../src/http.js';
import { createAgentMachine, defineTool, DurableSession, MemorySessionStore } from '../../src/index.js';
import { scriptedModel } from '../../src/testing.js';
import { loadSdk, page, userMessage } from './support.js';

const handlers: ChatHandler[] = [];
afterEach(async () => {
  await Promise.all(handlers.splice(0).map((handler) => handler.close()));
});

const look = defineTool({ name: 'look', description: 'Looks', input: z.object({ at: z.string() }), execute: ({ at }) => `saw ${at}` });

describe('a chat whose run a budget pauses', () => {
  it('ends the response with the run paused and why, and the stored session continues after a raise', async () => {
    const machine = createAgentMachine({
      model: scriptedModel([
        { toolCalls: [{ id: 'c1', name: 'look', args: { at: 'a' } }] },
        { toolCalls: [{ id: 'c2', name: 'look', args: { at: 'b' } }] },
        { text: 'Seen both.' },
      ]),
      tools: [look],
      budget: { maxToolCalls: 1, pause: true },
    });
    const store = new MemorySessionStore();
    const handler = createChatHandler({ machine, store });
    handlers.push(handler);
    const chat = page(await loadSdk(6), handler, 'paused');

    const ended = await Promise.race([
      chat.send([userMessage('look twice')]).then((message) => message),
      new Promise<'open'>((resolve) => setTimeout(() => resolve('open'), 5_000).unref()),
    ]);
    expect(ended).not.toBe('open');
    if (ended === 'open') return;
    // The page is told the run paused and why, not that it waits for a decision it could give;
    // and no `data-operation-yielded` part asks it for a resume its route refuses.
    expect(ended.metadata).toEqual({ run: 1, outcome: 'paused', reason: 'budget: 2 tool calls made, limit 1' });
    expect(ended.parts.map((part) => part.type)).not.toContain('data-operation-yielded');
    await handler.close();

    const session = await DurableSession.open({ machine, store, sessionId: 'paused' });
    expect(JSON.stringify(session.actor.getSnapshot().value)).toContain('BudgetPaused');
    session.send({ type: 'budget.raise', budget: { maxToolCalls: 5 } });
    const outcome = await session.whenIdle();
    expect(outcome?.outcome).toMatchObject({ type: 'Completed' });
    await session.close();
  });
});

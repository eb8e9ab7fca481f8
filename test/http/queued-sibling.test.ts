/**
 * A call queued behind `toolConcurrency` is not running, so it does not hold the page's response
 * open: the coordinator (toolConcurrency 1) calls `research`, whose child waits for the page's
 * approval, and `slow`, queued behind it. The response ends with the approval request, as it does
 * without `slow`; the answer runs the child's tool, then `slow`, and the run completes. Before
 * (the queued call was announced started with the batch), the handler counted `slow` as running
 * beside a child that waits, so the response stayed open: the page (AI SDK 6, which answers once
 * the response ended) never got to answer. Real handler and AI SDK client code, in memory.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createChatHandler, type ChatHandler } from '../../src/http.js';
import { MemorySessionStore } from '../../src/index.js';
import { teamAgent } from './fixtures/team-agent.js';
import { answered, loadSdk, page, textOf, userMessage } from './support.js';

const handlers: ChatHandler[] = [];
afterEach(async () => {
  await Promise.all(handlers.splice(0).map((handler) => handler.close()));
});

const within = <T>(promise: Promise<T>, ms: number): Promise<T> =>
  Promise.race([promise, new Promise<T>((_, reject) => setTimeout(() => reject(new Error(`not settled within ${ms} ms`)), ms))]);

describe('a sibling call queued behind a subagent that waits for approval (toolConcurrency 1)', () => {
  it('the response ends with the approval request; the answer runs the child, then the queued call', async () => {
    const team = teamAgent(2, { sibling: true, toolConcurrency: 1 });
    const handler = createChatHandler({ machine: team.machine, store: new MemorySessionStore(), aiSdk: 6 });
    handlers.push(handler);
    const chat = page(await loadSdk(6), handler, 'team-queued');
    const user = userMessage('Send 5 through research.');
    const asked = await within(chat.send([user]), 5000);
    expect(chat.errors).toEqual([]);
    expect(asked.metadata?.outcome).toBe('waiting');
    expect(asked.parts.find((p) => p.toolCallId === 'call_1_0/call_1_0')).toMatchObject({ type: 'tool-transfer', state: 'approval-requested' });
    // The queued call has its input, no output: it has not run.
    expect(asked.parts.find((p) => p.toolCallId === 'call_1_1')).toMatchObject({ type: 'tool-slow', state: 'input-available' });
    expect(team.transfers).toEqual([]);

    const after = await within(chat.send([user, answered(asked, true)], answered(asked, true)), 8000);
    expect(chat.errors).toEqual([]);
    expect(team.transfers).toEqual(['5']);
    expect(after.parts.find((p) => p.toolCallId === 'call_1_1')).toMatchObject({ state: 'output-available', output: 'slow done' });
    expect(textOf(after)).toBe('Asking research.|All done.');
    expect(after.metadata?.outcome).toBe('Completed');
  });
});

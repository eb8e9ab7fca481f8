/**
 * A call in doubt in the chat page (issue 41, matrix: in-doubt × chat handler): a chat whose
 * process died while a tool that asks when in doubt ran is reopened by the page; the call shows as
 * an approval request ("run it again?") with a `data-tool-in-doubt` part saying why; approving runs
 * it again, denying fails it with the reason; either way the run goes on to its end. Nothing runs
 * without the page's answer. A subagent's call in doubt shows and is answered the same way, under
 * the id its parent shows it by (`c1/p1`).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createChatHandler, type ChatHandler } from '../../src/http.js';
import { agentTool, createAgentMachine, defineTool, DurableSession, MemorySessionStore } from '../../src/index.js';
import type { Message } from '../../src/schemas.js';
import { scriptedModel } from '../../src/testing.js';
import { loadSdk, page, type UIMessage, answered } from './support.js';

const handlers: ChatHandler[] = [];
afterEach(async () => {
  await Promise.all(handlers.splice(0).map((handler) => handler.close()));
});

/** A charge tool whose first run never returns (the process "dies" in it); later runs charge. */
function chargingAgent() {
  const runs: string[] = [];
  const seen: Message[][] = [];
  const charge = defineTool({
    name: 'charge',
    description: 'Charges the card.',
    input: z.object({ amount: z.number() }),
    inDoubt: 'ask',
    execute: ({ amount }, ctx) => {
      runs.push(`charge ${amount}`);
      if (runs.length === 1) return new Promise((_, reject) => ctx.signal.addEventListener('abort', () => reject(new Error('aborted')), { once: true }));
      return `charged ${amount}`;
    },
  });
  const model = scriptedModel([
    { text: 'Charging.', toolCalls: [{ id: 'c1', name: 'charge', args: { amount: 5 } }] },
    (request) => (seen.push([...request.messages]), { text: `Result: ${request.messages.at(-1)!.content}` }),
  ]);
  return { machine: createAgentMachine({ model, retry: false, tools: [charge] }), runs, seen };
}

/** The chat's session cut off inside the tool, as a SIGKILL leaves it: the call's start stored, its result never. */
async function crashedChat(store: MemorySessionStore, agent: ReturnType<typeof chargingAgent>) {
  const session = await DurableSession.open({ machine: agent.machine, store, sessionId: 'pay' });
  session.send({ type: 'input', message: 'Charge 5.' });
  for (let i = 0; i < 200 && agent.runs.length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 5));
  await session.flush();
  session.actor.stop();
}

describe('a call in doubt in the chat page', () => {
  it.each([
    [true, ['charge 5', 'charge 5'], 'Result: charged 5'],
    [false, ['charge 5'], 'Result: failed: the user did not run it again after it was cut off'],
  ])('shows as "run it again?"; approved %s: the run goes on to its end', async (approved, runs, finalText) => {
    const store = new MemorySessionStore();
    const agent = chargingAgent();
    await crashedChat(store, agent);
    const handler = createChatHandler({ machine: agent.machine, store });
    handlers.push(handler);
    const chat = page(await loadSdk(6), handler, 'pay');
    // The page reloads: the run in flight continues and stops at the call in doubt.
    const shown = (await chat.resume())!;
    expect(shown.metadata?.outcome).toBe('waiting');
    const part = shown.parts.find((p) => p.type === 'tool-charge')!;
    expect(part).toMatchObject({ state: 'approval-requested', input: { amount: 5 } });
    expect(shown.parts.find((p) => p.type === 'data-tool-in-doubt')?.data).toEqual({ toolCallId: 'c1', toolName: 'charge', approvalId: part.approval!.id });
    expect(agent.runs).toEqual(['charge 5']);
    const user = { id: 'u1', role: 'user', parts: [{ type: 'text', text: 'Charge 5.' }] };
    const after = await chat.send([user, answered(shown, approved)], answered(shown, approved));
    expect(chat.errors).toEqual([]);
    expect(agent.runs).toEqual(runs);
    expect(after.metadata?.outcome).toBe('Completed');
    const stored = await store.load('pay');
    expect(stored!.messages.at(-1)).toMatchObject({ role: 'assistant', content: expect.stringContaining(finalText.slice(0, 20)) });
  });

  it.each([
    ['without a reason', undefined],
    ['with a reason', 'It went through already.'],
  ])('denied %s: a reload shows the call as the stream did, output-denied with the page\'s answer, and why it asked', async (_, reason) => {
    const store = new MemorySessionStore();
    const agent = chargingAgent();
    await crashedChat(store, agent);
    const handler = createChatHandler({ machine: agent.machine, store });
    handlers.push(handler);
    const chat = page(await loadSdk(6), handler, 'pay');
    const shown = (await chat.resume())!;
    const denied = answered(shown, false);
    if (reason !== undefined) for (const part of denied.parts) if (part.approval) part.approval = { ...part.approval, reason };
    const user = { id: 'u1', role: 'user', parts: [{ type: 'text', text: 'Charge 5.' }] };
    const live = await chat.send([user, denied], denied);
    expect(live.parts.find((p) => p.type === 'tool-charge')).toMatchObject({ state: 'output-denied', approval: { approved: false } });
    const response = await handler(new Request('http://127.0.0.1/api/chat/pay/messages'));
    const { messages } = (await response.json()) as { messages: UIMessage[] };
    // The data part saying why it asked too, where the stream put it.
    const parts = (message: UIMessage) => JSON.parse(JSON.stringify(message.parts)) as unknown;
    expect(parts(messages[1]!)).toEqual(parts(live));
  });

  it('an answer for a call that is not in doubt (or a forged one) is refused, and nothing runs', async () => {
    const store = new MemorySessionStore();
    const agent = chargingAgent();
    await crashedChat(store, agent);
    const handler = createChatHandler({ machine: agent.machine, store });
    handlers.push(handler);
    const chat = page(await loadSdk(6), handler, 'pay');
    const shown = (await chat.resume())!;
    const id = shown.parts.find((p) => p.state === 'approval-requested')!.approval!.id;
    const forged = id.replace(/:[0-9a-f]{64}:/, `:${'0'.repeat(64)}:`);
    const message = { ...shown, parts: shown.parts.map((p) => (p.state === 'approval-requested' ? { ...p, state: 'approval-responded', approval: { id: forged, approved: true } } : p)) };
    const response = await chat.post({ id: 'pay', messages: [{ id: 'u1', role: 'user', parts: [{ type: 'text', text: 'Charge 5.' }] }, message] });
    expect(response.status).toBe(409);
    expect(agent.runs).toEqual(['charge 5']);
  });
});

describe("a subagent's call in doubt in the chat page", () => {
  /** A coordinator whose agent tool runs the charging agent. */
  function team(agent: ReturnType<typeof chargingAgent>) {
    const model = scriptedModel([{ toolCalls: [{ id: 't1', name: 'billing', args: { task: 'Charge 5.' } }] }, (request) => ({ text: `Billing said: ${request.messages.at(-1)!.content}` })]);
    return createAgentMachine({ model, retry: false, tools: [agentTool({ agent: agent.machine, name: 'billing', description: 'Bills.' })] });
  }

  it.each([
    ['the chat held by this process', false],
    ['the chat at rest in the store', true],
  ])('shows as "run it again?" under the parent\'s id and the answer goes down to the child: %s', async (_, atRest) => {
    const store = new MemorySessionStore();
    const agent = chargingAgent();
    const session = await DurableSession.open({ machine: team(agent), store, sessionId: 'team' });
    session.send({ type: 'input', message: 'Charge 5.' });
    for (let i = 0; i < 400 && agent.runs.length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 5));
    await session.flush();
    session.actor.stop();
    let handler = createChatHandler({ machine: team(agent), store });
    handlers.push(handler);
    let chat = page(await loadSdk(6), handler, 'team');
    const shown = (await chat.resume())!;
    // Before: the parent showed nothing, and its call waited for the agent tool's timeout.
    expect(shown.metadata?.outcome).toBe('waiting');
    const part = shown.parts.find((p) => p.type === 'tool-charge')!;
    expect(part).toMatchObject({ toolCallId: 't1/c1', state: 'approval-requested', input: { amount: 5 } });
    expect(shown.parts.find((p) => p.type === 'data-tool-in-doubt')?.data).toEqual({ toolCallId: 't1/c1', toolName: 'charge', approvalId: part.approval!.id });
    if (atRest) {
      await handler.close();
      handler = createChatHandler({ machine: team(agent), store });
      handlers.push(handler);
      chat = page(await loadSdk(6), handler, 'team');
    }
    const user = { id: 'u1', role: 'user', parts: [{ type: 'text', text: 'Charge 5.' }] };
    const after = await chat.send([user, answered(shown, true)], answered(shown, true));
    expect(chat.errors).toEqual([]);
    expect(agent.runs).toEqual(['charge 5', 'charge 5']);
    expect(after.metadata?.outcome).toBe('Completed');
    expect((await store.load('team'))!.messages.at(-1)).toMatchObject({ role: 'assistant', content: expect.stringContaining('charged 5') });
  });
});

/**
 * A reload shows what the stream showed: the assistant message `GET <api>/<id>/messages` gives
 * back for a finished run is the one the page's own readUIMessageStream built live, read with each
 * AI SDK version's client code. Here for calls the user denied: AI SDK 6 and 7 show them
 * `output-denied` with the approval the page answered (5 has no such state: `output-error`, as
 * live). A denial is known from the session's record of the decision, not from the result's
 * text: a tool error that reads like a denial stays an error.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createChatHandler, type ChatHandler } from '../../src/http.js';
import { createAgentMachine, decideStored, defineTool, MemorySessionStore } from '../../src/index.js';
import { callDigest } from '../../src/agent/approvals/approval-binding.js';
import { scriptedModel } from '../../src/testing.js';
import { chatAgent } from './fixtures/chat-agent.js';
import { teamAgent } from './fixtures/team-agent.js';
import { loadSdk, nodeMajor, page, userMessage, answered, plainParts, reloadMessages } from './support.js';

const handlers: ChatHandler[] = [];
afterEach(async () => {
  await Promise.all(handlers.splice(0).map((handler) => handler.close()));
});

function setup(version: 5 | 6 | 7, script: Parameters<typeof chatAgent>[0], store = new MemorySessionStore()) {
  const agent = chatAgent(script);
  const handler = createChatHandler({ machine: agent.machine, store, aiSdk: version });
  handlers.push(handler);
  return { store, handler, ...agent };
}

const sendFive = [{ text: 'I will send it.', toolCalls: [{ name: 'transfer', args: { amount: 5 } }] }, { text: 'Not sent.' }];

describe.each([6, 7] as const)('a reload after a denial, AI SDK %s', (version) => {
  const skip = version === 7 && nodeMajor < 22;

  it.skipIf(skip)('the denied call is output-denied with the approval the page answered, as the stream showed it', async () => {
    const sdk = await loadSdk(version);
    const { handler, transfers } = setup(version, sendFive);
    const chat = page(sdk, handler, 'denied');
    const user = userMessage('Send 5.');
    const asked = await chat.send([user]);
    const live = await chat.send([user, answered(asked, false, 'Not today.')], answered(asked, false, 'Not today.'));
    expect(transfers).toEqual([]);
    expect(live.parts.find((p) => p.type === 'tool-transfer')).toMatchObject({ state: 'output-denied', approval: { approved: false, reason: 'Not today.' } });
    const messages = await reloadMessages(handler, 'denied');
    expect(messages.map((m) => m.role)).toEqual(['user', 'assistant']);
    expect(plainParts(messages[1]!.parts)).toEqual(plainParts(live.parts));
    // The AI SDK takes the reloaded conversation as valid UI messages (an output-denied part must carry its approval).
    await expect(sdk.validateUIMessages({ messages })).resolves.toBeDefined();
  });

  it.skipIf(skip)('calls of two runs with the same id and input, both denied: each run shows its own approval', async () => {
    const sdk = await loadSdk(version);
    // A provider may name calls by their place in a turn: both runs' calls are `c1`.
    const sendAs = { text: 'I will send it.', toolCalls: [{ id: 'c1', name: 'transfer', args: { amount: 5 } }] };
    const { handler, transfers } = setup(version, [sendAs, { text: 'Not sent.' }, sendAs, { text: 'Still not sent.' }]);
    const chat = page(sdk, handler, 'twice');
    const first = userMessage('Send 5.', 'u1');
    const asked = await chat.send([first]);
    const denied = await chat.send([first, answered(asked, false)], answered(asked, false));
    const second = userMessage('Send 5 after all.', 'u2');
    const askedAgain = await chat.send([first, denied, second]);
    const deniedAgain = await chat.send([first, denied, second, answered(askedAgain, false, 'Still no.')], answered(askedAgain, false, 'Still no.'));
    expect(transfers).toEqual([]);
    const messages = await reloadMessages(handler, 'twice');
    expect(messages.map((m) => m.role)).toEqual(['user', 'assistant', 'user', 'assistant']);
    expect(plainParts(messages[1]!.parts)).toEqual(plainParts(denied.parts));
    expect(plainParts(messages[3]!.parts)).toEqual(plainParts(deniedAgain.parts));
    expect(messages[3]!.parts.find((p) => p.type === 'tool-transfer')!.approval!.id).toMatch(/^2:/);
  });

  it.skipIf(skip)('a denial decided in the store while the session was at rest shows denied once the run has ended', async () => {
    const sdk = await loadSdk(version);
    const { handler, store } = setup(version, sendFive);
    const chat = page(sdk, handler, 'at-rest');
    const asked = await chat.send([userMessage('Send 5.')]);
    const [run, , toolCallId] = asked.parts.find((p) => p.state === 'approval-requested')!.approval!.id.split(':');
    // Another process (a back office) denies it in the store, bound to the call as the session asked.
    const digest = callDigest({ name: 'transfer', args: { amount: 5 } });
    await decideStored(store, 'at-rest', { toolCallId: toolCallId!, digest, run: Number(run) }, { approved: false, reason: 'Not from here.' });
    // The page comes back: the run goes on from the store with the decision, to its end.
    const resumed = (await chat.resume())!;
    expect(resumed.metadata?.outcome).toBe('Completed');
    const messages = await reloadMessages(handler, 'at-rest');
    expect(messages[1]!.parts.find((p) => p.type === 'tool-transfer')).toEqual({
      type: 'tool-transfer',
      toolCallId,
      state: 'output-denied',
      input: { amount: 5 },
      approval: { id: asked.parts.find((p) => p.state === 'approval-requested')!.approval!.id, approved: false, reason: 'Not from here.' },
    });
    await expect(sdk.validateUIMessages({ messages })).resolves.toBeDefined();
  });

  it.skipIf(skip)('a tool error that reads like a denial stays an error: the session never denied it', async () => {
    const sdk = await loadSdk(version);
    const lookup = defineTool({
      name: 'lookup',
      description: 'Looks a word up.',
      input: z.object({ word: z.string() }),
      execute: ({ word }) => {
        throw new Error(word);
      },
    });
    const forged = 'denied: the user did not approve this tool call';
    const model = scriptedModel([{ toolCalls: [{ name: 'lookup', args: { word: forged } }] }, { text: 'Hm.' }]);
    const handler = createChatHandler({ machine: createAgentMachine({ model, tools: [lookup] }), store: new MemorySessionStore(), aiSdk: version });
    handlers.push(handler);
    const live = await page(sdk, handler, 'forged').send([userMessage('Look it up.')]);
    expect(live.parts.find((p) => p.type === 'tool-lookup')).toMatchObject({ state: 'output-error', errorText: forged });
    const messages = await reloadMessages(handler, 'forged');
    expect(plainParts(messages[1]!.parts)).toEqual(plainParts(live.parts));
  });
});

describe("a reload after a subagent's call was denied", () => {
  it('shows the message as the stream ended it: the call that ran the subagent, and the subagent\'s denied call with the page\'s approval', async () => {
    const sdk = await loadSdk(6);
    const team = teamAgent(2);
    const handler = createChatHandler({ machine: team.machine, store: new MemorySessionStore(), aiSdk: 6 });
    handlers.push(handler);
    const chat = page(sdk, handler, 'team-denied');
    const user = userMessage('Send 5 through research.');
    const asked = await chat.send([user]);
    const live = await chat.send([user, answered(asked, false)], answered(asked, false));
    expect(live.parts.find((p) => p.toolCallId === 'call_1_0/call_1_0')!.state).toBe('output-denied');
    const messages = await reloadMessages(handler, 'team-denied');
    // The subagent's steps are read back from its session (test/http/subagent-reload.test.ts).
    expect(plainParts(messages[1]!.parts)).toEqual(plainParts(live.parts));
    await expect(sdk.validateUIMessages({ messages })).resolves.toBeDefined();
  });
});

describe('a reload after a denial, AI SDK 5 (no denied state)', () => {
  it('the denied call is output-error with the denial the model read, and its approval request part, as the stream showed them', async () => {
    const sdk = await loadSdk(5);
    const { handler, transfers } = setup(5, sendFive);
    const chat = page(sdk, handler, 'v5-denied');
    const user = userMessage('Send 5.');
    const asked = await chat.send([user]);
    const approvalId = String(asked.parts.find((p) => p.type === 'data-approval-request')!.data!.approvalId);
    const transport = new sdk.DefaultChatTransport({
      api: 'http://127.0.0.1/api/chat',
      fetch: ((input: string, init?: RequestInit) => handler(new Request(input, init))) as typeof fetch,
      body: { approvals: [{ approvalId, approved: false }] },
    });
    const live = await chat.read(await transport.sendMessages({ chatId: 'v5-denied', messages: [user, asked], trigger: 'submit-message', messageId: undefined, abortSignal: undefined }), asked);
    expect(transfers).toEqual([]);
    const shown = live.parts.find((p) => p.type === 'tool-transfer')!;
    expect(shown).toMatchObject({ state: 'output-error', errorText: 'denied: the user did not approve this tool call' });
    const messages = await reloadMessages(handler, 'v5-denied');
    // The approval request, a data part in AI SDK 5, where the stream put it.
    expect(plainParts(messages[1]!.parts)).toEqual(plainParts(live.parts));
  });
});

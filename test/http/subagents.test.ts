/**
 * Subagents in the page: a child's (and grandchild's) call that needs approval is a tool part of
 * the chat's message under the id its parent shows (`call_1_0/call_1_0`), with its approval
 * request, read by the AI SDK's own client code (DefaultChatTransport + readUIMessageStream); the
 * response ends while the child waits, as for the chat's own calls; the answer, sent with the id
 * the server sent, runs the child's tool; the child's text is the preliminary output of the call
 * that runs it. Forged answers for a child's call are refused with nothing stored changed.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createChatHandler, type ChatHandler } from '../../src/http.js';
import { MemorySessionStore } from '../../src/index.js';
import { teamAgent } from './fixtures/team-agent.js';
import { loadSdk, page, textOf, userMessage, type UIMessage, answered } from './support.js';

const handlers: ChatHandler[] = [];
afterEach(async () => {
  await Promise.all(handlers.splice(0).map((handler) => handler.close()));
});

function setup(depth: 2 | 3, version: 5 | 6 = 6, options: { streams?: boolean; sibling?: boolean } = {}) {
  const store = new MemorySessionStore();
  const team = teamAgent(depth, options);
  const handler = createChatHandler({ machine: team.machine, store, aiSdk: version });
  handlers.push(handler);
  return { store, handler, ...team };
}

const within = <T>(promise: Promise<T>, ms: number): Promise<T> =>
  Promise.race([promise, new Promise<T>((_, reject) => setTimeout(() => reject(new Error(`not settled within ${ms} ms`)), ms))]);

describe.each([2, 3] as const)('a subagent %s levels deep', (depth) => {
  const deepId = depth === 2 ? 'call_1_0/call_1_0' : 'call_1_0/call_1_0/call_1_0';

  it('its approval is a tool part the page knows; the response ends; the answer runs its tool and the run completes', async () => {
    const { handler, transfers } = setup(depth);
    const chat = page(await loadSdk(6), handler, `team-${depth}`);
    const user = userMessage('Send 5 through research.');
    const asked = await within(chat.send([user]), 5000);
    expect(chat.errors).toEqual([]);
    expect(asked.metadata?.outcome).toBe('waiting');
    const part = asked.parts.find((p) => p.toolCallId === deepId)!;
    expect(part).toMatchObject({ type: 'tool-transfer', state: 'approval-requested', input: { amount: 5 } });
    expect(part.approval!.id).toMatch(new RegExp(`^1:[0-9a-f]{64}:${deepId}$`));
    // The child's words so far: the preliminary output of the call that runs it.
    const research = asked.parts.find((p) => p.toolCallId === 'call_1_0')!;
    expect(research).toMatchObject({ type: 'tool-research', state: 'output-available', preliminary: true });
    expect((research.output as { text: string }).text).toBe(depth === 2 ? 'Worker checking the account.' : 'Middle asks the worker.');
    expect(transfers).toEqual([]);

    const after = await within(chat.send([user, answered(asked, true)], answered(asked, true)), 5000);
    expect(chat.errors).toEqual([]);
    expect(transfers).toEqual(['5']);
    expect(after.parts.find((p) => p.toolCallId === deepId)).toMatchObject({ state: 'output-available', output: 'sent 5' });
    expect(after.parts.find((p) => p.toolCallId === 'call_1_0')).toMatchObject({ state: 'output-available', output: depth === 2 ? 'Worker sent it.' : 'Middle done.' });
    expect(after.parts.find((p) => p.toolCallId === 'call_1_0')!.preliminary).not.toBe(true);
    expect(textOf(after)).toBe('Asking research.|All done.');
    expect(after.metadata?.outcome).toBe('Completed');
  });

  it('a denial reaches the child as its call\'s result; the page shows it denied', async () => {
    const { handler, transfers } = setup(depth);
    const chat = page(await loadSdk(6), handler, `team-deny-${depth}`);
    const user = userMessage('Send 5 through research.');
    const asked = await within(chat.send([user]), 5000);
    const after = await within(chat.send([user, answered(asked, false)], answered(asked, false)), 5000);
    expect(transfers).toEqual([]);
    expect(after.parts.find((p) => p.toolCallId === deepId)!.state).toBe('output-denied');
    expect(after.metadata?.outcome).toBe('Completed');
  });
});

describe('a page that reloads while a subagent waits', () => {
  it('reattaching shows the subagent\'s request again and ends; its answer then runs the tool', async () => {
    const { handler, transfers } = setup(3);
    const sdk = await loadSdk(6);
    const user = userMessage('Send 5 through research.');
    await within(page(sdk, handler, 'team-reload').send([user]), 5000);
    const reloaded = page(sdk, handler, 'team-reload');
    const replay = (await within(reloaded.resume(), 5000))!;
    expect(reloaded.errors).toEqual([]);
    expect(replay.metadata?.outcome).toBe('waiting');
    expect(replay.parts.find((p) => p.toolCallId === 'call_1_0/call_1_0/call_1_0')).toMatchObject({ type: 'tool-transfer', state: 'approval-requested' });
    const after = await within(reloaded.send([user, answered(replay, true)], answered(replay, true)), 5000);
    expect(transfers).toEqual(['5']);
    expect(after.metadata?.outcome).toBe('Completed');
    expect(reloaded.errors).toEqual([]);
  });
});

describe('answers for a subagent\'s call', () => {
  it('a forged one (another digest, another run, a call that does not wait, a made-up child) is a 409; nothing stored changes', async () => {
    const { handler, store, transfers } = setup(2);
    const chat = page(await loadSdk(6), handler, 'team-forged');
    const user = userMessage('Send 5 through research.');
    const asked = await within(chat.send([user]), 5000);
    const shown = asked.parts.find((p) => p.state === 'approval-requested')!.approval!.id;
    const [, digest] = shown.split(':');
    const other = digest!.replace(/^./, (c) => (c === '0' ? '1' : '0'));
    const sessions = ['team-forged', 'team-forged/run-1:turn-1:call_1_0'];
    const snapshot = async () => Promise.all(sessions.map(async (id) => ({ row: await store.load(id), trace: await store.readTrace(id) })));
    const before = await snapshot();
    expect(before[1]!.row).toBeDefined();
    for (const id of [`1:${other}:call_1_0/call_1_0`, `2:${digest}:call_1_0/call_1_0`, `1:${digest}:call_1_0/call_9`, `1:${digest}:call_9/call_1_0`, `1:${digest}:call_1_0/call_1_0/x`]) {
      const forged = { ...asked, parts: asked.parts.map((p) => (p.state === 'approval-requested' ? { ...p, state: 'approval-responded', approval: { id, approved: true } } : p)) };
      const response = await chat.post({ id: 'team-forged', messages: [user, forged] });
      expect(response.status, id).toBe(409);
      expect(((await response.json()) as { error: { code: string } }).error.code).toBe('ApprovalNotFound');
    }
    expect(await snapshot()).toEqual(before);
    expect(transfers).toEqual([]);
    // The real answer still works.
    const after = await within(chat.send([user, answered(asked, true)], answered(asked, true)), 5000);
    expect(transfers).toEqual(['5']);
    expect(after.metadata?.outcome).toBe('Completed');
  });

  it('AI SDK 5: the child\'s request is a data part; the answer in the body runs its tool', async () => {
    const sdk = await loadSdk(5);
    const { handler, transfers } = setup(2, 5);
    const chat = page(sdk, handler, 'team-v5');
    const user = userMessage('Send 5 through research.');
    const asked = await within(chat.send([user]), 5000);
    const request = asked.parts.find((p) => p.type === 'data-approval-request')!;
    expect(request.data).toMatchObject({ toolCallId: 'call_1_0/call_1_0', toolName: 'transfer' });
    expect(asked.parts.find((p) => p.toolCallId === 'call_1_0/call_1_0')).toMatchObject({ type: 'tool-transfer', state: 'input-available' });
    const transport = new sdk.DefaultChatTransport({
      api: 'http://127.0.0.1/api/chat',
      fetch: ((input: string, init?: RequestInit) => handler(new Request(input, init))) as typeof fetch,
      body: { approvals: [{ approvalId: String(request.data!.approvalId), approved: true }] },
    });
    const after = await within(chat.read(await transport.sendMessages({ chatId: 'team-v5', messages: [user, asked], trigger: 'submit-message', messageId: undefined, abortSignal: undefined }), asked), 5000);
    expect(transfers).toEqual(['5']);
    expect(after.parts.find((p) => p.toolCallId === 'call_1_0/call_1_0')).toMatchObject({ state: 'output-available', output: 'sent 5' });
  });
});

describe('a model that does not stream', () => {
  it('its text reaches the page as text parts, as a streamed one does, the subagent\'s too', async () => {
    const { handler } = setup(2, 6, { streams: false });
    const chat = page(await loadSdk(6), handler, 'whole-text');
    const user = userMessage('Send 5 through research.');
    const asked = await within(chat.send([user]), 5000);
    expect(textOf(asked)).toBe('Asking research.');
    expect((asked.parts.find((p) => p.toolCallId === 'call_1_0')!.output as { text: string }).text).toBe('Worker checking the account.');
    const after = await within(chat.send([user, answered(asked, true)], answered(asked, true)), 5000);
    expect(textOf(after)).toBe('Asking research.|All done.');
    // The page and a reload agree.
    const stored = (await (await handler(new Request('http://127.0.0.1/api/chat/whole-text/messages'))).json()) as { messages: UIMessage[] };
    expect(textOf(stored.messages.at(-1)!)).toBe(textOf(after));
    expect(chat.errors).toEqual([]);
  });
});

describe('with the AI SDK\'s Chat (@ai-sdk/react 3, AI SDK 6) in Node', () => {
  it('three levels deep: the page shows the grandchild\'s approval, answers it, and the run completes', async () => {
    const { Chat } = await import('@ai-sdk/react');
    const { DefaultChatTransport, lastAssistantMessageIsCompleteWithApprovalResponses } = await import('ai-v6');
    // The AI SDK's own predicate waits for every call of the step to end: the call that runs the
    // child has not (its output is preliminary), so it never sends the answer.
    expect(lastAssistantMessageIsCompleteWithApprovalResponses({ messages: [{ id: 'a', role: 'assistant', parts: [
      { type: 'tool-research', toolCallId: 'c1', state: 'output-available', input: {}, output: { subagent: true, text: '' }, preliminary: true },
      { type: 'tool-transfer', toolCallId: 'c1/p1', state: 'approval-responded', input: {}, approval: { id: 'x', approved: true } },
    ] }] as never })).toBe(false);
    const { handler, transfers } = setup(3);
    const direct = ((input: string | URL | Request, init?: RequestInit) => handler(new Request(new URL(String(input), 'http://127.0.0.1'), init))) as typeof fetch;
    const chat = new Chat({
      id: 'team-chat-class',
      transport: new DefaultChatTransport({ api: 'http://127.0.0.1/api/chat', fetch: direct }),
      sendAutomaticallyWhen: approvalsAnswered,
    });
    await within(chat.sendMessage({ text: 'Send 5 through research.' }), 5000);
    expect(chat.error).toBeUndefined();
    expect(chat.status).toBe('ready');
    const parts = () => chat.lastMessage!.parts as unknown as UIMessage['parts'];
    const asked = parts().find((p) => p.toolCallId === 'call_1_0/call_1_0/call_1_0')!;
    expect(asked).toMatchObject({ type: 'tool-transfer', state: 'approval-requested' });
    await chat.addToolApprovalResponse({ id: asked.approval!.id, approved: true });
    // The approval sends itself (sendAutomaticallyWhen); wait for that response to end.
    const deadline = Date.now() + 5000;
    while ((chat.status !== 'ready' || parts().find((p) => p.toolCallId === 'call_1_0')?.state !== 'output-available' || parts().find((p) => p.toolCallId === 'call_1_0')?.preliminary) && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    expect(chat.error).toBeUndefined();
    expect(transfers).toEqual(['5']);
    expect(parts().find((p) => p.toolCallId === 'call_1_0/call_1_0/call_1_0')).toMatchObject({ state: 'output-available', output: 'sent 5' });
    expect(parts().find((p) => p.toolCallId === 'call_1_0')).toMatchObject({ state: 'output-available', output: 'Middle done.' });
    expect(textOf(chat.lastMessage as unknown as UIMessage)).toBe('Asking research.|All done.');
  });

  it('an answer that reaches the handler while it still holds the chat (a sibling call still runs) runs the child\'s tool', async () => {
    const { handler, transfers } = setup(2, 6, { sibling: true });
    const chat = page(await loadSdk(6), handler, 'team-live');
    const user = userMessage('Send 5 through research.');
    const first = (await chat.post({ id: 'team-live', messages: [user] })).body!.pipeThrough(new TextDecoderStream()).getReader();
    let seen = '';
    while (!seen.includes('tool-approval-request')) seen += (await within(first.read(), 5000)).value;
    // The sibling still runs: the first response has not ended.
    expect(seen).not.toContain('"finish"');
    const approvalId = /"approvalId":"([^"]+)"/.exec(seen)![1]!;
    const answer = { id: 'run-1', role: 'assistant', parts: [{ type: 'tool-transfer', toolCallId: 'call_1_0/call_1_0', state: 'approval-responded', input: { amount: 5 }, approval: { id: approvalId, approved: true } }] };
    const response = await chat.post({ id: 'team-live', messages: [user, answer] });
    expect(response.status).toBe(200);
    const rest = await within(response.text(), 5000);
    expect(transfers).toEqual(['5']);
    expect(rest).toContain('{"type":"tool-output-available","toolCallId":"call_1_0/call_1_0","output":"sent 5"}');
    expect(rest).toContain('"outcome":"Completed"');
    await first.cancel();
  });
});

/**
 * When the page sends its approval answers by itself (useChat's `sendAutomaticallyWhen`), as the
 * docs and the example page do: every request of the last step answered, at least one of them.
 */
function approvalsAnswered({ messages }: { messages: Array<{ role: string; parts: Array<{ type: string; state?: string }> }> }): boolean {
  const last = messages.at(-1);
  if (last?.role !== 'assistant') return false;
  const step = last.parts.slice(last.parts.map((part) => part.type).lastIndexOf('step-start') + 1);
  const tools = step.filter((part) => part.type.startsWith('tool-'));
  return tools.some((part) => part.state === 'approval-responded') && !tools.some((part) => part.state === 'approval-requested');
}

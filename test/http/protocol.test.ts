/**
 * The chat handler's stream, read by each AI SDK version's own client code: its
 * DefaultChatTransport (which parses the SSE and checks every chunk against that version's
 * schema) and its readUIMessageStream. Text, tools, errors, approvals (approve, deny, a forged
 * one), reattaching to a run in flight. AI SDK 7 needs Node 22 (CI's Node 24 leg runs it).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createChatHandler, type ChatHandler } from '../../src/http.js';
import { calculatorTool, createAgentMachine, MemorySessionStore } from '../../src/index.js';
import { scriptedModel } from '../../src/testing.js';
import { chatAgent } from './fixtures/chat-agent.js';
import { loadSdk, nodeMajor, page, textOf, userMessage, answered } from './support.js';

const handlers: ChatHandler[] = [];
afterEach(async () => {
  await Promise.all(handlers.splice(0).map((handler) => handler.close()));
});

function setup(version: 5 | 6 | 7, script: Parameters<typeof chatAgent>[0], options: Parameters<typeof chatAgent>[1] = {}) {
  const store = new MemorySessionStore();
  const agent = chatAgent(script, options);
  const handler = createChatHandler({ machine: agent.machine, store, aiSdk: version });
  handlers.push(handler);
  return { store, handler, ...agent };
}

const ANSWER = 'The answer, streamed in several deltas, is forty-two.';

for (const version of [5, 6, 7] as const) {
  describe.skipIf(version === 7 && nodeMajor < 22)(`AI SDK ${version}`, async () => {
    const sdk = version === 7 && nodeMajor < 22 ? undefined : await loadSdk(version);

    it('a text reply: one assistant message with the streamed text, usage as metadata', async () => {
      const { handler } = setup(version, [{ text: ANSWER, usage: { inputTokens: 11, outputTokens: 7 } }]);
      const chat = page(sdk!, handler, 'text-chat');
      const message = await chat.send([userMessage('What is it?')]);
      expect(message.role).toBe('assistant');
      expect(message.id).toBe('run-1');
      expect(textOf(message)).toBe(ANSWER);
      expect(message.parts.map((p) => p.type)).toEqual(['step-start', 'text']);
      expect(message.metadata).toEqual({ run: 1, outcome: 'Completed', usage: { inputTokens: 11, outputTokens: 7 } });
      expect(chat.errors).toEqual([]);
    });

    it('tool calls: each with its input and output, one step per model turn', async () => {
      const { handler } = setup(version, [{ text: 'Let me compute.', toolCalls: [{ name: 'calculator', args: { expression: '6*7' } }] }, { text: 'It is 42.' }]);
      const chat = page(sdk!, handler, 'tool-chat');
      const message = await chat.send([userMessage('6 times 7?')]);
      expect(message.parts.map((p) => p.type)).toEqual(['step-start', 'text', 'tool-calculator', 'step-start', 'text']);
      const tool = message.parts[2]!;
      expect(tool).toMatchObject({ state: 'output-available', input: { expression: '6*7' }, output: '42', toolCallId: 'call_1_0' });
      expect(textOf(message)).toBe('Let me compute.|It is 42.');
    });

    it('a failed run: the error reaches the page, the finish says Failed', async () => {
      const { handler } = setup(version, [{ error: { message: 'the provider said no', status: 400 } }]);
      const chat = page(sdk!, handler, 'failing-chat');
      const message = await chat.send([userMessage('Hello?')]);
      expect(chat.errors).toEqual(['ModelError: the provider said no']);
      expect(message.metadata?.outcome).toBe('Failed');
    });

    it('a sealed run: the finish says Sealed and why, for the page to show', async () => {
      const machine = createAgentMachine({
        model: scriptedModel([{ toolCalls: [{ name: 'calculator', args: { expression: '1+1' } }] }, { toolCalls: [{ name: 'calculator', args: { expression: '2+2' } }] }, { text: 'never' }]),
        tools: [calculatorTool()],
        budget: { maxToolCalls: 1 },
      });
      const handler = createChatHandler({ machine, store: new MemorySessionStore(), aiSdk: version });
      handlers.push(handler);
      const message = await page(sdk!, handler, 'sealed-chat').send([userMessage('Add twice.')]);
      expect(message.metadata).toMatchObject({ run: 1, outcome: 'Sealed', reason: expect.stringMatching(/^budget: .*tool call/) });
    });

    it('a tool error is the part output-error with the message', async () => {
      const { handler } = setup(version, [{ toolCalls: [{ name: 'calculator', args: { expression: '1/0' } }] }, { text: 'Cannot.' }]);
      const message = await page(sdk!, handler, 'tool-error').send([userMessage('1/0?')]);
      expect(message.parts[1]).toMatchObject({ type: 'tool-calculator', state: 'output-error' });
      expect(message.parts[1]!.errorText).toMatch(/zero/i);
    });

    it('a second tab (or a reload) reattaches to the run in flight and gets the whole message once', async () => {
      // The second answer waits until the second tab follows the run: a fixed sleep before the
      // reattach missed the run on a loaded machine (it had ended, or not reached the answer yet).
      let asked = false;
      let release!: () => void;
      const released = new Promise<void>((resolve) => (release = resolve));
      const answer = async () => ((asked = true), await released, { text: ANSWER, delayMs: 100 });
      const { handler } = setup(version, [{ text: 'First.', toolCalls: [{ name: 'calculator', args: { expression: '2+2' } }] }, answer]);
      const first = page(sdk!, handler, 'two-tabs');
      const done = first.send([userMessage('Go.')]);
      await expect.poll(() => asked, { timeout: 5_000 }).toBe(true);
      const reattached = page(sdk!, handler, 'two-tabs').resume();
      await expect.poll(() => handler.stats().clients, { timeout: 5_000 }).toBe(2);
      release();
      const second = await reattached;
      const whole = await done;
      expect(second).not.toBeNull();
      expect(textOf(second!)).toBe(textOf(whole));
      expect(second!.parts.map((p) => p.type)).toEqual(whole.parts.map((p) => p.type));
      expect(second!.metadata?.outcome).toBe('Completed');
      // Nothing in flight any more.
      expect(await page(sdk!, handler, 'two-tabs').resume()).toBeNull();
    });
  });
}

describe.each([6, 7] as const)('approvals, AI SDK %s', (version) => {
  const skip = version === 7 && nodeMajor < 22;
  const approvalScript = [{ text: 'I will send it.', toolCalls: [{ name: 'transfer', args: { amount: 5 } }] }, { text: 'Done.' }];

  async function requested(script: Parameters<typeof chatAgent>[0], chatId: string) {
    const sdk = await loadSdk(version);
    const env = setup(version, script);
    const chat = page(sdk, env.handler, chatId);
    const user = userMessage('Send 5.');
    const asked = await chat.send([user]);
    return { ...env, chat, user, asked };
  }


  it.skipIf(skip)('a call that needs approval is an approval request; the approval runs the tool once and the run goes on', async () => {
    const { chat, user, asked, transfers } = await requested(approvalScript, 'approve-chat');
    const part = asked.parts.find((p) => p.type === 'tool-transfer')!;
    expect(part).toMatchObject({ state: 'approval-requested', input: { amount: 5 } });
    expect(part.approval!.id).toMatch(/^1:[0-9a-f]{64}:call_1_0$/);
    expect(asked.metadata?.outcome).toBe('waiting');
    // The approval is answered through its request, not as an operation the page resumes (that route refuses 'approvals').
    expect(asked.parts.map((p) => p.type)).not.toContain('data-operation-yielded');
    expect(transfers).toEqual([]);
    const after = await chat.send([user, answered(asked, true)], answered(asked, true));
    expect(transfers).toEqual(['5']);
    expect(after.parts.find((p) => p.type === 'tool-transfer')).toMatchObject({ state: 'output-available', output: 'sent 5' });
    expect(textOf(after)).toBe('I will send it.|Done.');
    expect(after.metadata?.outcome).toBe('Completed');
  });

  it.skipIf(skip)('a denial reaches the model as the call\'s result, and the part is output-denied', async () => {
    const seen: string[] = [];
    const { chat, user, asked, transfers } = await requested(
      [
        approvalScript[0]!,
        (request) => {
          seen.push(...request.messages.filter((m) => m.role === 'tool').map((m) => m.content));
          return { text: 'Not sent.' };
        },
      ],
      'deny-chat',
    );
    const after = await chat.send([user, answered(asked, false)], answered(asked, false));
    expect(transfers).toEqual([]);
    expect(seen).toEqual(['denied: the user did not approve this tool call']);
    expect(after.parts.find((p) => p.type === 'tool-transfer')!.state).toBe('output-denied');
  });

  it.skipIf(skip)('the approval may reach another process: the waiting session was let go, the other opens it from the store', async () => {
    const { user, asked, store, transfers } = await requested(approvalScript, 'elsewhere');
    const other = chatAgent(approvalScript);
    const handler = createChatHandler({ machine: other.machine, store, aiSdk: version });
    handlers.push(handler);
    const after = await page(await loadSdk(version), handler, 'elsewhere').send([user, answered(asked, true)], answered(asked, true));
    expect(transfers).toEqual([]);
    expect(other.transfers).toEqual(['5']);
    expect(textOf(after)).toBe('I will send it.|Done.');
  });

  it.skipIf(skip)('a forged approval (a call that does not wait, another run) is refused and nothing stored changes', async () => {
    const { chat, user, asked, store, transfers } = await requested(approvalScript, 'forged-chat');
    const before = { row: await store.load('forged-chat'), trace: await store.readTrace('forged-chat') };
    const shown = asked.parts.find((p) => p.state === 'approval-requested')!.approval!.id;
    const digest = shown.split(':')[1]!;
    const otherDigest = digest.replace(/^./, (c) => (c === '0' ? '1' : '0'));
    for (const id of [`1:${digest}:call_nope`, `2:${digest}:call_1_0`, `1:${otherDigest}:call_1_0`, '1:call_1_0', 'call_1_0']) {
      const forged = { ...asked, parts: asked.parts.map((p) => (p.state === 'approval-requested' ? { ...p, state: 'approval-responded', approval: { id, approved: true } } : p)) };
      const response = await chat.post({ id: 'forged-chat', messages: [user, forged] });
      expect(response.status, id).toBe(409);
      expect(((await response.json()) as { error: { code: string } }).error.code).toBe('ApprovalNotFound');
    }
    expect({ row: await store.load('forged-chat'), trace: await store.readTrace('forged-chat') }).toEqual(before);
    expect(transfers).toEqual([]);
  });
});

describe('approvals, AI SDK 5 (a data part, answered beside the messages)', () => {
  it('the request is a data-approval-request part; `approvals` in the body answers it', async () => {
    const sdk = await loadSdk(5);
    const { handler, transfers } = setup(5, [{ toolCalls: [{ name: 'transfer', args: { amount: 3 } }] }, { text: 'Sent.' }]);
    const chat = page(sdk, handler, 'v5-approval');
    const user = userMessage('Send 3.');
    const asked = await chat.send([user]);
    const request = asked.parts.find((p) => p.type === 'data-approval-request')!;
    expect(request.data).toMatchObject({ toolCallId: 'call_1_0', toolName: 'transfer', input: { amount: 3 } });
    const approvalId = String(request.data!.approvalId);
    expect(approvalId).toMatch(/^1:[0-9a-f]{64}:call_1_0$/);
    expect(asked.parts.map((p) => p.type)).not.toContain('data-operation-yielded');
    const transport = new sdk.DefaultChatTransport({
      api: 'http://127.0.0.1/api/chat',
      fetch: ((input: string, init?: RequestInit) => handler(new Request(input, init))) as typeof fetch,
      body: { approvals: [{ approvalId, approved: true }] },
    });
    const after = await chat.read(await transport.sendMessages({ chatId: 'v5-approval', messages: [user, asked], trigger: 'submit-message', messageId: undefined, abortSignal: undefined }), asked);
    expect(transfers).toEqual(['3']);
    expect(after.parts.find((p) => p.type === 'tool-transfer')).toMatchObject({ state: 'output-available', output: 'sent 3' });
  });
});

/**
 * A user callback's answer is read inside the try, whatever it is: an object whose getter throws,
 * a Proxy whose traps throw. Such an answer is a bad answer like any other: approve's denies the
 * call (the model reads why), a tool policy's fails the run `ToolPolicyError`, a guardrail's
 * `GuardrailError`, an operation's `OperationError` naming it. Before, zod's safeParse ran outside
 * the try and let the getter's throw out: for approve an unhandled rejection that ended the Node
 * process with exit code 1 (with a handler installed, runAgent never settled); for a policy, a
 * guardrail or prepareRequest the run ended on some other failure type.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineTool, runAgent, type Operation, type ToolMessage } from '../../../src/index.js';
import { scriptedModel } from '../../../src/testing.js';

/** An object whose every read throws (a Proxy), and one whose `key` getter throws. */
const hostile = () =>
  new Proxy({}, {
    get: () => {
      throw new Error('trap: get');
    },
    ownKeys: () => {
      throw new Error('trap: ownKeys');
    },
    has: () => {
      throw new Error('trap: has');
    },
    getOwnPropertyDescriptor: () => {
      throw new Error('trap: descriptor');
    },
  });
const throwingGetter = <T extends object>(base: T, key: string): T =>
  Object.defineProperty({ ...base }, key, {
    enumerable: true,
    get: () => {
      throw new Error(`getter: ${key}`);
    },
  });

/** Settles within `ms` or fails the test: the point is that nothing waits forever. */
async function within<T>(ms: number, promise: Promise<T>): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([promise, new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`still waiting after ${ms} ms`)), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

// Counted here as a process would see them: one of these is what exited the process with code 1.
const rejections: unknown[] = [];
const onRejection = (reason: unknown) => rejections.push(reason);
beforeEach(() => {
  rejections.length = 0;
  process.on('unhandledRejection', onRejection);
});
afterEach(() => {
  process.off('unhandledRejection', onRejection);
});

function deleting() {
  const effects = { runs: 0 };
  const rm = defineTool({
    name: 'rm',
    description: 'Deletes a file.',
    input: z.object({ path: z.string() }),
    needsApproval: true,
    execute: () => (effects.runs++, 'deleted'),
  });
  return { effects, options: { model: scriptedModel([{ toolCalls: [{ name: 'rm', args: { path: 'a.txt' } }] }, { text: 'done' }]), tools: [rm], prompt: 'Delete a.txt.' } };
}

const toolResult = (messages: readonly { role: string }[]) => messages.find((message): message is ToolMessage => message.role === 'tool')!;

describe("approve's answer is read inside the try", () => {
  it.each([
    ['an approved getter that throws', () => throwingGetter({ approved: true }, 'approved'), 'getter: approved'],
    ['a Proxy whose traps throw', () => hostile(), 'trap:'],
    ['a promise of a getter that throws', async () => throwingGetter({ approved: true }, 'approved'), 'getter: approved'],
  ])('%s denies the call with the reason, and no rejection goes unhandled', async (_, approve, reason) => {
    const { effects, options } = deleting();
    const result = await within(5_000, runAgent({ ...options, approve: approve as never }));
    expect(result.outcome).toMatchObject({ type: 'Completed', finalText: 'done' });
    expect(effects.runs).toBe(0);
    expect(toolResult(result.messages)).toMatchObject({ isError: true, content: expect.stringContaining(reason) });
    // Give a stray rejection its turn to surface before counting.
    await new Promise((resolve) => setImmediate(resolve));
    expect(rejections).toEqual([]);
  });
});

describe('every other user callback: an unreadable answer fails the run with its own typed error', () => {
  const echo = defineTool({ name: 'echo', description: 'Echoes.', input: z.object({ text: z.string() }), execute: ({ text }) => text });
  const callsEcho = () => scriptedModel([{ toolCalls: [{ name: 'echo', args: { text: 'hi' } }] }, { text: 'done' }]);

  it("a tool policy's deny whose reason cannot be read is ToolPolicyError, and no call runs", async () => {
    const result = await within(5_000, runAgent({ model: callsEcho(), tools: [echo], prompt: 'Echo.', toolPolicy: () => throwingGetter({ type: 'deny' as const, reason: 'x' }, 'reason') }));
    expect(result.outcome).toMatchObject({ type: 'Failed', error: { type: 'ToolPolicyError', message: expect.stringContaining('getter: reason') } });
    expect(result.messages.some((message) => message.role === 'tool' && !message.isError)).toBe(false);
  });

  it("a tool policy's verdict that is a throwing Proxy is ToolPolicyError", async () => {
    const result = await within(5_000, runAgent({ model: callsEcho(), tools: [echo], prompt: 'Echo.', toolPolicy: () => hostile() as never }));
    expect(result.outcome).toMatchObject({ type: 'Failed', error: { type: 'ToolPolicyError' } });
  });

  it("a guardrail's verdict whose type cannot be read is GuardrailError naming it", async () => {
    const guard = { name: 'sly', check: () => throwingGetter({ type: 'pass' as const }, 'type') };
    const result = await within(5_000, runAgent({ model: scriptedModel([{ text: 'hello' }]), prompt: 'Hi.', guardrails: { input: [guard] } }));
    expect(result.outcome).toMatchObject({ type: 'Failed', error: { type: 'GuardrailError', message: expect.stringContaining("'sly'") } });
  });

  it("a prepareRequest whose result throws when read is OperationError naming the operation (not ModelError)", async () => {
    const rewrite: Operation = { name: 'rewrite', prepareRequest: (request) => throwingGetter(request, 'messages') };
    const result = await within(5_000, runAgent({ model: scriptedModel([{ text: 'hello' }]), prompt: 'Hi.', operations: [rewrite] }));
    expect(result.outcome).toMatchObject({ type: 'Failed', error: { type: 'OperationError', message: expect.stringContaining("operation 'rewrite' prepareRequest") } });
    expect(result.outcome.type === 'Failed' && result.outcome.error.message).toContain('getter: messages');
  });

  it('a prepareRequest that returns a throwing Proxy is OperationError', async () => {
    const rewrite: Operation = { name: 'rewrite', prepareRequest: () => hostile() as never };
    const result = await within(5_000, runAgent({ model: scriptedModel([{ text: 'hello' }]), prompt: 'Hi.', operations: [rewrite] }));
    expect(result.outcome).toMatchObject({ type: 'Failed', error: { type: 'OperationError' } });
  });

  it("an operation hook's effects whose state cannot be read are OperationError naming the hook", async () => {
    const counter: Operation<{ n: number }> = {
      name: 'counter',
      state: { schema: z.object({ n: z.number() }), initial: { n: 0 } },
      beforeModelCall: () => ({ state: throwingGetter({ n: 1 }, 'n') }),
    };
    const result = await within(5_000, runAgent({ model: scriptedModel([{ text: 'hello' }]), prompt: 'Hi.', operations: [counter as Operation] }));
    expect(result.outcome).toMatchObject({ type: 'Failed', error: { type: 'OperationError', message: expect.stringContaining("operation 'counter' beforeModelCall") } });
  });
});

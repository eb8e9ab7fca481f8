import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { PendingToolCall, ToolCall } from '../../src/schemas.js';
import { defineTool } from '../../src/tools/define-tool.js';
import { runToolCalls } from '../../src/tools/run-tools.js';

const key = (call: ToolCall) => call.id;
const pending = (id: string, name: string, args: unknown = {}): PendingToolCall => ({ call: { id, name, args } });

function thrower(name: string, make: () => unknown) {
  return defineTool({
    name,
    description: '',
    input: z.object({}),
    execute: async () => {
      throw make();
    },
  });
}

describe('any thrown value becomes an error result, never a hang', () => {
  const hostile: Array<[string, () => unknown]> = [
    [
      'an Error whose message getter throws',
      () => {
        const error = new Error('hidden');
        Object.defineProperty(error, 'message', {
          get() {
            throw new Error('no message for you');
          },
        });
        return error;
      },
    ],
    [
      'a Proxy whose every trap throws',
      () =>
        new Proxy(
          {},
          {
            get: () => {
              throw new Error('get');
            },
            getPrototypeOf: () => {
              throw new Error('getPrototypeOf');
            },
          },
        ),
    ],
    ['a revoked Proxy', () => {
      const { proxy, revoke } = Proxy.revocable({}, {});
      revoke();
      return proxy;
    }],
    ['an Error with an empty message and a non-string name', () => Object.assign(new Error(''), { name: 42 })],
  ];

  it.each(hostile)('%s', async (_, make) => {
    const results = await runToolCalls([pending('1', 'bad'), pending('2', 'fine')], [thrower('bad', make), defineTool({ name: 'fine', description: '', input: z.object({}), execute: () => 'ok' })], {
      idempotencyKey: key,
    });
    expect(results[0]).toMatchObject({ toolCallId: '1', isError: true });
    expect(typeof results[0]!.content).toBe('string');
    expect(results[1]).toMatchObject({ toolCallId: '2', content: 'ok' });
  });

  it('a tool schema whose refinement throws is an error result for that call only', async () => {
    const picky = defineTool({
      name: 'picky',
      description: '',
      input: z.object({ n: z.number() }).refine(() => {
        throw new Error('refinement exploded');
      }),
      execute: () => 'never',
    });
    const results = await runToolCalls([pending('1', 'picky', { n: 1 })], [picky], { idempotencyKey: key });
    expect(results[0]).toMatchObject({ isError: true, content: 'tool "picky" failed validating its arguments: refinement exploded' });
  });
});

describe('every tool call has a timeout unless one is switched off explicitly', () => {
  const hang = (timeoutMs?: number) =>
    defineTool({ name: 'hang', description: '', input: z.object({}), ...(timeoutMs !== undefined && { timeoutMs }), execute: () => new Promise(() => {}) });

  it('a tool with no timeout of its own gets the batch default', async () => {
    const results = await runToolCalls([pending('1', 'hang')], [hang()], { idempotencyKey: key, defaultTimeoutMs: 50 });
    expect(results[0]).toMatchObject({ isError: true, content: 'tool "hang" timed out after 50 ms' });
  });

  it('a tool’s own timeout wins over the default, and Infinity turns it off for that tool', async () => {
    const own = await runToolCalls([pending('1', 'hang')], [hang(30)], { idempotencyKey: key, defaultTimeoutMs: 10_000 });
    expect(own[0]).toMatchObject({ content: 'tool "hang" timed out after 30 ms' });

    const controller = new AbortController();
    const unbounded = runToolCalls([pending('1', 'hang')], [hang(Infinity)], { idempotencyKey: key, defaultTimeoutMs: 30, signal: controller.signal });
    const early = await Promise.race([unbounded.then(() => 'settled'), new Promise((r) => setTimeout(() => r('still running'), 150))]);
    expect(early).toBe('still running');
    controller.abort();
    expect((await unbounded)[0]).toMatchObject({ isError: true, content: expect.stringContaining('interrupted') });
  });

  it('a nonsense timeout is refused, not read as "none"', async () => {
    expect(() => defineTool({ name: 't', description: '', input: z.object({}), timeoutMs: 0, execute: () => '' })).toThrow();
    expect(() => defineTool({ name: 't', description: '', input: z.object({}), timeoutMs: Number.NaN, execute: () => '' })).toThrow();
    await expect(runToolCalls([], [], { idempotencyKey: key, defaultTimeoutMs: -1 })).rejects.toThrow(RangeError);
  });
});

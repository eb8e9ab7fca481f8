import { getEventListeners } from 'node:events';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { PendingToolCall, ToolCall, ToolMessage } from '../../src/schemas.js';
import { defineTool, ToolSet, type Tool, type ToolContext } from '../../src/tools/define-tool.js';
import { INTERRUPTED_CONTENT, runToolCall, runToolCalls } from '../../src/tools/run-tools.js';

/** What a call the cancel reached before its execute began reads. */
const NOT_RUN = 'interrupted: the run was cancelled before this tool call started; it did not run';

const key = (call: ToolCall) => `run1:${call.id}`;
const pending = (id: string, name: string, args: unknown): PendingToolCall => ({ call: { id, name, args } });

function deferred<T>() {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

/** A tool named 'slow' that never resolves on its own (only its timeout ends it), handing `seen` its context. */
const endlessTool = (timeoutMs: number, seen: (ctx: ToolContext) => unknown) =>
  defineTool({
    name: 'slow',
    description: '',
    input: z.object({}),
    timeoutMs,
    execute: (_args, ctx) => {
      seen(ctx);
      return new Promise(() => {});
    },
  });

/** A tool whose calls finish only when the test says so, recording how many run at once. */
function gatedTool() {
  const gates = new Map<string, ReturnType<typeof deferred<string>>>();
  const signals = new Map<string, AbortSignal>();
  let active = 0;
  let maxActive = 0;
  const started: string[] = [];
  const tool = defineTool({
    name: 'gated',
    description: 'waits for the test',
    input: z.object({ label: z.string() }),
    async execute({ label }, { toolCallId, signal }) {
      started.push(toolCallId);
      signals.set(toolCallId, signal);
      active++;
      maxActive = Math.max(maxActive, active);
      const gate = deferred<string>();
      gates.set(toolCallId, gate);
      try {
        return `${label}:${await gate.promise}`;
      } finally {
        active--;
      }
    },
  });
  return {
    tool,
    started,
    signals,
    get maxActive() {
      return maxActive;
    },
    open: (id: string, value = 'done') => gates.get(id)!.resolve(value),
  };
}

const tick = () => new Promise((r) => setTimeout(r, 0));

describe('runToolCalls', () => {
  it('observes the concurrency limit and returns results in call order despite out-of-order completion', async () => {
    const gated = gatedTool();
    const calls = Array.from({ length: 7 }, (_, i) => pending(`c${i}`, 'gated', { label: `L${i}` }));
    const run = runToolCalls(calls, [gated.tool], { concurrency: 3, idempotencyKey: key });

    await tick();
    expect(gated.started).toEqual(['c0', 'c1', 'c2']);
    // Finish in reverse: each freed slot takes the next waiting call.
    gated.open('c2');
    await tick();
    expect(gated.started).toEqual(['c0', 'c1', 'c2', 'c3']);
    for (const id of ['c3', 'c1', 'c0']) gated.open(id);
    await tick();
    for (const id of ['c6', 'c5', 'c4']) gated.open(id);

    const results = await run;
    expect(gated.maxActive).toBe(3);
    expect(results.map((r) => r.toolCallId)).toEqual(calls.map((c) => c.call.id));
    expect(results.map((r) => r.content)).toEqual(calls.map((_, i) => `L${i}:done`));
    expect(results.every((r) => r.isError === undefined && r.role === 'tool' && r.toolName === 'gated')).toBe(true);
  });

  it('defaults to 4 at once', async () => {
    const gated = gatedTool();
    const calls = Array.from({ length: 6 }, (_, i) => pending(`c${i}`, 'gated', { label: 'x' }));
    const run = runToolCalls(calls, [gated.tool], { idempotencyKey: key });
    await tick();
    expect(gated.started).toHaveLength(4);
    for (let round = 0; round < 2; round++) {
      for (const c of calls) if (gated.started.includes(c.call.id)) gated.open(c.call.id);
      await tick();
    }
    await run;
    expect(gated.maxActive).toBe(4);
  });

  it('returns pre-answered calls as they are, without running or announcing them', async () => {
    const ran: string[] = [];
    const finished: string[] = [];
    const tool = defineTool({
      name: 'note',
      description: '',
      input: z.object({}),
      execute: (_args, { toolCallId }) => {
        ran.push(toolCallId);
        return 'noted';
      },
    });
    const preAnswered: ToolMessage = {
      role: 'tool',
      toolCallId: 'b',
      toolName: 'nope',
      content: 'unknown tool',
      isError: true,
    };
    const results = await runToolCalls(
      [pending('a', 'note', {}), { call: { id: 'b', name: 'nope', args: {} }, preAnswered }, pending('c', 'note', {})],
      [tool],
      { idempotencyKey: key, onFinish: (call) => finished.push(call.id) },
    );
    expect(ran).toEqual(['a', 'c']);
    expect(results[1]).toBe(preAnswered);
    expect(finished.sort()).toEqual(['a', 'c']);
  });

  it('passes the tool call id and the idempotency key to the tool', async () => {
    const seen: unknown[] = [];
    const tool = defineTool({
      name: 'spy',
      description: '',
      input: z.object({}),
      execute: (_args, ctx) => {
        seen.push({ id: ctx.toolCallId, key: ctx.idempotencyKey, aborted: ctx.signal.aborted });
      },
    });
    const [result] = await runToolCalls([pending('x1', 'spy', {})], [tool], { idempotencyKey: key });
    expect(seen).toEqual([{ id: 'x1', key: 'run1:x1', aborted: false }]);
    // A tool that returns nothing gives an empty, successful result.
    expect(result).toEqual({ role: 'tool', toolCallId: 'x1', toolName: 'spy', content: '' });
  });

  it('stringifies non-string results as JSON', async () => {
    const tool = defineTool({ name: 'obj', description: '', input: z.object({}), execute: () => ({ a: [1, 'b'], n: null }) });
    const [result] = await runToolCalls([pending('1', 'obj', {})], [tool], { idempotencyKey: key });
    expect(result!.content).toBe('{"a":[1,"b"],"n":null}');
  });

  it('turns a result with no JSON form into an error result', async () => {
    const tool = defineTool({ name: 'big', description: '', input: z.object({}), execute: () => ({ n: 1n }) });
    const [result] = await runToolCalls([pending('1', 'big', {})], [tool], { idempotencyKey: key });
    expect(result).toMatchObject({ isError: true, content: expect.stringMatching(/no JSON form.*BigInt/) });
  });

  it('names every zod issue with its path when the arguments are invalid', async () => {
    let ran = false;
    const tool = defineTool({
      name: 'search',
      description: '',
      input: z.object({ query: z.string(), limit: z.number().int().max(50), tags: z.array(z.string()).optional() }),
      execute: () => {
        ran = true;
      },
    });
    const [result] = await runToolCalls([pending('s1', 'search', { limit: 500, tags: ['ok', 3] })], [tool], {
      idempotencyKey: key,
    });
    expect(ran).toBe(false);
    expect(result).toEqual({
      role: 'tool',
      toolCallId: 's1',
      toolName: 'search',
      isError: true,
      content: [
        'invalid arguments for tool "search":',
        '- query: Invalid input: expected string, received undefined',
        '- limit: Too big: expected number to be <=50',
        '- tags[1]: Invalid input: expected string, received number',
      ].join('\n'),
    });
  });

  it('names the whole arguments value when it is not an object at all', async () => {
    const tool = defineTool({ name: 't', description: '', input: z.object({ a: z.string() }), execute: () => '' });
    const [result] = await runToolCalls([pending('1', 't', 'a string')], [tool], { idempotencyKey: key });
    expect(result!.content).toContain('- (arguments): Invalid input: expected object');
  });

  it('answers a call to a tool it does not have with an error naming the available tools', async () => {
    const tool = defineTool({ name: 'known', description: '', input: z.object({}), execute: () => '' });
    const [result] = await runToolCalls([pending('1', 'ghost', {})], [tool], { idempotencyKey: key });
    expect(result).toMatchObject({ isError: true, content: 'unknown tool "ghost"; available tools: known' });
  });

  it('turns a throw (async or sync) into an error result with the message, and keeps going', async () => {
    const asyncThrow = defineTool({
      name: 'boom',
      description: '',
      input: z.object({}),
      execute: async () => {
        throw new Error('disk on fire');
      },
    });
    const syncThrow: Tool = defineTool({
      name: 'sync_boom',
      description: '',
      input: z.object({}),
      execute: () => {
        throw 'plain string';
      },
    });
    const fine = defineTool({ name: 'fine', description: '', input: z.object({}), execute: () => 'ok' });
    const results = await runToolCalls(
      [pending('1', 'boom', {}), pending('2', 'sync_boom', {}), pending('3', 'fine', {})],
      [asyncThrow, syncThrow, fine],
      { idempotencyKey: key },
    );
    expect(results.map((r) => [r.content, r.isError])).toEqual([
      ['disk on fire', true],
      ['plain string', true],
      ['ok', undefined],
    ]);
  });

  it('times out a slow tool, aborts its signal and frees its slot', async () => {
    let signal: AbortSignal | undefined;
    const slow = endlessTool(30, (ctx) => (signal = ctx.signal));
    const fast = defineTool({ name: 'fast', description: '', input: z.object({}), execute: () => 'quick' });
    const started = Date.now();
    const results = await runToolCalls([pending('1', 'slow', {}), pending('2', 'fast', {})], [slow, fast], {
      concurrency: 1,
      idempotencyKey: key,
    });
    expect(Date.now() - started).toBeGreaterThanOrEqual(25);
    expect(results[0]).toMatchObject({ isError: true, content: 'tool "slow" timed out after 30 ms' });
    expect(results[1]).toMatchObject({ content: 'quick' });
    expect(signal!.aborted).toBe(true);
    expect((signal!.reason as DOMException).name).toBe('TimeoutError');
  });

  it("hands a tool a context whose signal, read late or spread, is the call's own and carries its timeout", async () => {
    let ctx: ToolContext | undefined;
    // Keeps the context but reads nothing of it until the call has timed out.
    const slow = endlessTool(20, (context) => (ctx = context));
    const [result] = await runToolCalls([pending('1', 'slow', {})], [slow], { idempotencyKey: key });
    expect(result).toMatchObject({ isError: true, content: 'tool "slow" timed out after 20 ms' });
    const spread = { ...ctx! };
    expect(Object.keys(spread).sort()).toEqual(['idempotencyKey', 'signal', 'toolCallId']);
    expect(spread.signal).toBeInstanceOf(AbortSignal);
    expect(spread.signal).toBe(ctx!.signal);
    expect(ctx!.signal.aborted).toBe(true);
    expect((ctx!.signal.reason as DOMException).name).toBe('TimeoutError');
    expect(spread).toMatchObject({ toolCallId: '1', idempotencyKey: 'run1:1' });
  });

  // A getter written in the context's literal was a new function per call, and V8 gave every
  // context a dictionary of its own (a hidden class made per call, in the old generation).
  it('gives every context the same signal getter, and makes no signal the tool does not read', async () => {
    const contexts: ToolContext[] = [];
    const keep = defineTool({ name: 'keep', description: 'Keeps its context.', input: z.object({}), execute: (_, ctx) => void contexts.push(ctx) });
    await runToolCalls([pending('1', 'keep', {}), pending('2', 'keep', {})], [keep], { idempotencyKey: key });
    const [first, second] = contexts.map((ctx) => Object.getOwnPropertyDescriptor(ctx, 'signal')!);
    expect(first!.enumerable).toBe(true);
    expect(first!.get).toBeTypeOf('function');
    expect(first!.get).toBe(second!.get);
    expect(contexts[0]!.signal).not.toBe(contexts[1]!.signal);
  });

  it('on abort mid-batch: aborts in-flight tools, interrupts every unanswered call, still resolves', async () => {
    const gated = gatedTool();
    const controller = new AbortController();
    const started: string[] = [];
    const finished: Array<[string, string]> = [];
    const calls = Array.from({ length: 5 }, (_, i) => pending(`c${i}`, 'gated', { label: `L${i}` }));
    const run = runToolCalls(calls, [gated.tool], {
      concurrency: 2,
      signal: controller.signal,
      idempotencyKey: key,
      onStart: (call) => started.push(call.id),
      onFinish: (call, result) => finished.push([call.id, result.content]),
    });
    await tick();
    gated.open('c0');
    await tick();
    // c0 done, c1 and c2 in flight, c3 and c4 waiting.
    expect(finished).toEqual([['c0', 'L0:done']]);
    controller.abort();
    const results = await run;

    expect(gated.signals.get('c1')!.aborted).toBe(true);
    expect(gated.signals.get('c2')!.aborted).toBe(true);
    expect(results.map((r) => r.toolCallId)).toEqual(['c0', 'c1', 'c2', 'c3', 'c4']);
    expect(results[0]).toMatchObject({ content: 'L0:done' });
    expect(results[0]!.isError).toBeUndefined();
    // c1 and c2 were running (they may have partly run); c3 and c4 never started.
    for (const result of results.slice(1, 3)) expect(result).toMatchObject({ isError: true, content: INTERRUPTED_CONTENT });
    for (const result of results.slice(3)) expect(result).toMatchObject({ isError: true, content: NOT_RUN });
    expect(started).toEqual(['c0', 'c1', 'c2']);
    // onFinish fired once per result, at once for the ones that existed before the abort.
    expect(finished.map(([id]) => id).sort()).toEqual(['c0', 'c1', 'c2', 'c3', 'c4']);

    // A tool finishing after the abort changes nothing.
    gated.open('c1');
    await tick();
    expect(finished).toHaveLength(5);
  });

  it('cancels a wide batch through one abort listener: no listener-leak warning past 10 calls', async () => {
    const warnings: Error[] = [];
    const onWarning = (warning: Error) => warnings.push(warning);
    process.on('warning', onWarning);
    try {
      const gated = gatedTool();
      const controller = new AbortController();
      const calls = Array.from({ length: 16 }, (_, i) => pending(`c${i}`, 'gated', { label: 'x' }));
      const run = runToolCalls(calls, [gated.tool], { concurrency: 16, signal: controller.signal, idempotencyKey: key });
      await tick();
      expect(gated.started).toHaveLength(16);
      controller.abort();
      const results = await run;
      expect(results.every((r) => r.content === INTERRUPTED_CONTENT)).toBe(true);
      expect([...gated.signals.values()].every((s) => s.aborted)).toBe(true);
      await tick();
      expect(warnings.filter((w) => w.name === 'MaxListenersExceededWarning')).toEqual([]);
    } finally {
      process.off('warning', onWarning);
    }
  });

  it('runs nothing when the signal is already aborted', async () => {
    const gated = gatedTool();
    const results = await runToolCalls([pending('1', 'gated', { label: 'x' })], [gated.tool], {
      signal: AbortSignal.abort(),
      idempotencyKey: key,
    });
    expect(gated.started).toEqual([]);
    expect(results).toEqual([
      { role: 'tool', toolCallId: '1', toolName: 'gated', isError: true, content: NOT_RUN },
    ]);
  });

  it('fires onFinish the moment each result exists, before the batch ends', async () => {
    const gated = gatedTool();
    const finished: string[] = [];
    const run = runToolCalls([pending('a', 'gated', { label: 'a' }), pending('b', 'gated', { label: 'b' })], [gated.tool], {
      idempotencyKey: key,
      onFinish: (call) => finished.push(call.id),
    });
    await tick();
    gated.open('b');
    await tick();
    expect(finished).toEqual(['b']);
    gated.open('a');
    await run;
    expect(finished).toEqual(['b', 'a']);
  });

  it('completes every call before surfacing an error thrown by a hook', async () => {
    const ran: string[] = [];
    const tool = defineTool({
      name: 't',
      description: '',
      input: z.object({}),
      execute: (_a, { toolCallId }) => {
        ran.push(toolCallId);
        return 'ok';
      },
    });
    const journalDown = new Error('journal unavailable');
    await expect(
      runToolCalls([pending('1', 't', {}), pending('2', 't', {})], [tool], {
        idempotencyKey: key,
        onFinish: () => {
          throw journalDown;
        },
      }),
    ).rejects.toBe(journalDown);
    expect(ran).toEqual(['1', '2']);
  });

  it('rejects a bad concurrency before running anything', async () => {
    await expect(runToolCalls([], [], { concurrency: 0, idempotencyKey: key })).rejects.toThrow(RangeError);
  });
});

describe('runToolCall: one call, as the agent IO runs each', () => {
  const echo = defineTool({ name: 'echo', description: 'Echoes.', input: z.object({ text: z.string() }), execute: ({ text }) => text });
  const tools = new ToolSet([echo]);

  it('answers with the value, validates the arguments, and hands the tool its key and session', async () => {
    const seen: ToolContext[] = [];
    const spy = defineTool({ name: 'spy', description: 'Sees.', input: z.object({}), execute: (_args, ctx) => void seen.push(ctx) });
    const both = new ToolSet([echo, spy]);
    expect((await runToolCall({ id: 'c1', name: 'echo', args: { text: 'hi' } }, both, { idempotencyKey: 'k1' })).content).toBe('hi');
    expect((await runToolCall({ id: 'c2', name: 'echo', args: { text: 3 } }, both, { idempotencyKey: 'k2' })).isError).toBe(true);
    await runToolCall({ id: 'c3', name: 'spy', args: {} }, both, { idempotencyKey: 'k3', session: { sessionId: 's1', scope: 'u1' } });
    expect(seen[0]).toMatchObject({ toolCallId: 'c3', idempotencyKey: 'k3', sessionId: 's1', scope: 'u1' });
  });

  it('is interrupted when its signal aborts, and leaves no listener on the signal once settled', async () => {
    const started = deferred<void>();
    const aborted: unknown[] = [];
    const waiter = defineTool({
      name: 'wait',
      description: 'Waits.',
      input: z.object({}),
      execute: (_args, { signal }) => {
        started.resolve();
        return new Promise((_resolve, reject) => signal.addEventListener('abort', () => (aborted.push(signal.reason), reject(new Error('aborted')))));
      },
    });
    const controller = new AbortController();
    const running = runToolCall({ id: 'c1', name: 'wait', args: {} }, new ToolSet([waiter]), { idempotencyKey: 'k', signal: controller.signal });
    await started.promise;
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(1);
    controller.abort(new Error('stop'));
    expect(await running).toMatchObject({ content: INTERRUPTED_CONTENT, isError: true });
    expect(aborted).toHaveLength(1);
    // A call that finished took its listener with it.
    const other = new AbortController();
    await runToolCall({ id: 'c2', name: 'echo', args: { text: 'x' } }, tools, { idempotencyKey: 'k2', signal: other.signal });
    expect(getEventListeners(other.signal, 'abort')).toHaveLength(0);
  });

  it('runs nothing under a signal aborted already, and times out as a batch call does', async () => {
    let ran = false;
    const never = defineTool({ name: 'never', description: 'Never answers.', input: z.object({}), timeoutMs: 20, execute: () => ((ran = true), new Promise(() => {})) });
    const set = new ToolSet([never]);
    const stopped = AbortSignal.abort();
    expect((await runToolCall({ id: 'c1', name: 'never', args: {} }, set, { idempotencyKey: 'k', signal: stopped })).content).toBe(NOT_RUN);
    expect(ran).toBe(false);
    expect((await runToolCall({ id: 'c2', name: 'never', args: {} }, set, { idempotencyKey: 'k' })).content).toBe('tool "never" timed out after 20 ms');
    await expect(runToolCall({ id: 'c3', name: 'never', args: {} }, set, { idempotencyKey: 'k', defaultTimeoutMs: -1 })).rejects.toThrow(RangeError);
  });
});

import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineTool, ModelError, runAgent, streamAgent, type AgentStreamEvent } from '../../../src/index.js';
import { scriptedModel } from '../../../src/testing.js';

const add = defineTool({
  name: 'add',
  description: 'adds',
  input: z.object({ a: z.number(), b: z.number() }),
  execute: ({ a, b }) => a + b,
});

/** A tool that waits until its call is aborted, and says so. */
function waitingTool(seen: { aborted: boolean; started?: () => void }) {
  return defineTool({
    name: 'wait',
    description: 'waits',
    input: z.object({}),
    execute: (_args, ctx) =>
      new Promise<string>((_, reject) => {
        ctx.signal.addEventListener('abort', () => {
          seen.aborted = true;
          reject(new Error('aborted'));
        });
        seen.started?.();
      }),
  });
}

const addScript = () =>
  scriptedModel([
    { toolCalls: [{ name: 'add', args: { a: 2, b: 3 } }], usage: { inputTokens: 10, outputTokens: 5 } },
    { text: 'It is 5.', usage: { inputTokens: 20, outputTokens: 3 } },
  ]);

describe('runAgent', () => {
  it('resolves with the answer, the outcome, the conversation and the usage', async () => {
    const result = await runAgent({ model: addScript(), tools: [add], prompt: 'What is 2 + 3?' });
    expect(result.text).toBe('It is 5.');
    expect(result.outcome).toEqual({ type: 'Completed', finalText: 'It is 5.' });
    expect(result.messages.map((m) => m.role)).toEqual(['user', 'assistant', 'tool', 'assistant']);
    expect(result.messages[2]).toMatchObject({ role: 'tool', toolName: 'add', content: '5' });
    expect(result.usage).toMatchObject({ inputTokens: 30, outputTokens: 8 });
  });

  it('passes instructions through: sent to the model as the system prompt, not stored in the messages', async () => {
    const seen: string[][] = [];
    const model = scriptedModel([
      (request) => {
        seen.push(request.messages.map((m) => `${m.role}:${m.content}`));
        return { text: 'ok' };
      },
    ]);
    const result = await runAgent({ model, prompt: 'hi', instructions: 'Be brief.' });
    expect(seen[0]).toEqual(['system:Be brief.', 'user:hi']);
    expect(result.messages.map((m) => m.role)).toEqual(['user', 'assistant']);
  });

  it('continues from a given history', async () => {
    const history = [
      { role: 'user' as const, content: 'hi' },
      { role: 'assistant' as const, content: 'hello' },
    ];
    // The scripted model picks its reply by the number of assistant messages so far: one.
    const result = await runAgent({ model: scriptedModel([{ text: 'unused' }, { text: 'again' }]), prompt: 'once more', history });
    expect(result.messages.map((m) => m.content)).toEqual(['hi', 'hello', 'once more', 'again']);
  });

  it('an outcome other than Completed resolves too, with empty text', async () => {
    const result = await runAgent({ model: scriptedModel([{ error: { message: 'boom', retryable: false } }]), prompt: 'x', retry: false });
    expect(result.outcome.type).toBe('Failed');
    expect(result.text).toBe('');
  });

  it('an abort signal cancels the run: the tool call is aborted and the outcome is Cancelled', async () => {
    const controller = new AbortController();
    // Aborted once the tool runs, so the abort reaches the call (a timer could fire before it started).
    const seen = { aborted: false, started: () => controller.abort() };
    const model = scriptedModel([{ toolCalls: [{ name: 'wait', args: {} }] }]);
    const running = runAgent({ model, tools: [waitingTool(seen)], prompt: 'wait', signal: controller.signal });
    const result = await running;
    expect(result.outcome).toEqual({ type: 'Cancelled' });
    expect(seen.aborted).toBe(true);
    // The interrupted call still gets its result: the conversation stays valid for a provider.
    expect(result.messages.at(-1)).toMatchObject({ role: 'tool', toolName: 'wait' });
  });

  it('a signal aborted before the start cancels before the model is called', async () => {
    let calls = 0;
    const model = scriptedModel([
      () => {
        calls++;
        return { text: 'never' };
      },
    ]);
    const result = await runAgent({ model, prompt: 'x', signal: AbortSignal.abort() });
    expect(result.outcome).toEqual({ type: 'Cancelled' });
    expect(calls).toBe(0);
  });

  it("each run's idempotency keys are its own: two runs never send one key, and a retried call keeps its key", async () => {
    const modelKeys: string[] = [];
    const toolKeys: string[] = [];
    const charge = defineTool({ name: 'charge', description: 'Charges.', input: z.object({ cents: z.number() }), execute: ({ cents }, ctx) => (toolKeys.push(ctx.idempotencyKey), `charged ${cents}`) });
    let failOnce = true;
    const model = (cents: number) => {
      const script = scriptedModel([{ toolCalls: [{ id: 'call_1', name: 'charge', args: { cents } }] }, { text: 'Done.' }]);
      return {
        ...script,
        generate: async (request: Parameters<typeof script.generate>[0]) => {
          modelKeys.push(request.idempotencyKey);
          if (failOnce) {
            failOnce = false;
            throw new ModelError('overloaded', { status: 503, retryable: true });
          }
          return script.generate(request);
        },
      };
    };
    const retry = { maxRetries: 1, baseDelayMs: 1, maxDelayMs: 1 };
    // Before: both runs sent `session:run-1:turn-1:model`, and both charges `session:run-1:turn-1:tools:call_1`: an API that deduplicates answered Bob with Alice's charge.
    await runAgent({ model: model(100), tools: [charge], retry, prompt: 'Charge Alice $1.' });
    await runAgent({ model: model(200), tools: [charge], retry, prompt: 'Charge Bob $2.' });
    expect(new Set(toolKeys).size).toBe(2);
    // Run 1: its first model call failed and was retried under the same key; then its second call. Run 2: two calls.
    expect(modelKeys).toHaveLength(5);
    expect(modelKeys[0]).toBe(modelKeys[1]);
    expect(new Set(modelKeys).size).toBe(4);
    for (const key of [...modelKeys, ...toolKeys]) expect(key).toMatch(/^runagent-[0-9a-f-]{36}:run-1:turn-\d:/);
  });

  it('a bad configuration rejects', async () => {
    await expect(runAgent({ model: addScript(), tools: [add, add], prompt: 'x' })).rejects.toThrow(/used by more than one tool/);
  });
});

describe('streamAgent', () => {
  it('yields text deltas, tool calls and results in order, then done with the result', async () => {
    const events: AgentStreamEvent[] = [];
    for await (const event of streamAgent({ model: addScript(), tools: [add], prompt: 'What is 2 + 3?' })) events.push(event);
    const types = events.map((e) => e.type);
    expect(types.indexOf('tool.started')).toBeLessThan(types.indexOf('tool.finished'));
    expect(types.indexOf('tool.finished')).toBeLessThan(types.indexOf('text.delta'));
    expect(types.at(-1)).toBe('done');
    expect(types).toContain('run.finished');
    const text = events.flatMap((e) => (e.type === 'text.delta' ? [e.delta] : [])).join('');
    expect(text).toBe('It is 5.');
    const started = events.find((e) => e.type === 'tool.started');
    expect(started).toMatchObject({ call: { name: 'add', args: { a: 2, b: 3 } } });
    const done = events.at(-1) as Extract<AgentStreamEvent, { type: 'done' }>;
    expect(done.result).toMatchObject({ text: 'It is 5.', outcome: { type: 'Completed' } });
  });

  it('leaving the loop early cancels the run and aborts the tool call, and nothing is left to reject', async () => {
    const seen = { aborted: false };
    const model = scriptedModel([{ toolCalls: [{ name: 'wait', args: {} }] }]);
    const unhandled: unknown[] = [];
    const note = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', note);
    try {
      for await (const event of streamAgent({ model, tools: [waitingTool(seen)], prompt: 'wait' })) {
        if (event.type === 'tool.started') break;
      }
      expect(seen.aborted).toBe(true);
      // The run is stopped while its cancel still takes the calls' results (see Ending): before,
      // the stopped actor's missing output was read as a result, an unhandled TypeError.
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', note);
    }
  });

  it('an abort signal ends the stream with a Cancelled result', async () => {
    const seen = { aborted: false };
    const controller = new AbortController();
    const model = scriptedModel([{ toolCalls: [{ name: 'wait', args: {} }] }]);
    let last: AgentStreamEvent | undefined;
    for await (const event of streamAgent({ model, tools: [waitingTool(seen)], prompt: 'wait', signal: controller.signal })) {
      if (event.type === 'tool.started') controller.abort();
      last = event;
    }
    expect(last).toMatchObject({ type: 'done', result: { outcome: { type: 'Cancelled' } } });
  });
});

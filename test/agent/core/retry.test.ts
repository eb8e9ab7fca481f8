/** Model errors through the driver: retries with backoff for retryable failures, fail fast otherwise. */
import { describe, expect, it } from 'vitest';
import { createActor } from 'xstate';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import { InvalidConfigError } from '../../../src/errors.js';
import { runAgent } from '../../../src/agent/hosts/run-agent.js';
import { ModelError, type Model } from '../../../src/model.js';
import { scriptedModel } from '../../../src/models/scripted.js';
import type { Message } from '../../../src/schemas.js';
import { echoTool, fakeSleep, recording, runInSession, runToCompletion } from '../../support/driver.js';

const user = (content: string): Message => ({ role: 'user', content });
const rateLimited = { error: { message: 'rate limited', status: 429 } };

describe('retries', () => {
  it('a model that fails twice with 429 then answers: same request and key each time, backoff waited', async () => {
    const model = recording(scriptedModel([rateLimited, rateLimited, { text: 'hello', usage: { inputTokens: 7, outputTokens: 1 } }]));
    const { delays, sleep } = fakeSleep();
    const machine = createAgentMachine({ model, retry: { baseDelayMs: 100, sleep, random: () => 0.5 } });
    const output = await runToCompletion(createActor(machine, { input: { prompt: 'hi', sessionId: 'r' } }));

    expect(output).toEqual({
      outcome: { type: 'Completed', finalText: 'hello' },
      messages: [user('hi'), { role: 'assistant', content: 'hello' }],
      usage: { inputTokens: 7, outputTokens: 1 },
    });
    expect(model.seen.map((r) => r.idempotencyKey)).toEqual([
      'r:run-1:turn-1:model',
      'r:run-1:turn-1:model',
      'r:run-1:turn-1:model',
    ]);
    expect(model.seen.map((r) => r.messages)).toEqual([[user('hi')], [user('hi')], [user('hi')]]);
    // Full jitter: floor(0.5 * 100 * 2^attempt).
    expect(delays).toEqual([50, 100]);
  });

  it('emits model.retry after text streamed by the failed attempt, so a UI can drop that text', async () => {
    let attempt = 0;
    const model: Model = {
      name: 'flaky',
      async generate(request) {
        attempt += 1;
        if (attempt === 1) {
          request.onTextDelta?.('half an ans');
          throw new ModelError('overloaded', { status: 529, retryable: true });
        }
        request.onTextDelta?.('a whole answer');
        return { message: { role: 'assistant', content: 'a whole answer' }, finishReason: 'stop' };
      },
    };
    const { sleep } = fakeSleep();
    const user = { onRetry: [] as number[] };
    const actor = createActor(
      createAgentMachine({ model, retry: { sleep, random: () => 0.5, baseDelayMs: 100, onRetry: (a) => user.onRetry.push(a.retry) } }),
      { input: { prompt: 'hi' } },
    );
    const seen: string[] = [];
    actor.on('text.delta', (e) => seen.push(`delta:${e.turn}:${e.delta}`));
    actor.on('model.retry', (e) => seen.push(`retry:${e.turn}:${e.retry}:${e.delayMs}:${(e.error as Error).message}`));
    const output = await runToCompletion(actor);
    expect(seen).toEqual(['delta:1:half an ans', 'retry:1:1:50:overloaded', 'delta:1:a whole answer']);
    // The caller's own onRetry still runs.
    expect(user.onRetry).toEqual([1]);
    expect(output.outcome).toEqual({ type: 'Completed', finalText: 'a whole answer' });
  });

  it("honours the provider's retry-after", async () => {
    const model = scriptedModel([{ error: { message: 'slow down', status: 429, retryAfterMs: 700 } }, { text: 'ok' }]);
    const { delays, sleep } = fakeSleep();
    const output = await runToCompletion(
      createActor(createAgentMachine({ model, retry: { baseDelayMs: 100, sleep, random: () => 0.5 } }), { input: { prompt: 'hi' } }),
    );
    expect(delays).toEqual([700]);
    expect(output.outcome).toEqual({ type: 'Completed', finalText: 'ok' });
  });

  it('a network error (fetch failed) is retried too', async () => {
    const model = recording(scriptedModel([{ error: new TypeError('fetch failed') }, { text: 'ok' }]));
    const { sleep } = fakeSleep();
    const output = await runToCompletion(createActor(createAgentMachine({ model, retry: { sleep } }), { input: { prompt: 'hi' } }));
    expect(model.seen).toHaveLength(2);
    expect(output.outcome).toEqual({ type: 'Completed', finalText: 'ok' });
  });

  it('after the last retry: Failed(ModelError) with the cause, run discarded', async () => {
    const model = recording(scriptedModel([rateLimited, rateLimited, rateLimited, { text: 'too late' }]));
    const { delays, sleep } = fakeSleep();
    const output = await runToCompletion(
      createActor(createAgentMachine({ model, retry: { maxRetries: 2, sleep, random: () => 0 } }), { input: { prompt: 'hi' } }),
    );
    expect(model.seen).toHaveLength(3);
    expect(delays).toEqual([0, 0]);
    expect(output).toEqual({
      outcome: {
        type: 'Failed',
        error: { type: 'ModelError', message: 'model "scripted" failed after 3 attempts; last error: rate limited' },
      },
      messages: [],
      usage: { inputTokens: 0, outputTokens: 0 },
    });
  });

  it('bad retry settings are refused when the agent is made, as InvalidConfigError naming the setting', async () => {
    const model = () => scriptedModel([{ text: 'never' }]);
    // Before: accepted here, then thrown as a ZodError from inside XState's start when the IO
    // wrapped the models, which ended the Node process (runAgent's promise never settled).
    for (const [retry, problem] of [
      [{ maxRetries: -1 }, /retry: maxRetries: Too small/],
      [{ baseDelayMs: '5' }, /retry: baseDelayMs: .*expected number/],
      [{ maxDelay: 5 }, /retry: .*maxDelay.*maxDelayMs/],
      [{ onRetry: 'log' }, /retry: onRetry: onRetry must be a function/],
    ] as const) {
      expect(() => createAgentMachine({ model: model(), retry: retry as never })).toThrow(InvalidConfigError);
      expect(() => createAgentMachine({ model: model(), retry: retry as never })).toThrow(problem);
      await expect(runAgent({ model: model(), prompt: 'hi', retry: retry as never })).rejects.toThrow(InvalidConfigError);
    }
  });

  it('retry: false fails at the first retryable error', async () => {
    const model = recording(scriptedModel([rateLimited, { text: 'never' }]));
    const output = await runToCompletion(createActor(createAgentMachine({ model, retry: false }), { input: { prompt: 'hi' } }));
    expect(model.seen).toHaveLength(1);
    expect(output.outcome).toEqual({ type: 'Failed', error: { type: 'ModelError', message: 'rate limited' } });
  });
});

describe('a non-retryable error', () => {
  it('400 fails fast: Failed(ModelError), the run discarded, the session keeps its previous history', async () => {
    const model = recording(
      scriptedModel([
        { text: 'first run' },
        { toolCalls: [{ name: 'echo', args: { text: 'x' } }] },
        { error: { message: 'bad request: context too long', status: 400 } },
      ]),
    );
    const { delays, sleep } = fakeSleep();
    const actor = createActor(createAgentMachine({ model, tools: [echoTool], retry: { sleep } }));
    actor.start();
    const first = await runInSession(actor, 'one');
    const committed = [user('one'), { role: 'assistant', content: 'first run' } as Message];
    expect(first.messages).toEqual(committed);

    const second = await runInSession(actor, 'two');
    expect(second.outcome).toEqual({ type: 'Failed', error: { type: 'ModelError', message: 'bad request: context too long' } });
    // Turn 1 of the failed run (a tool call and its result) is thrown away with it.
    expect(second.messages).toEqual(committed);
    expect(actor.getSnapshot().context.brain.context.history).toEqual(committed);
    expect(model.seen).toHaveLength(3);
    expect(delays).toEqual([]);
    expect(actor.getSnapshot().value).toBe('Idle');
  });
});

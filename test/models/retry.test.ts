import { describe, expect, it } from 'vitest';
import { ModelError, type Model, type ModelReply, type ModelRequest } from '../../src/model.js';
import { backoffDelay, isRetryable, withRetry } from '../../src/models/retry.js';
import { InvalidConfigError } from '../../src/errors.js';

const reply: ModelReply = { message: { role: 'assistant', content: 'hello' }, finishReason: 'stop' };

function request(signal: AbortSignal = new AbortController().signal): ModelRequest {
  return { messages: [{ role: 'user', content: 'hi' }], tools: [], signal, idempotencyKey: 'run1:turn1' };
}

/** A model that throws the given errors in order, then answers; it records the keys it was asked with. */
function flaky(errors: unknown[]): Model & { keys: string[] } {
  const keys: string[] = [];
  return {
    name: 'flaky',
    keys,
    async generate(req) {
      keys.push(req.idempotencyKey);
      const error = errors.shift();
      if (error !== undefined) throw error;
      return reply;
    },
  };
}

const rateLimited = (retryAfterMs?: number) =>
  new ModelError('rate limited (429)', { status: 429, retryable: true, retryAfterMs });

function recordingSleep() {
  const delays: number[] = [];
  return { delays, sleep: async (ms: number) => void delays.push(ms) };
}

describe('withRetry', () => {
  it('refuses bad settings with InvalidConfigError naming them, not a ZodError', () => {
    const model = flaky([]);
    expect(() => withRetry(model, { maxRetries: -1 })).toThrow(InvalidConfigError);
    expect(() => withRetry(model, { maxRetries: -1 })).toThrow(/withRetry: maxRetries: Too small/);
    expect(() => withRetry(model, { baseDelayMs: 'x' } as never)).toThrow(/withRetry: baseDelayMs/);
    expect(() => withRetry(model, { retries: 2 } as never)).toThrow(/withRetry: .*retries/);
  });

  it('retries 429 twice with growing, jittered backoff and then answers, with the same idempotency key', async () => {
    const model = flaky([rateLimited(), rateLimited()]);
    const { delays, sleep } = recordingSleep();
    const retries: number[] = [];
    const retrying = withRetry(model, { random: () => 0.5, sleep, onRetry: (a) => retries.push(a.retry) });
    await expect(retrying.generate(request())).resolves.toBe(reply);
    // Full jitter at 0.5: half of 500 * 2^0, then half of 500 * 2^1.
    expect(delays).toEqual([250, 500]);
    expect(retries).toEqual([1, 2]);
    expect(model.keys).toEqual(['run1:turn1', 'run1:turn1', 'run1:turn1']);
    expect(retrying.name).toBe('flaky');
  });

  it('waits at least retry-after, capped by maxDelayMs', async () => {
    const model = flaky([rateLimited(2_000), rateLimited(90_000), rateLimited(1)]);
    const { delays, sleep } = recordingSleep();
    await withRetry(model, { random: () => 0.5, sleep, maxDelayMs: 10_000 }).generate(request());
    expect(delays).toEqual([2_000, 10_000, 1_000]);
  });

  // setTimeout cuts a delay past 2^31 - 1 ms (24.8 days) to 1 ms: before, a retry-after of 35
  // days under a maxDelayMs that allowed it asked the provider again after 1 ms.
  it('a wait longer than a timer can hold is held to the timer\'s bound, not cut to 1 ms', async () => {
    const model = flaky([rateLimited(3_000_000_000)]);
    const controller = new AbortController();
    const delays: number[] = [];
    const pending = withRetry(model, { maxDelayMs: 4_000_000_000, onRetry: (a) => delays.push(a.delayMs) }).generate(request(controller.signal));
    await new Promise((resolve) => setTimeout(resolve, 200));
    // Still waiting: the provider was not asked again.
    expect(model.keys).toHaveLength(1);
    controller.abort();
    await expect(pending).rejects.toMatchObject({ name: 'AbortError' });
    expect(delays).toEqual([2 ** 31 - 1]);
  });

  it('fails fast on a non-retryable error, passing it through untouched', async () => {
    const badRequest = new ModelError('the provider rejected the request (400 Bad Request)', { status: 400, retryable: false });
    const model = flaky([badRequest]);
    const { delays, sleep } = recordingSleep();
    await expect(withRetry(model, { sleep }).generate(request())).rejects.toBe(badRequest);
    expect(model.keys).toHaveLength(1);
    expect(delays).toEqual([]);
  });

  it('retries network errors', async () => {
    const reset = Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' });
    const model = flaky([new TypeError('fetch failed', { cause: reset }), reset]);
    const { sleep } = recordingSleep();
    await expect(withRetry(model, { sleep }).generate(request())).resolves.toBe(reply);
  });

  it('gives up after maxRetries with a non-retryable ModelError naming the attempts, the last error as cause', async () => {
    const errors = [rateLimited(), rateLimited(), rateLimited(), new ModelError('overloaded', { status: 529, retryable: true })];
    const model = flaky([...errors]);
    const { delays, sleep } = recordingSleep();
    const failure = await withRetry(model, { maxRetries: 3, random: () => 1 - Number.EPSILON, sleep })
      .generate(request())
      .catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(ModelError);
    expect(failure).toMatchObject({ retryable: false, status: 529, cause: errors[3] });
    expect((failure as Error).message).toBe('model "flaky" failed after 4 attempts; last error: overloaded');
    expect(model.keys).toHaveLength(4);
    expect(delays).toEqual([499, 999, 1999]);
  });

  it('ends the wait between attempts when the signal aborts, with an AbortError', async () => {
    const controller = new AbortController();
    const model = flaky([rateLimited(60_000)]);
    const pending = withRetry(model, { maxDelayMs: 60_000 }).generate(request(controller.signal));
    setTimeout(() => controller.abort(), 20);
    const started = Date.now();
    await expect(pending).rejects.toMatchObject({ name: 'AbortError' });
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(model.keys).toHaveLength(1);
  });

  it('does not retry once the request is cancelled, whatever the error', async () => {
    const controller = new AbortController();
    const model: Model = {
      name: 'm',
      async generate() {
        controller.abort();
        throw rateLimited();
      },
    };
    const { delays, sleep } = recordingSleep();
    await expect(withRetry(model, { sleep }).generate(request(controller.signal))).rejects.toMatchObject({ status: 429 });
    expect(delays).toEqual([]);
  });

  it('rejects invalid settings', () => {
    expect(() => withRetry(flaky([]), { maxRetries: -1 })).toThrow();
  });
});

describe('isRetryable', () => {
  it.each([
    ['retryable ModelError', rateLimited(), true],
    ['non-retryable ModelError', new ModelError('no', { status: 401, retryable: false }), false],
    ['fetch failed', new TypeError('fetch failed'), true],
    ['other TypeError', new TypeError('x is not a function'), false],
    ['ECONNREFUSED', Object.assign(new Error('connect'), { code: 'ECONNREFUSED' }), true],
    ['ETIMEDOUT', Object.assign(new Error('t'), { code: 'ETIMEDOUT' }), true],
    ['EPIPE', Object.assign(new Error('p'), { code: 'EPIPE' }), true],
    ['undici socket error', Object.assign(new Error('other side closed'), { code: 'UND_ERR_SOCKET' }), true],
    ['network code in cause', new Error('wrapped', { cause: Object.assign(new Error('r'), { code: 'ECONNRESET' }) }), true],
    ['ENOENT', Object.assign(new Error('missing'), { code: 'ENOENT' }), false],
    ['AbortError', Object.assign(new Error('aborted'), { name: 'AbortError' }), false],
    ['plain Error', new Error('bug'), false],
    ['a string', 'oops', false],
  ])('%s → %s', (_label, error, expected) => {
    expect(isRetryable(error)).toBe(expected);
  });
});

describe('backoffDelay', () => {
  const settings = { baseDelayMs: 500, maxDelayMs: 30_000 };
  it('doubles the ceiling per attempt up to the cap, scaled by the random draw', () => {
    const top = () => 1 - Number.EPSILON;
    expect([0, 1, 2, 3, 4, 5, 6, 7].map((a) => backoffDelay(a, settings, top))).toEqual([
      499, 999, 1999, 3999, 7999, 15999, 29999, 29999,
    ]);
    expect(backoffDelay(3, settings, () => 0)).toBe(0);
    expect(backoffDelay(3, settings, () => 0.25)).toBe(1000);
  });
});

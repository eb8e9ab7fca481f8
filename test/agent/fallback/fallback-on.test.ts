/**
 * `fallbackOn` may be a function: it decides whether a failed call moves to the next model. The
 * default stays the listed triggers (a status, a network code, a timeout, a context too long), so
 * a plain `Error` from a custom model does not fall back unless the function says so; a function
 * that throws does not fall back either (the run fails with the model's error).
 */
import { describe, expect, it } from 'vitest';
import { InvalidConfigError, runAgent, type Model } from '../../../src/index.js';
import { scriptedModel } from '../../../src/testing.js';

/** A custom model that throws `error` on every call. */
const failing = (error: unknown): Model => ({
  name: 'primary',
  generate: async () => {
    throw error;
  },
});
const backup = () => ({ ...scriptedModel([{ text: 'from the backup' }]), name: 'backup' });

describe('fallbackOn as a function', () => {
  it('by default a plain Error from a custom model does not fall back: the run fails with it', async () => {
    const result = await runAgent({ model: [failing(new Error('overloaded')), backup()], retry: false, prompt: 'Hi.' });
    expect(result.outcome).toMatchObject({ type: 'Failed', error: { type: 'ModelError', message: expect.stringContaining('overloaded') } });
  });

  it('a function that answers true moves the run to the next model, and the event names fallbackOn', async () => {
    const seen: unknown[] = [];
    const result = await runAgent({
      model: [failing(new Error('overloaded')), backup()],
      retry: false,
      prompt: 'Hi.',
      fallbackOn: (error) => (seen.push(error), error instanceof Error && /overloaded/.test(error.message)),
    });
    expect(result.outcome).toEqual({ type: 'Completed', finalText: 'from the backup' });
    // Asked once per failure, though the chart's guard and its action both need the answer.
    expect(seen).toHaveLength(1);
    expect(result.usageByModel?.map((row) => row.model)).toEqual(['backup']);
  });

  it('a function that answers false keeps a 429 from falling back', async () => {
    const limited = Object.assign(new Error('rate limited'), { status: 429 });
    const result = await runAgent({ model: [failing(limited), backup()], retry: false, prompt: 'Hi.', fallbackOn: () => false });
    expect(result.outcome).toMatchObject({ type: 'Failed', error: { type: 'ModelError' } });
  });

  it.each([
    ['throws', () => {
      throw new Error('predicate broke');
    }],
    ['answers something that is not true', () => 'yes' as unknown as boolean],
  ])('a function that %s does not fall back, and the run still settles', async (_, fallbackOn) => {
    const result = await runAgent({ model: [failing(new Error('overloaded')), backup()], retry: false, prompt: 'Hi.', fallbackOn });
    expect(result.outcome).toMatchObject({ type: 'Failed', error: { type: 'ModelError', message: expect.stringContaining('overloaded') } });
  });

  it('a fallbackOn that is neither a function nor a list of triggers is InvalidConfigError', async () => {
    await expect(runAgent({ model: [failing(new Error('x')), backup()], prompt: 'Hi.', fallbackOn: 'always' as never })).rejects.toSatisfy((error: unknown) => InvalidConfigError.isInstance(error));
  });
});

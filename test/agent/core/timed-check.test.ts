/**
 * `timedCheck` runs a user check (a guardrail, a tool policy, runAgent's approve) so that nothing
 * waits on it past its timeout or past the run: it settles with the check, with `onTimeout()`,
 * or with the run's abort reason, and leaves no timer behind.
 */
import { describe, expect, it } from 'vitest';
import { timedCheck } from '../../../src/agent/core/timed-check.js';

const timers = () => process.getActiveResourcesInfo().filter((kind) => kind === 'Timeout').length;
const never = () => new Promise<never>(() => {});

describe('timedCheck', () => {
  it('returns what a check returns at once, without a timer', async () => {
    const before = timers();
    expect(await timedCheck(new AbortController().signal, 1_000, () => 'pass', () => new Error('late'))).toBe('pass');
    expect(timers()).toBe(before);
  });

  it("a check that never settles rejects with onTimeout() when the time is up, and its signal aborts with that error", async () => {
    let signal: AbortSignal | undefined;
    const late = new Error('late');
    await expect(timedCheck(new AbortController().signal, 20, (s) => ((signal = s), never()), () => late)).rejects.toBe(late);
    expect(signal?.reason).toBe(late);
  });

  it('a run that ends first settles it at once with the run\'s reason, and clears its timer', async () => {
    const run = new AbortController();
    const before = timers();
    const pending = timedCheck(run.signal, 60_000, never, () => new Error('late'));
    expect(timers()).toBe(before + 1);
    const ended = new Error('the run ended');
    run.abort(ended);
    await expect(pending).rejects.toBe(ended);
    expect(timers()).toBe(before);
  });

  it('a run already over does not wait at all, and the check sees its signal aborted', async () => {
    const run = new AbortController();
    run.abort(new Error('over'));
    let aborted: boolean | undefined;
    await expect(timedCheck(run.signal, 60_000, (signal) => ((aborted = signal.aborted), never()), () => new Error('late'))).rejects.toThrow('over');
    expect(aborted).toBe(true);
  });
});

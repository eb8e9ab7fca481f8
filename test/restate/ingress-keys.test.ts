/**
 * An object's key goes into the ingress path percent-encoded, one segment whatever it holds, except
 * what no encoding carries: `.` and `..`, which a URL resolves away (percent-encoded too), and a
 * lone surrogate, which `encodeURIComponent` throws on. Before, `restateScheduleClient`'s
 * `get('..')` called `/get`, `get('.')` `/loopchartSchedule/get` and `schedule({ id: '..' })`
 * `/create`; `pause('a\ud800')` was a StoreError 'URI malformed', as if the ingress had failed; live deltas of the session `..` went to
 * `/publish/send`. Now the client refuses such an id (InvalidScheduleError) before any call, and
 * such a session publishes no live deltas. A schedule's session is such a key too (the session
 * object's), refused when the schedule is made, and the session object refuses it as its key. A local HTTP server on 127.0.0.1 stands in for the
 * ingress only to record the paths called.
 */
import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import { liveDeltas } from '../../src/restate/live-deltas.js';
import { checkSessionKey } from '../../src/restate/payloads.js';
import { restateScheduleClient } from '../../src/restate/schedule-client.js';
import { InvalidScheduleError } from '../../src/schedules.js';
import { startRecordingIngress } from './recording-ingress.js';

const ingress = await startRecordingIngress();
const { base, paths } = ingress;
afterAll(() => ingress.close());
beforeEach(() => {
  paths.length = 0;
});

/** What a call threw, or what it returned. */
const outcome = (call: () => Promise<unknown>) => call().catch((error: unknown) => error);

describe('Restate object keys in the ingress path', () => {
  it.each([
    ['..', 'before: /get'],
    ['.', 'before: /loopchartSchedule/get'],
    ['a\ud800', "before: a StoreError 'URI malformed'"],
  ])('the schedule id %j is an InvalidScheduleError, and nothing is called (%s)', async (id) => {
    const client = restateScheduleClient(base);
    for (const call of [() => client.get(id), () => client.pause(id), () => client.resume(id), () => client.delete(id)]) {
      const error = await outcome(call);
      expect(paths).toEqual([]);
      expect(InvalidScheduleError.isInstance(error), String(error)).toBe(true);
      expect((error as Error).message).toMatch(/^invalid schedule: id: /);
    }
  });

  it("schedule({ id: '..' }) is an InvalidScheduleError, and nothing is called (before: /create)", async () => {
    const error = await outcome(() => restateScheduleClient(base).schedule({ id: '..', session: 'reports', input: 'Write the report.', every: 60_000 }));
    expect(paths).toEqual([]);
    expect(InvalidScheduleError.isInstance(error), String(error)).toBe(true);
  });

  it.each(['..', '.'])("a schedule's session %j is an InvalidScheduleError, and nothing is called (before: created, its ticks ran a session no client could reach)", async (session) => {
    const error = await outcome(() => restateScheduleClient(base).schedule({ id: 'nightly', session, input: 'Write the report.', every: 60_000 }));
    expect(paths).toEqual([]);
    expect(InvalidScheduleError.isInstance(error), String(error)).toBe(true);
    expect((error as Error).message).toMatch(/session: .* cannot be a key in an ingress path/);
  });

  it.each(['..', '.'])('the session object refuses the key %j with a 400, as a call inside Restate could bring it', (key) => {
    expect(() => checkSessionKey(key)).toThrow(expect.objectContaining({ code: 400, message: expect.stringMatching(/^invalid session id: .* cannot be a key in an ingress path/) }));
    expect(checkSessionKey('...')).toBe('...');
  });

  it.each(['...', '.a', 'a/b', 'a b', '%2e', '?#', 'nightly'])('the id %j is one segment of the path, percent-encoded', async (id) => {
    expect(await restateScheduleClient(base).get(id)).toBeUndefined();
    expect(paths).toEqual([`/loopchartSchedule/${encodeURIComponent(id)}/get`]);
  });

  it("the live deltas of the session '..' are not published (before: to /publish/send); another session's are, to its channel", async () => {
    const astray = liveDeltas(base, 'loopchartSessionChannel', '..');
    astray.push({ type: 'text.delta', text: 'lost' });
    astray.close();
    const kept = liveDeltas(base, 'loopchartSessionChannel', 'a/b');
    kept.push({ type: 'text.delta', text: 'kept' });
    kept.close();
    const expected = '/loopchartSessionChannel/a%2Fb/publish/send';
    for (let waited = 0; !paths.includes(expected) && waited < 2_000; waited += 10) await new Promise((resolve) => setTimeout(resolve, 10));
    // The delta sent first has had as long to arrive, and then some.
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(paths).toEqual([expected]);
  });
});

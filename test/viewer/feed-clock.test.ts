/**
 * A session's live feed with no page left stops after its grace on the process's monotonic clock.
 * Before, the grace was `Date.now() - lastWatched`: a wall clock stepped back an hour kept the
 * feed (its timer, its session head and log changes in memory) alive for that hour.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createAgentMachine } from '../../machines/agent.machine.js';
import { DurableSession } from '../../src/sessions/durable-session.js';
import { MemorySessionStore } from '../../src/stores/memory.js';
import { scriptedModel } from '../../src/testing.js';
import { SessionFeed } from '../../src/viewer/feed.js';

afterEach(() => {
  vi.restoreAllMocks();
});

describe('a feed nobody watches', () => {
  it('stops after its grace though the wall clock stepped back an hour', async () => {
    const store = new MemorySessionStore();
    const session = await DurableSession.open({ machine: createAgentMachine({ model: scriptedModel([{ text: 'Hello.' }]) }), store, sessionId: 's' });
    session.send({ type: 'input', message: 'Hi.' });
    await session.whenIdle();
    await session.close();
    const realNow = Date.now.bind(Date);
    let offset = 0;
    vi.spyOn(Date, 'now').mockImplementation(() => realNow() + offset);
    const feed = (await SessionFeed.open(store, 's'))!;
    let idle = false;
    feed.poll(5, () => (idle = true), 200);
    offset = -3_600_000;
    try {
      await expect.poll(() => idle, { timeout: 3_000 }).toBe(true);
      expect(feed.stopped).toBe(true);
    } finally {
      feed.stop();
    }
  });
});

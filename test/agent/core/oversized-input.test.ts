/**
 * An input too big for the context window ends its run `Failed(CompactionStalled)`, and the
 * failed run's messages are discarded: the session must go on as before it. Found through the
 * Restate ingress (a 1 MB `send`, or a 3 MB `steer` into a run waiting for approval, left every
 * later `send` of that session failing the same way), and the same in any host: the next run's
 * size estimate started from the failed run's, counting the messages it discarded.
 */
import { describe, expect, it } from 'vitest';
import { createActor } from 'xstate';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import { logOf } from '../../../src/brain/message-log.js';
import { scriptedModel } from '../../../src/models/scripted.js';
import { runInSession } from '../../support/driver.js';

const huge = 'word '.repeat(200_000);

describe('a session after an input too big for the window', () => {
  it('the next input runs as if the oversized one had never come', async () => {
    const model = scriptedModel([{ text: 'first answer' }, { text: 'second answer' }, { text: 'third answer' }]);
    const actor = createActor(createAgentMachine({ model, retry: false, policy: { contextWindow: 8_000 } }), { input: { sessionId: 'oversized' } });
    actor.start();
    expect((await runInSession(actor, 'hello')).outcome).toEqual({ type: 'Completed', finalText: 'first answer' });
    const before = logOf(actor.getSnapshot().context.brain.context).length;

    const refused = await runInSession(actor, huge);
    expect(refused.outcome).toMatchObject({ type: 'Failed', error: { type: 'CompactionStalled' } });
    expect(logOf(actor.getSnapshot().context.brain.context).length).toBe(before);

    expect((await runInSession(actor, 'and now?')).outcome).toEqual({ type: 'Completed', finalText: 'second answer' });
    expect(actor.getSnapshot().context.brain.context.contextTokens).toBeLessThan(1_000);
    actor.stop();
  });

  it('the same for the first input of a session', async () => {
    const model = scriptedModel([{ text: 'an answer' }]);
    const actor = createActor(createAgentMachine({ model, retry: false, policy: { contextWindow: 8_000 } }), { input: { sessionId: 'oversized-first' } });
    actor.start();
    expect((await runInSession(actor, huge)).outcome).toMatchObject({ type: 'Failed', error: { type: 'CompactionStalled' } });
    expect((await runInSession(actor, 'hello')).outcome).toEqual({ type: 'Completed', finalText: 'an answer' });
    actor.stop();
  });
});

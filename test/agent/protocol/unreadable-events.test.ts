/**
 * An event from outside is read once, as data, before any guard sees it: one that cannot be
 * read (a getter or Proxy that throws, no string type) is refused with the reason and the actor
 * lives on; fields that are not data (a function, an actor ref) are left out; and what the sender
 * does with its object afterwards changes nothing the agent holds.
 */
import { describe, expect, it } from 'vitest';
import { createActor } from 'xstate';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import { scriptedModel } from '../../../src/models/scripted.js';
import { DurableSession } from '../../../src/sessions/durable-session.js';
import { MemorySessionStore } from '../../../src/stores/memory.js';
import { runFinished } from '../../support/driver.js';

const agent = () => createAgentMachine({ model: scriptedModel([{ text: 'one' }, { text: 'two' }]) });

/** An actor that records what it refused. */
function started() {
  const actor = createActor(agent());
  const rejected: { event: string; reason: string }[] = [];
  actor.on('event.rejected', ({ event, reason }) => void rejected.push({ event, reason }));
  actor.start();
  return { actor, rejected };
}

const unreadable: [string, object, RegExp][] = [
  ['a payload getter that throws', { type: 'input', get message(): string { throw new Error('no message for you'); } }, /the 'input' event cannot be read as data \(no message for you\)/],
  ['a payload that is a throwing Proxy', { type: 'policy', policy: new Proxy({}, { ownKeys() { throw new Error('no keys'); }, get() { throw new Error('no keys'); } }) }, /the 'policy' event cannot be read as data/],
  ['no type at all', Object.create(null) as object, /an event has no string type/],
  ['a type that is not a string', { type: Symbol('input') }, /an event has no string type/],
  ['a decision whose digest getter throws', { type: 'approve', toolCallId: 'c1', get digest(): string { throw new Error('digest?'); } }, /the 'approve' event cannot be read as data \(digest\?\)/],
];

describe('events that cannot be read as data', () => {
  it.each(unreadable)('%s: refused with the reason, the actor lives and runs the next input', async (_, event, reason) => {
    const { actor, rejected } = started();
    actor.send(event as never);
    expect(actor.getSnapshot().status).toBe('active');
    expect(rejected).toEqual([{ event: 'event.unreadable', reason: expect.stringMatching(reason) }]);
    const finished = runFinished(actor, 1);
    actor.send({ type: 'input', message: 'hello' });
    expect((await finished).outcome).toMatchObject({ type: 'Completed', finalText: 'one' });
  });

  it('fields that are not data are left out, and the event is taken', async () => {
    const { actor, rejected } = started();
    const finished = runFinished(actor, 1);
    actor.send({ type: 'input', message: 'hello', onDone: () => {}, from: actor } as never);
    expect((await finished).outcome.type).toBe('Completed');
    expect(rejected).toEqual([]);
  });

  it('the agent keeps what was sent: changing the object afterwards changes nothing it holds', async () => {
    const { actor } = started();
    const message = { role: 'user' as const, content: 'as sent' };
    const finished = runFinished(actor, 1);
    actor.send({ type: 'input', message });
    message.content = 'rewritten later';
    const output = await finished;
    expect(output.messages[0]).toEqual({ role: 'user', content: 'as sent' });
  });

  it("DurableSession.send refuses such an event through the chart instead of throwing at the caller", async () => {
    const session = await DurableSession.open({ machine: agent(), store: new MemorySessionStore(), sessionId: 'unreadable' });
    const rejected: string[] = [];
    session.actor.on('event.rejected', ({ reason }) => void rejected.push(reason));
    expect(() => session.send({ type: 'input', get message(): string { throw new Error('gone'); } } as never)).not.toThrow();
    expect(rejected).toEqual([expect.stringContaining("the 'input' event cannot be read as data (gone)")]);
    session.send({ type: 'input', message: 'hello' });
    expect((await session.whenIdle())?.outcome.type).toBe('Completed');
    await session.close();
  });
});

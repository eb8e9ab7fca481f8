/**
 * Issue 10, bugs 1 and 6, driver side: a custom `Model` may resolve anything. The reply is
 * checked where it enters the driver; a malformed one ends the run as Failed(ModelError) saying
 * what was wrong, and the session goes on. Provider numbers are made to fit what is stored, so a
 * durable session stays readable.
 */
import { describe, expect, it } from 'vitest';
import { createActor } from 'xstate';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import type { Model } from '../../../src/model.js';
import { DurableSession } from '../../../src/sessions/durable-session.js';
import { MemorySessionStore } from '../../../src/stores/memory.js';
import { runInSession } from '../../support/driver.js';

/** A model that answers `bad` first, then a plain text reply. */
function modelAnswering(bad: unknown): Model {
  let calls = 0;
  return { name: 'custom', generate: async () => (calls++ === 0 ? (bad as never) : { message: { role: 'assistant', content: 'fine' }, finishReason: 'stop' }) };
}

const deep = (depth: number): unknown => {
  let value: unknown = 1;
  for (let i = 0; i < depth; i++) value = { a: value };
  return value;
};

const MALFORMED: [string, unknown, RegExp][] = [
  ['content null', { message: { role: 'assistant', content: null }, finishReason: 'stop' }, /content/],
  ['undefined', undefined, /invalid reply/],
  ['toolCalls a string', { message: { role: 'assistant', content: '', toolCalls: 'x' }, finishReason: 'stop' }, /toolCalls/],
  ['a call without a name', { message: { role: 'assistant', content: '', toolCalls: [{ id: 'c', args: {} }] }, finishReason: 'tool-calls' }, /name/],
  ['arguments 10,000 deep', { message: { role: 'assistant', content: '', toolCalls: [{ id: 'c', name: 'x', args: deep(10_000) }] } }, /arguments/],
  ['a user message', { message: { role: 'user', content: 'hi' }, finishReason: 'stop' }, /role/],
];

describe('a malformed reply from a custom model', () => {
  it.each(MALFORMED)('(%s) fails the run with ModelError naming the problem; the actor takes the next input', async (_, bad, names) => {
    const actor = createActor(createAgentMachine({ model: modelAnswering(bad), retry: false }), { input: { sessionId: 's' } }).start();
    const first = await runInSession(actor, 'one');
    expect(first.outcome.type).toBe('Failed');
    if (first.outcome.type !== 'Failed') return;
    expect(first.outcome.error.type).toBe('ModelError');
    expect(first.outcome.error.message).toMatch(names);
    expect(actor.getSnapshot().status).toBe('active');
    const second = await runInSession(actor, 'two');
    expect(second.outcome).toEqual({ type: 'Completed', finalText: 'fine' });
  });
});

describe('provider numbers in a durable session', () => {
  const BAD_USAGE: unknown[] = [
    { inputTokens: 1.5, outputTokens: 1 },
    { inputTokens: -100, outputTokens: 1 },
    { inputTokens: 1e300, outputTokens: 1 },
    { inputTokens: Number.NaN, outputTokens: 1 },
    { inputTokens: '10', outputTokens: 1 },
  ];

  it.each(BAD_USAGE.map((usage) => [JSON.stringify(usage), usage]))(
    'usage %s or an unknown finish reason never locks the session: it reopens and runs again',
    async (_, usage) => {
      const store = new MemorySessionStore();
      const reply = { message: { role: 'assistant', content: 'ok' }, finishReason: 'bogus', usage };
      const machine = createAgentMachine({ model: { name: 'custom', generate: async () => reply as never } });
      const first = await DurableSession.open({ machine, store, sessionId: 'numbers' });
      first.send({ type: 'input', message: 'go' });
      expect((await first.whenIdle())!.outcome).toEqual({ type: 'Completed', finalText: 'ok', finishReason: 'other' });
      await first.close();

      const answer: Model = { name: 'plain', generate: async () => ({ message: { role: 'assistant', content: 'again' }, finishReason: 'stop' }) };
      const again = await DurableSession.open({ machine: createAgentMachine({ model: answer }), store, sessionId: 'numbers' });
      const usageNow = again.actor.getSnapshot().context.sessionUsage;
      expect(Number.isSafeInteger(usageNow.inputTokens) && usageNow.inputTokens >= 0).toBe(true);
      again.send({ type: 'input', message: 'more' });
      expect((await again.whenIdle())!.outcome).toEqual({ type: 'Completed', finalText: 'again' });
      await again.close();
    },
  );
});

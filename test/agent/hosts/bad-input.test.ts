/**
 * Input refused the same way through every host (issue 41 #8): nothing runs, and the typed error
 * names the field. The actor, `runAgent` and `streamAgent` end with `Failed(InvalidInput)` (the
 * two functions give the `InvalidFeedError` as `error`); `DurableSession.open` and
 * `new AgentStepper` throw that error, so no session is made.
 */
import { describe, expect, it } from 'vitest';
import { createActor, toPromise } from 'xstate';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import { AgentStepper } from '../../../src/agent/hosts/stepper.js';
import { runAgent, streamAgent } from '../../../src/agent/hosts/run-agent.js';
import { InvalidFeedError } from '../../../src/errors.js';
import type { Model } from '../../../src/model.js';
import type { Message } from '../../../src/schemas.js';
import { DurableSession } from '../../../src/sessions/durable-session.js';
import { MemorySessionStore } from '../../../src/stores/memory.js';

const history = [{ role: 'user', content: 'go' }, { role: 'assistant', content: '', toolCalls: [{ id: 'a', name: 'read', args: {} }] }] as Message[];
const PROBLEM = /^input\.history: starting history is not coherent: tool call 'a' at position 1 has no result$/;

function untouched(): Model & { calls: number } {
  const model = { name: 'untouched', calls: 0, generate: async () => ((model.calls++, { message: { role: 'assistant' as const, content: 'no' }, finishReason: 'stop' as const })) };
  return model;
}

describe('input the actor refuses, in every host', () => {
  it('the actor: done at creation with Failed(InvalidInput), nothing run', async () => {
    const model = untouched();
    for (const input of [{ prompt: 'x', history }, { history }, { prompt: 42 as never }, { sessionId: '' }, { prompt: 'x', policy: { compactThreshold: 'high' as never } }]) {
      const actor = createActor(createAgentMachine({ model }), { input });
      expect(actor.getSnapshot().status).toBe('done');
      const output = await toPromise(actor.start());
      expect(output).toMatchObject({ outcome: { type: 'Failed', error: { type: 'InvalidInput', message: expect.stringMatching(/^input\.(history|prompt|sessionId|policy): /) } }, messages: [] });
    }
    expect(model.calls).toBe(0);
  });

  it('runAgent and streamAgent resolve with the same outcome, the InvalidFeedError as error', async () => {
    const model = untouched();
    const result = await runAgent({ model, prompt: 'x', history });
    expect(result.outcome).toMatchObject({ type: 'Failed', error: { type: 'InvalidInput', message: expect.stringMatching(PROBLEM) } });
    expect(InvalidFeedError.isInstance(result.error)).toBe(true);
    expect(result.error!.message).toMatch(PROBLEM);
    const events: string[] = [];
    let done: Awaited<ReturnType<typeof runAgent>> | undefined;
    for await (const event of streamAgent({ model, prompt: 'x', history })) {
      events.push(event.type);
      if (event.type === 'done') done = event.result;
    }
    expect(events).toEqual(['done']);
    expect(done!.outcome).toEqual(result.outcome);
    expect(InvalidFeedError.isInstance(done!.error)).toBe(true);
    expect(model.calls).toBe(0);
  });

  it('DurableSession.open and new AgentStepper throw the InvalidFeedError: no session is stored', async () => {
    const machine = createAgentMachine({ model: untouched() });
    const store = new MemorySessionStore();
    const opened = DurableSession.open({ machine, store, sessionId: 'bad', history });
    const error = await opened.then(() => null, (thrown: unknown) => thrown);
    expect(InvalidFeedError.isInstance(error)).toBe(true);
    expect((error as Error).message).toMatch(PROBLEM);
    expect(await store.load('bad')).toBeUndefined();
    expect(() => new AgentStepper(machine, { input: { prompt: 'x', history } })).toThrow(PROBLEM);
  });
});

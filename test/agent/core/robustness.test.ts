import { outputOf } from '../../../src/agent/protocol/actor-types.js';
/**
 * Bad input from outside (a service's output, an event's payload) must end the run with a clear
 * outcome or be refused, never kill the actor: a dead session actor loses its conversation.
 */
import { describe, expect, it } from 'vitest';
import { createActor } from 'xstate';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import type { Compactor } from '../../../src/compaction/contract.js';
import { scriptedModel } from '../../../src/models/scripted.js';
import type { Message } from '../../../src/schemas.js';
import { echoTool, holdable, runFinished, runInSession, tick } from '../../support/driver.js';

const user = (content: string): Message => ({ role: 'user', content });

describe('bad service output fails the run, the session survives', () => {
  it('a model reply with the same tool call id twice: each call answered once under its own id, the prompt kept', async () => {
    const model = scriptedModel([
      { text: 'fine' },
      {
        toolCalls: [
          { name: 'echo', args: { text: 'a' }, id: 'dup' },
          { name: 'echo', args: { text: 'b' }, id: 'dup' },
        ],
      },
      { text: 'both done' },
    ]);
    const actor = createActor(createAgentMachine({ model, tools: [echoTool] }));
    actor.start();
    await runInSession(actor, 'one');
    const second = await runInSession(actor, 'two');
    expect(actor.getSnapshot().status).toBe('active');
    expect(second.outcome).toEqual({ type: 'Completed', finalText: 'both done' });
    expect(second.messages.filter((m) => m.role === 'tool').map((m) => [m.toolCallId, m.content])).toEqual([
      ['dup', 'a'],
      ['dup~2', 'b'],
    ]);
    expect(second.messages).toContainEqual(user('two'));
  });

  it('a compactor returning an incoherent conversation: Failed(CompactionError), actor alive', async () => {
    const compactor: Compactor = async ({ messages }) => ({
      // Drops the tool results but keeps the call: no provider would accept this.
      messages: messages.filter((m) => m.role !== 'tool'),
      tokensAfter: 10,
    });
    const model = scriptedModel([
      { toolCalls: [{ name: 'echo', args: { text: 'x' } }], usage: { inputTokens: 900, outputTokens: 0 } },
      { text: 'never' },
    ]);
    const actor = createActor(createAgentMachine({ model, tools: [echoTool], compactor }), {
      input: { policy: { contextWindow: 1000 } },
    });
    actor.subscribe({ error: () => {} });
    actor.start();
    actor.send({ type: 'input', message: 'go' });
    await tick(20);

    const snapshot = actor.getSnapshot();
    expect(snapshot.status).toBe('active');
    expect(snapshot.value).toBe('Idle');
    expect(outputOf(snapshot.context)?.outcome).toEqual({
      type: 'Failed',
      error: { type: 'CompactionError', message: expect.stringContaining("tool call 'call_1_0' at position 1 has no result") },
    });
    expect(outputOf(snapshot.context)?.messages).toEqual([]);
  });
});

describe('bad events are refused, the run goes on', () => {
  it('a policy event with an invalid policy leaves the policy unchanged and the actor alive', async () => {
    const h = holdable(scriptedModel([{ text: 'ok' }]));
    const entered = h.hold();
    const actor = createActor(createAgentMachine({ model: h.model }), { input: { policy: { maxTurns: 3 } } });
    actor.subscribe({ error: () => {} });
    actor.start();
    actor.send({ type: 'input', message: 'go' });
    await entered;
    actor.send({ type: 'policy', policy: { maxTurns: -1 } });
    expect(actor.getSnapshot().status).toBe('active');
    expect(actor.getSnapshot().context.policy.maxTurns).toBe(3);
    h.release();
    const output = await runFinished(actor, 1);
    expect(output.outcome).toEqual({ type: 'Completed', finalText: 'ok' });
    expect(output.messages).toEqual([user('go'), { role: 'assistant', content: 'ok' }]);
  });
});

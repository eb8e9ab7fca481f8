import { outputOf } from '../../../src/agent/protocol/actor-types.js';
/** A long-lived session actor: idle between runs, each `input` starts a run over the committed history. */
import { describe, expect, it } from 'vitest';
import { createActor } from 'xstate';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import { type AgentEmitted } from '../../../src/agent/protocol/actor-types.js';
import { scriptedModel } from '../../../src/models/scripted.js';
import type { Message } from '../../../src/schemas.js';
import { echoTool, providerValid, recording, runInSession } from '../../support/driver.js';

const user = (content: string): Message => ({ role: 'user', content });

describe('a session', () => {
  it('starts Idle, runs twice in a row and keeps the conversation between runs', async () => {
    const model = recording(
      scriptedModel([
        { text: 'checking', toolCalls: [{ name: 'echo', args: { text: 'x' } }], usage: { inputTokens: 10, outputTokens: 2 } },
        { text: 'one', usage: { inputTokens: 20, outputTokens: 1 } },
        { text: 'two', usage: { inputTokens: 40, outputTokens: 1 } },
      ]),
    );
    // maxTurns counts per run: run 1 takes both of its turns, run 2 starts from zero.
    const actor = createActor(createAgentMachine({ model, tools: [echoTool] }), {
      input: { sessionId: 'sess', policy: { maxTurns: 2 } },
    });
    const finished: AgentEmitted[] = [];
    actor.on('run.finished', (e) => finished.push(e));
    actor.start();
    expect(actor.getSnapshot().value).toBe('Idle');
    expect(actor.getSnapshot().status).toBe('active');
    expect(outputOf(actor.getSnapshot().context)).toBeNull();

    const first = await runInSession(actor, 'first');
    const run1: Message[] = [
      user('first'),
      { role: 'assistant', content: 'checking', toolCalls: [{ id: 'call_1_0', name: 'echo', args: { text: 'x' } }] },
      { role: 'tool', toolCallId: 'call_1_0', toolName: 'echo', content: 'x' },
      { role: 'assistant', content: 'one' },
    ];
    expect(first).toEqual({
      outcome: { type: 'Completed', finalText: 'one' },
      messages: run1,
      usage: { inputTokens: 30, outputTokens: 3 },
    });
    expect(actor.getSnapshot().value).toBe('Idle');
    expect(outputOf(actor.getSnapshot().context)).toEqual(first);

    const second = await runInSession(actor, 'second');
    expect(second).toEqual({
      outcome: { type: 'Completed', finalText: 'two' },
      messages: [...run1, user('second'), { role: 'assistant', content: 'two' }],
      usage: { inputTokens: 40, outputTokens: 1 },
    });
    expect(providerValid(second.messages)).toBe(true);
    expect(model.seen.map((r) => r.idempotencyKey)).toEqual([
      'sess:run-1:turn-1:model',
      'sess:run-1:turn-2:model',
      'sess:run-2:turn-1:model',
    ]);
    expect(model.seen[2]!.messages).toEqual([...run1, user('second')]);

    const snapshot = actor.getSnapshot();
    expect(snapshot.value).toBe('Idle');
    expect(snapshot.status).toBe('active');
    expect(snapshot.context.runIndex).toBe(2);
    expect(snapshot.context.sessionUsage).toEqual({ inputTokens: 70, outputTokens: 4 });
    expect(snapshot.context.brain.context.history).toEqual(second.messages);
    expect(finished.map((e) => e.type === 'run.finished' && e.output)).toEqual([first, second]);
  });
});

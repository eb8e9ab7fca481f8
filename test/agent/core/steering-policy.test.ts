/** Events that act on a running run at the next step: steer (seed 004) and policy. */
import { describe, expect, it } from 'vitest';
import { createActor } from 'xstate';
import { z } from 'zod';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import type { Compactor } from '../../../src/compaction/contract.js';
import { scriptedModel } from '../../../src/models/scripted.js';
import type { Message, ToolMessage } from '../../../src/schemas.js';
import { defineTool } from '../../../src/tools/define-tool.js';
import { deferred, echoTool, holdable, providerValid, runToCompletion } from '../../support/driver.js';

const user = (content: string): Message => ({ role: 'user', content });
const echoResult = (id: string, content: string): ToolMessage => ({ role: 'tool', toolCallId: id, toolName: 'echo', content });
const a1: Message = { role: 'assistant', content: 'looking', toolCalls: [{ id: 'call_1_0', name: 'echo', args: { text: 'x' } }] };
const r1 = echoResult('call_1_0', 'x');

const toolThenText = () =>
  scriptedModel([
    { text: 'looking', toolCalls: [{ name: 'echo', args: { text: 'x' } }], usage: { inputTokens: 850, outputTokens: 0 } },
    { text: 'answered', usage: { inputTokens: 100, outputTokens: 5 } },
  ]);

describe('steering mid-run', () => {
  it('sent while the model call is in flight: delivered after the tool results, before the next call', async () => {
    const h = holdable(toolThenText());
    const entered = h.hold();
    const actor = createActor(createAgentMachine({ model: h.model, tools: [echoTool] }), { input: { prompt: 'go' } });
    actor.start();
    await entered;
    actor.send({ type: 'steer', message: 'also say bye' });
    expect(actor.getSnapshot().context.brain.context.steering).toEqual([user('also say bye')]);
    h.release();
    const output = await runToCompletion(actor);

    expect(h.seen.map((r) => r.messages)).toEqual([[user('go')], [user('go'), a1, r1, user('also say bye')]]);
    expect(output.outcome).toEqual({ type: 'Completed', finalText: 'answered' });
    expect(output.messages).toEqual([user('go'), a1, r1, user('also say bye'), { role: 'assistant', content: 'answered' }]);
    expect(providerValid(output.messages)).toBe(true);
  });

  it('sent while tools run: delivered after their results', async () => {
    const gate = deferred();
    const started = deferred();
    const gated = defineTool({
      name: 'echo',
      description: 'echo, waiting for the test',
      input: z.object({ text: z.string() }),
      execute: async ({ text }) => {
        started.resolve();
        await gate.promise;
        return text;
      },
    });
    const h = holdable(toolThenText());
    const actor = createActor(createAgentMachine({ model: h.model, tools: [gated] }), { input: { prompt: 'go' } });
    actor.start();
    await started.promise;
    expect(actor.getSnapshot().matches({ Running: 'AwaitingTools' })).toBe(true);
    actor.send({ type: 'steer', message: { role: 'user', content: 'and hurry' } });
    gate.resolve();
    const output = await runToCompletion(actor);
    expect(output.messages).toEqual([user('go'), a1, r1, user('and hurry'), { role: 'assistant', content: 'answered' }]);
    expect(h.seen[1]!.messages).toEqual([user('go'), a1, r1, user('and hurry')]);
  });

  it('queued when the reply has no tool calls: the run keeps going for another turn', async () => {
    const h = holdable(scriptedModel([{ text: 'first answer' }, { text: 'second answer' }]));
    const entered = h.hold();
    const actor = createActor(createAgentMachine({ model: h.model }), { input: { prompt: 'go' } });
    actor.start();
    await entered;
    actor.send({ type: 'steer', message: 'one more thing' });
    h.release();
    const output = await runToCompletion(actor);
    expect(output.outcome).toEqual({ type: 'Completed', finalText: 'second answer' });
    expect(output.messages).toEqual([
      user('go'),
      { role: 'assistant', content: 'first answer' },
      user('one more thing'),
      { role: 'assistant', content: 'second answer' },
    ]);
    expect(h.seen).toHaveLength(2);
  });
});

describe('policy change between steps', () => {
  it('maxTurns lowered while the model call is in flight: MaxTurnsExceeded at the next step', async () => {
    const h = holdable(toolThenText());
    const entered = h.hold();
    const actor = createActor(createAgentMachine({ model: h.model, tools: [echoTool] }), {
      input: { prompt: 'go', policy: { maxTurns: 10 } },
    });
    actor.start();
    await entered;
    actor.send({ type: 'policy', policy: { maxTurns: 1 } });
    expect(actor.getSnapshot().context.policy.maxTurns).toBe(1);
    h.release();
    const output = await runToCompletion(actor);
    expect(output.outcome).toEqual({ type: 'MaxTurnsExceeded' });
    // The turn in flight finishes, its tools run, and the limit stops the run before turn 2.
    expect(output.messages).toEqual([user('go'), a1, r1]);
    expect(h.seen).toHaveLength(1);
  });

  it('maxTurns raised while the model call is in flight: the run goes on', async () => {
    const h = holdable(toolThenText());
    const entered = h.hold();
    const actor = createActor(createAgentMachine({ model: h.model, tools: [echoTool] }), {
      input: { prompt: 'go', policy: { maxTurns: 1 } },
    });
    actor.start();
    await entered;
    actor.send({ type: 'policy', policy: { maxTurns: 5 } });
    h.release();
    const output = await runToCompletion(actor);
    expect(output.outcome).toEqual({ type: 'Completed', finalText: 'answered' });
    expect(h.seen).toHaveLength(2);
  });

  it('contextWindow lowered mid-run: the next step compacts', async () => {
    const calls: string[] = [];
    const compactor: Compactor = async ({ messages, reason }) => {
      calls.push(reason);
      return { messages: [...messages], tokensAfter: 100 };
    };
    const h = holdable(toolThenText());
    const entered = h.hold();
    const actor = createActor(createAgentMachine({ model: h.model, tools: [echoTool], compactor }), { input: { prompt: 'go' } });
    actor.start();
    await entered;
    actor.send({ type: 'policy', policy: { contextWindow: 1000 } });
    h.release();
    const output = await runToCompletion(actor);
    // 850 reported tokens + the result: above 80 % of 1,000, below 95 %.
    expect(calls).toEqual(['ThresholdExceeded']);
    expect(output.outcome).toEqual({ type: 'Completed', finalText: 'answered' });
  });
});

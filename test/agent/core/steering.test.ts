/**
 * In-turn steering through the driver (issue 6, seed 004): a `steer` event during a run is queued
 * in the brain (`context.brain.context.steering`) and delivered at the next coherent point: after
 * the tool results of the batch in flight, or instead of completing when the reply has no calls.
 */
import { describe, expect, it } from 'vitest';
import { createActor } from 'xstate';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import { scriptedModel } from '../../../src/models/scripted.js';
import type { Message } from '../../../src/schemas.js';
import { holdable, runToCompletion, waitForRunning } from '../../support/driver.js';
import { ask, awaitingApproval, freeTool, guardedTool, providerValid, recordingModel, resultsById, user } from '../../support/hitl.js';

const assistant = (content: string, toolCalls?: { id: string; name: string; args: unknown }[]): Message =>
  toolCalls ? { role: 'assistant', content, toolCalls } : { role: 'assistant', content };

describe('steering through the driver', () => {
  it('sent while tools run: queued, then delivered right after the batch results, before the next model call', async () => {
    const free = freeTool('lookup', { held: true });
    const model = recordingModel(scriptedModel([{ text: 'looking', toolCalls: [ask('lookup', { key: 'k' })] }, { text: 'answered' }]));
    const actor = createActor(createAgentMachine({ model: model.model, tools: [free.tool], retry: false }), { input: { prompt: 'go' } });
    actor.start();
    await free.started;
    actor.send({ type: 'steer', message: 'only the summary, please' });
    // Queued in the brain, not yet in the conversation: the batch is open.
    expect(actor.getSnapshot().context.brain.context.steering).toEqual([user('only the summary, please')]);
    expect(actor.getSnapshot().context.brain.context.pending.some((m) => m.role === 'user' && m.content.startsWith('only'))).toBe(false);
    free.release();
    const output = await runToCompletion(actor);

    const a1 = assistant('looking', [{ id: 'call_1_0', name: 'lookup', args: { key: 'k' } }]);
    const r1: Message = { role: 'tool', toolCallId: 'call_1_0', toolName: 'lookup', content: 'value of k' };
    expect(model.requests).toEqual([[user('go')], [user('go'), a1, r1, user('only the summary, please')]]);
    expect(output.messages).toEqual([user('go'), a1, r1, user('only the summary, please'), assistant('answered')]);
    expect(output.outcome).toEqual({ type: 'Completed', finalText: 'answered' });
    expect(model.invalid()).toEqual([]);
  });

  it('sent while the final answer is being generated: the run does not complete, it takes another turn with the message', async () => {
    const h = holdable(scriptedModel([{ text: 'first answer' }, { text: 'revised answer' }]));
    const model = recordingModel(h.model);
    const entered = h.hold();
    const actor = createActor(createAgentMachine({ model: model.model, retry: false }), { input: { prompt: 'go' } });
    actor.start();
    await entered;
    actor.send({ type: 'steer', message: 'in French' });
    actor.send({ type: 'steer', message: 'and shorter' });
    h.release();
    const output = await runToCompletion(actor);
    expect(output.outcome).toEqual({ type: 'Completed', finalText: 'revised answer' });
    expect(model.requests[1]).toEqual([user('go'), assistant('first answer'), user('in French'), user('and shorter')]);
    expect(output.messages).toEqual([user('go'), assistant('first answer'), user('in French'), user('and shorter'), assistant('revised answer')]);
    expect(output.messages.filter((m) => m.role === 'user')).toHaveLength(3); // each message delivered once
    expect(model.invalid()).toEqual([]);
  });

  it('sent while calls wait for approval: delivered after the batch (denial included), never between a call and its result', async () => {
    const { tool, ran } = guardedTool();
    const model = recordingModel(
      scriptedModel([{ text: 'writing', toolCalls: [ask('write_file', { path: 'a.txt', content: 'x' })] }, { text: 'ok, not writing' }]),
    );
    const actor = createActor(createAgentMachine({ model: model.model, tools: [tool], retry: false }), { input: { prompt: 'go' } });
    actor.start();
    await awaitingApproval(actor);
    actor.send({ type: 'steer', message: 'do not touch the disk' });
    actor.send({ type: 'deny', toolCallId: 'call_1_0', reason: 'see my message' });
    const output = await runToCompletion(actor);
    expect(ran).toEqual([]);
    const second = model.requests[1]!;
    expect(second.slice(-2)).toEqual([resultsById(output.messages).get('call_1_0'), user('do not touch the disk')]);
    expect(model.invalid()).toEqual([]);
    expect(providerValid(output.messages)).toBe(true);
  });

  it('an input sent during a run is steering too, and a steer at the model call boundary is delivered exactly once', async () => {
    const h = holdable(
      scriptedModel([{ text: 'step', toolCalls: [ask('lookup', { key: 'a' })] }, { text: 'step 2', toolCalls: [ask('lookup', { key: 'b' })] }, { text: 'end' }]),
    );
    const model = recordingModel(h.model);
    const free = freeTool();
    const actor = createActor(createAgentMachine({ model: model.model, tools: [free.tool], retry: false }), { input: { prompt: 'go' } });
    const entered = h.hold((request) => request.messages.filter((m) => m.role === 'assistant').length === 1);
    actor.start();
    await entered;
    await waitForRunning(actor, 'AwaitingModel', 1);
    actor.send({ type: 'input', message: 'also b' });
    h.release();
    const output = await runToCompletion(actor);
    expect(output.messages.filter((m) => m.role === 'user').map((m) => m.content)).toEqual(['go', 'also b']);
    // Delivered after turn 2's tool results: the request of turn 3 carries it, turn 2's did not.
    expect(model.requests[1]!.some((m) => m.role === 'user' && m.content === 'also b')).toBe(false);
    expect(model.requests[2]!.at(-1)).toEqual(user('also b'));
    expect(model.invalid()).toEqual([]);
  });
});

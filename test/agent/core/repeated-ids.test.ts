/**
 * Repeated tool-call ids (providers do repeat them): within one reply, an exact repeat runs once
 * and a different call under a taken id runs under a fresh id; across replies ids may repeat;
 * a restored history with repeated ids keeps its cuts coherent. The run never fails for it and
 * nothing the user wrote is lost.
 */
import { describe, expect, it } from 'vitest';
import { createActor, toPromise } from 'xstate';
import { z } from 'zod';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import { inputRefusal } from '../../../src/agent/core/actor-input.js';
import { uniqueCallIds } from '../../../src/agent/core/call-ids.js';
import { coherentCut, conversationFault } from '../../../src/brain/conversation.js';
import { InvalidFeedError } from '../../../src/errors.js';
import { LoopMachine } from '../../../src/brain/loop-machine.js';
import type { Message, ToolCall } from '../../../src/schemas.js';
import { scriptedModel } from '../../../src/testing.js';
import { defineTool } from '../../../src/tools/define-tool.js';

const ran: string[] = [];
const note = defineTool({
  name: 'note',
  description: 'Notes a word.',
  input: z.object({ word: z.string() }),
  execute: ({ word }) => {
    ran.push(word);
    return `noted ${word}`;
  },
});
const call = (id: string, word: string): ToolCall => ({ id, name: 'note', args: { word } });

describe('repeated tool-call ids', () => {
  it('within one reply: an exact repeat runs once, a different call gets a fresh id; the history is provider-valid', async () => {
    ran.length = 0;
    const model = scriptedModel([{ toolCalls: [call('c', 'a'), call('c', 'a'), call('c', 'b'), call('c~2', 'z')] }, { text: 'done' }]);
    const output = await toPromise(createActor(createAgentMachine({ model, tools: [note] }), { input: { prompt: 'Keep this prompt.' } }).start());
    expect(output.outcome).toEqual({ type: 'Completed', finalText: 'done' });
    expect(ran.sort()).toEqual(['a', 'b', 'z']);
    expect(conversationFault(output.messages)).toBeNull();
    expect(output.messages[0]).toEqual({ role: 'user', content: 'Keep this prompt.' });
    const reply = output.messages[1] as Extract<Message, { role: 'assistant' }>;
    expect(reply.toolCalls?.map((c) => c.id)).toEqual(['c', 'c~3', 'c~2']);
    const results = output.messages.filter((m) => m.role === 'tool');
    expect(results.map((m) => [m.toolCallId, m.content])).toEqual([
      ['c', 'noted a'],
      ['c~3', 'noted b'],
      ['c~2', 'noted z'],
    ]);
  });

  it('across replies: the same id in each turn is answered each time', async () => {
    ran.length = 0;
    const model = scriptedModel([{ toolCalls: [call('call_0', 'one')] }, { toolCalls: [call('call_0', 'two')] }, { text: 'done' }]);
    const output = await toPromise(createActor(createAgentMachine({ model, tools: [note] }), { input: { prompt: 'go' } }).start());
    expect(output.outcome.type).toBe('Completed');
    expect(ran).toEqual(['one', 'two']);
    expect(conversationFault(output.messages)).toBeNull();
  });

  it('renaming is a pure function of the reply (a replayed reply gets the same ids)', () => {
    const reply = { message: { role: 'assistant' as const, content: '', toolCalls: [call('x', '1'), call('x', '2'), call('x', '3')] }, finishReason: 'tool-calls' as const };
    expect(uniqueCallIds(reply)).toEqual(uniqueCallIds(structuredClone(reply)));
    expect(uniqueCallIds(reply).message.toolCalls?.map((c) => c.id)).toEqual(['x', 'x~2', 'x~3']);
  });

  it('a restored history with ids repeated across turns continues; coherentCut never splits two open calls of one id', async () => {
    const history: Message[] = [
      { role: 'user', content: 'go' },
      { role: 'assistant', content: '', toolCalls: [call('call_0', 'a')] },
      { role: 'tool', toolCallId: 'call_0', toolName: 'note', content: 'noted a' },
      { role: 'assistant', content: '', toolCalls: [call('call_0', 'b')] },
      { role: 'tool', toolCallId: 'call_0', toolName: 'note', content: 'noted b' },
      { role: 'assistant', content: 'ok' },
    ];
    const output = await toPromise(createActor(createAgentMachine({ model: { name: 'fixed', generate: async () => ({ message: { role: 'assistant', content: 'again' }, finishReason: 'stop' }) }, tools: [note] }), { input: { prompt: 'more', history } }).start());
    expect(output.outcome.type).toBe('Completed');
    expect(output.messages.slice(0, history.length)).toEqual(history);
    // Two calls open under one id: one result does not make a cut.
    const twice: Message[] = [
      { role: 'user', content: 'go' },
      { role: 'assistant', content: '', toolCalls: [call('d', 'a'), call('d', 'b')] },
      { role: 'tool', toolCallId: 'd', toolName: 'note', content: 'one' },
      { role: 'tool', toolCallId: 'd', toolName: 'note', content: 'two' },
    ];
    expect(coherentCut(twice, 3)).toBe(1);
    expect(coherentCut(twice, 4)).toBe(4);
  });
});

describe('one coherence check for a starting history', () => {
  const open: Message[] = [{ role: 'user', content: 'go' }, { role: 'assistant', content: '', toolCalls: [call('a', 'x')] }];
  const between: Message[] = [...open, { role: 'user', content: 'in between' }, { role: 'tool', toolCallId: 'a', toolName: 'note', content: 'late' }];

  for (const [name, history] of Object.entries({ 'an unanswered call': open, 'a message between a call and its result': between })) {
    it(`input.history with ${name} is refused with a typed error naming the position, as LoopMachine refuses it`, () => {
      // The actor ends at once, Failed(InvalidInput) (a throw would end the process from XState's timer); the error is kept for hosts that throw it.
      const actor = createActor(createAgentMachine({ model: scriptedModel([{ text: 'never' }]) }), { input: { prompt: 'x', history } });
      const error = inputRefusal(actor.getSnapshot().context);
      expect(InvalidFeedError.isInstance(error)).toBe(true);
      expect(String(error!.message)).toMatch(/position \d/);
      expect(actor.getSnapshot().output!.outcome).toEqual({ type: 'Failed', error: { type: 'InvalidInput', message: error!.message } });
      expect(() => new LoopMachine({ history })).toThrow(error!.message.replace(/^input\.history: /, ''));
    });
  }

  it('a malformed message in input.history is refused the same way', () => {
    const actor = createActor(createAgentMachine({ model: scriptedModel([{ text: 'never' }]) }), { input: { history: [{ role: 'robot', content: 1 }] as never } });
    expect(InvalidFeedError.isInstance(inputRefusal(actor.getSnapshot().context))).toBe(true);
  });
});

/**
 * What a page shows of the answers loopchart judges before it takes them: an output schema's
 * `final_answer` calls (a rejected one marked as an error, the accepted one with the answer, the
 * parsed answer in the finish metadata), an output guardrail's feedback round, and a reload of
 * either: the feedback loopchart sent the model is not shown as a message the user wrote.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createChatHandler, type ChatHandler } from '../../src/http.js';
import { createAgentMachine, MemorySessionStore, type Guardrail } from '../../src/index.js';
import { scriptedModel } from '../../src/testing.js';
import { loadSdk, nodeMajor, page, userMessage } from './support.js';

const handlers: ChatHandler[] = [];
afterEach(async () => {
  await Promise.all(handlers.splice(0).map((handler) => handler.close()));
});

function chatOf(machine: Parameters<typeof createChatHandler>[0]['machine'], aiSdk: 5 | 6 | 7 = 6) {
  const handler = createChatHandler({ machine, store: new MemorySessionStore(), aiSdk });
  handlers.push(handler);
  const reload = async (chatId: string) =>
    ((await (await handler(new Request(`http://127.0.0.1/api/chat/${chatId}/messages`))).json()) as { messages: Array<{ role: string; parts: Array<{ type: string; text?: string }> }> }).messages;
  return { handler, reload };
}

const City = z.object({ city: z.string(), population: z.number().int() });

describe('an output schema in the page', () => {
  it('the rejected final_answer is an error part, the accepted one carries the answer, the finish metadata the parsed output', async () => {
    const machine = createAgentMachine({
      model: scriptedModel([
        { toolCalls: [{ id: 'a1', name: 'final_answer', args: { city: 'Lyon', population: 'about half a million' } }] },
        { toolCalls: [{ id: 'a2', name: 'final_answer', args: { city: 'Lyon', population: 520000 } }] },
      ]),
      output: City,
    });
    const { handler, reload } = chatOf(machine);
    const message = await page(await loadSdk(6), handler, 'city').send([userMessage('The largest city of the Rhône?')]);
    const answers = message.parts.filter((part) => part.type === 'tool-final_answer');
    // Before: both stayed `input-available` for ever, and the page never got the answer.
    expect(answers.map((part) => [part.toolCallId, part.state])).toEqual([
      ['a1', 'output-error'],
      ['a2', 'output-available'],
    ]);
    expect(answers[0]!.errorText).toMatch(/at population: Invalid input: expected number/);
    expect(answers[1]!.output).toEqual({ city: 'Lyon', population: 520000 });
    expect(message.metadata).toMatchObject({ outcome: 'Completed', output: { city: 'Lyon', population: 520000 } });
    // A reload: the user's question and one assistant message (the transcript keeps each answer as its JSON text); no feedback as the user's.
    const messages = await reload('city');
    expect(messages.map((m) => m.role)).toEqual(['user', 'assistant']);
    expect(messages[1]!.parts.filter((part) => part.type === 'text').map((part) => part.text)).toEqual([
      '{"city":"Lyon","population":"about half a million"}',
      '{"city":"Lyon","population":520000}',
    ]);
  });
});

describe('an output guardrail in the page', () => {
  const cites: Guardrail = {
    name: 'cites',
    check: ({ text }) => (text.includes('(source:') ? { type: 'pass' } : { type: 'feedback', message: 'Name your source as (source: ...).' }),
  };

  it('a feedback round: the page and a reload both show the two answers in one assistant message, not the feedback', async () => {
    const machine = createAgentMachine({ model: scriptedModel([{ text: 'Refunds take 5 days.' }, { text: 'Refunds take 5 days (source: policy).' }]), guardrails: { output: [cites] } });
    const { handler, reload } = chatOf(machine);
    const message = await page(await loadSdk(6), handler, 'refunds').send([userMessage('Refunds?')]);
    const live = message.parts.filter((part) => part.type === 'text').map((part) => part.text);
    expect(live).toEqual(['Refunds take 5 days.', 'Refunds take 5 days (source: policy).']);
    const messages = await reload('refunds');
    expect(messages.map((m) => m.role)).toEqual(['user', 'assistant']);
    expect(messages[1]!.parts.filter((part) => part.type === 'text').map((part) => part.text)).toEqual(live);
  });

  it('a message the user typed that reads like feedback is still shown as theirs unless loopchart wrote it whole', async () => {
    const machine = createAgentMachine({ model: scriptedModel([{ text: 'Noted.' }]) });
    const { handler, reload } = chatOf(machine);
    await page(await loadSdk(6), handler, 'typed').send([userMessage('Your answer was not accepted:\nplease be brief')]);
    expect((await reload('typed')).map((m) => m.role)).toEqual(['user', 'assistant']);
  });

  it.skipIf(nodeMajor < 22)('a tripped guardrail: AI SDK 7 takes the refused answer back (reset-step), and the page keeps none of it', async () => {
    const noSecrets: Guardrail = { name: 'no-secrets', check: ({ text }) => (text.includes('SECRET') ? { type: 'trip' } : { type: 'pass' }) };
    const machine = createAgentMachine({ model: scriptedModel([{ text: 'The password is SECRET-1234.' }]), guardrails: { output: [noSecrets] } });
    const { handler } = chatOf(machine, 7);
    const chat = page(await loadSdk(7), handler, 'secret');
    const message = await chat.send([userMessage('The password?')]);
    expect(message.metadata).toMatchObject({ outcome: 'Failed' });
    expect(JSON.stringify(message.parts)).not.toContain('SECRET');
  });
});

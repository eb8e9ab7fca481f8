import { describe, expect, it } from 'vitest';
import type { CompactionRequest } from '../../src/compaction/contract.js';
import { InvalidSummaryError, summarizingCompactor } from '../../src/compaction/summarize.js';
import type { Model } from '../../src/model.js';
import { ModelError } from '../../src/model.js';
import { scriptedModel, type ScriptedReply } from '../../src/models/scripted.js';
import type { Message } from '../../src/schemas.js';
import { asst, call, sys, toolMsg, user } from '../support/brain.js';

function conversation(): Message[] {
  const messages: Message[] = [sys('you read logs'), user('find the failing worker')];
  for (let i = 0; i < 6; i++) {
    messages.push(asst(`reading ${i}`, [call(`c${i}`, 'read', { path: `${i}.log` })]));
    messages.push(toolMsg(`c${i}`, 'read', `log ${i}: `.repeat(60)));
  }
  messages.push(asst('still looking'));
  return messages;
}

function request(messages: readonly Message[], model: Model): CompactionRequest {
  return {
    messages,
    reason: 'ThresholdExceeded',
    tokensBefore: 10_000,
    contextWindow: 12_000,
    tools: [],
    idempotencyKey: 'compaction-1',
    model,
    signal: new AbortController().signal,
  };
}

async function compactWith(reply: ScriptedReply): Promise<unknown> {
  const messages = conversation();
  const before = structuredClone(messages);
  const compactor = summarizingCompactor({ keepTokens: 50 });
  const error = await compactor(request(messages, scriptedModel([reply]))).then(
    () => undefined,
    (e: unknown) => e,
  );
  // Whatever happens, the conversation handed in is untouched: nothing is lost.
  expect(messages).toEqual(before);
  return error;
}

describe('summarizingCompactor never drops turns for an unusable summary', () => {
  it.each([
    ['an empty summary', { text: '' }],
    ['a whitespace-only summary', { text: '  \n\t ' }],
  ])('%s fails the compaction with a retryable InvalidSummaryError', async (_, reply) => {
    const error = await compactWith(reply);
    expect(error).toBeInstanceOf(InvalidSummaryError);
    expect(error).toBeInstanceOf(ModelError);
    expect(error).toMatchObject({ reason: 'empty', retryable: true });
    expect((error as Error).message).toBe('compaction failed: the model returned an empty summary');
  });

  it.each([
    ['cut by the output limit', 'length'],
    ['cut by a content filter', 'content-filter'],
  ] as const)('a summary %s fails it too, not retryable', async (_, finishReason) => {
    const error = await compactWith({ text: 'The user wants the failing worker; logs 0 to 3 were', finishReason });
    expect(error).toBeInstanceOf(InvalidSummaryError);
    expect(error).toMatchObject({ reason: 'truncated', retryable: false, finishReason });
    expect((error as Error).message).toBe(`compaction failed: the summary was cut short (finish reason "${finishReason}")`);
  });

  it('an empty summary is asked for once more, under its own idempotency key, and a good second one compacts', async () => {
    const keys: string[] = [];
    const answers = ['', 'logs 0-5 were clean'];
    const model: Model = {
      name: 'flaky-summarizer',
      async generate(req) {
        keys.push(req.idempotencyKey);
        return { message: { role: 'assistant', content: answers[keys.length - 1] ?? '' }, finishReason: 'stop' };
      },
    };
    const result = await summarizingCompactor({ keepTokens: 50 })(request(conversation(), model));
    expect(keys).toHaveLength(2);
    expect(new Set(keys).size).toBe(2);
    expect(result?.messages.some((m) => m.role === 'assistant' && m.content.endsWith('logs 0-5 were clean'))).toBe(true);
  });

  it('a summary cut short is not asked again', async () => {
    let calls = 0;
    const model: Model = {
      name: 'cut',
      async generate() {
        calls++;
        return { message: { role: 'assistant', content: 'half a' }, finishReason: 'length' };
      },
    };
    await expect(summarizingCompactor({ keepTokens: 50 })(request(conversation(), model))).rejects.toBeInstanceOf(InvalidSummaryError);
    expect(calls).toBe(1);
  });
});

import { describe, expect, it } from 'vitest';
import {
  InvalidModelReplyError,
  MAX_REPORTED_TOKENS,
  ModelError,
  ModelReplySchema,
  normalizeUsage,
  parseModelReply,
} from '../../src/model.js';
import { MAX_JSON_DEPTH } from '../../src/json-value.js';
import { UsageSchema } from '../../src/schemas.js';

const text = { role: 'assistant', content: 'ok' } as const;

function nested(depth: number): unknown {
  let value: unknown = 1;
  for (let i = 0; i < depth; i++) value = { a: value };
  return value;
}

describe('ModelReplySchema: provider numbers are normalised where a reply enters', () => {
  it.each([
    [{ inputTokens: 1.5, outputTokens: 1 }, { inputTokens: 2, outputTokens: 1 }],
    [{ inputTokens: 10.4, outputTokens: 0.5 }, { inputTokens: 10, outputTokens: 1 }],
    [{ inputTokens: 7 }, { inputTokens: 7, outputTokens: 0 }],
    [{ inputTokens: MAX_REPORTED_TOKENS, outputTokens: 0 }, { inputTokens: MAX_REPORTED_TOKENS, outputTokens: 0 }],
  ])('usage %j becomes %j', (usage, expected) => {
    const reply = parseModelReply({ message: text, finishReason: 'stop', usage });
    expect(reply.usage).toEqual(expected);
    expect(UsageSchema.safeParse(reply.usage).success).toBe(true);
  });

  it.each([
    { inputTokens: -100, outputTokens: 1 },
    { inputTokens: 1e300, outputTokens: 1 },
    { inputTokens: MAX_REPORTED_TOKENS + 1, outputTokens: 1 },
    { inputTokens: Number.NaN, outputTokens: 1 },
    { inputTokens: 1, outputTokens: Number.POSITIVE_INFINITY },
    { inputTokens: '10', outputTokens: 1 },
    {},
    'lots',
    null,
  ])('usage %j is dropped, so the driver estimates instead', (usage) => {
    const reply = parseModelReply({ message: text, finishReason: 'stop', usage });
    expect(reply).not.toHaveProperty('usage');
    expect(normalizeUsage(usage)).toBeUndefined();
  });

  it.each(['bogus', 'tool_calls', 42, undefined, null])('finish reason %j becomes "other"', (finishReason) => {
    expect(parseModelReply({ message: text, finishReason }).finishReason).toBe('other');
  });

  it('keeps each of our own finish reasons', () => {
    for (const reason of ['stop', 'length', 'content-filter', 'tool-calls', 'cancelled', 'other'] as const) {
      expect(ModelReplySchema.parse({ message: text, finishReason: reason }).finishReason).toBe(reason);
    }
  });

  it.each([
    ['no reply at all', undefined],
    ['null content', { message: { role: 'assistant', content: null }, finishReason: 'stop' }],
    ['a user message', { message: { role: 'user', content: 'x' }, finishReason: 'stop' }],
    ['toolCalls not an array', { message: { role: 'assistant', content: '', toolCalls: 'x' }, finishReason: 'stop' }],
    ['a tool call without a name', { message: { role: 'assistant', content: '', toolCalls: [{ id: 'c1', args: {} }] }, finishReason: 'stop' }],
    ['arguments 10,000 deep', { message: { role: 'assistant', content: '', toolCalls: [{ id: 'c1', name: 't', args: nested(10_000) }] }, finishReason: 'stop' }],
    ['a function in the arguments', { message: { role: 'assistant', content: '', toolCalls: [{ id: 'c1', name: 't', args: { f: () => 1 } }] }, finishReason: 'stop' }],
    ['a BigInt in the arguments', { message: { role: 'assistant', content: '', toolCalls: [{ id: 'c1', name: 't', args: { n: 1n } }] }, finishReason: 'stop' }],
  ])('refuses %s with a non-retryable InvalidModelReplyError saying what was wrong', (_, value) => {
    let caught: unknown;
    try {
      parseModelReply(value);
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(InvalidModelReplyError);
    expect(caught).toBeInstanceOf(ModelError);
    expect((caught as ModelError).retryable).toBe(false);
    expect((caught as Error).message).toMatch(/^the model returned an invalid reply: /);
  });

  it('accepts arguments exactly as deep as a stored snapshot may hold them, and no deeper', () => {
    const at = (depth: number) => ({
      message: { role: 'assistant', content: '', toolCalls: [{ id: 'c1', name: 't', args: nested(depth) }] },
      finishReason: 'tool-calls',
    });
    expect(parseModelReply(at(MAX_JSON_DEPTH)).message.toolCalls).toHaveLength(1);
    expect(() => parseModelReply(at(MAX_JSON_DEPTH + 1))).toThrow(InvalidModelReplyError);
  });
});

import { describe, expect, it } from 'vitest';
import { ChatChunkAssembler, parseArguments } from '../../src/models/chat-chunks.js';
import { MalformedStreamError } from '../../src/models/errors.js';
import { normalizeFinishReason, replyFinishReason } from '../../src/models/finish-reason.js';
import { httpModelError, isRetryableStatus, parseRetryAfter, providerMessage } from '../../src/models/http-status.js';

const tc = (d: Record<string, unknown>) => ({ choices: [{ index: 0, delta: { tool_calls: [d] }, finish_reason: null }] });

describe('ChatChunkAssembler', () => {
  it('starts a new call when a known index arrives with a different id (servers that reuse index 0)', () => {
    const a = new ChatChunkAssembler({ fallbackIdPrefix: 'call_k' });
    a.push(tc({ index: 0, id: 'x', function: { name: 'f', arguments: '{"a":1}' } }));
    a.push(tc({ index: 0, id: 'y', function: { name: 'g', arguments: '{"b":' } }));
    a.push(tc({ index: 0, function: { arguments: '2}' } }));
    a.push({ choices: [{ index: 0, delta: {}, finish_reason: 'tool_calls' }] });
    expect(a.reply().message.toolCalls).toEqual([
      { id: 'x', name: 'f', args: { a: 1 } },
      { id: 'y', name: 'g', args: { b: 2 } },
    ]);
  });

  it('tolerates repeated id and name on every delta, object arguments and missing index', () => {
    const a = new ChatChunkAssembler({ fallbackIdPrefix: 'call_k' });
    a.push(tc({ index: 0, id: 'x', function: { name: 'f', arguments: '{"a"' } }));
    a.push(tc({ index: 0, id: 'x', function: { name: 'f', arguments: ':1}' } }));
    a.push({ choices: [{ delta: { tool_calls: [{ id: 'z', function: { name: 'h', arguments: { whole: true } } }] } }] });
    expect(a.reply().message.toolCalls).toEqual([
      { id: 'x', name: 'f', args: { a: 1 } },
      { id: 'z', name: 'h', args: { whole: true } },
    ]);
  });

  it('gives a call without id a deterministic id from the idempotency key', () => {
    const a = new ChatChunkAssembler({ fallbackIdPrefix: 'call_run-1:turn-2' });
    a.push(tc({ index: 0, function: { name: 'f', arguments: '{}' } }));
    expect(a.reply().message.toolCalls?.[0]?.id).toBe('call_run-1:turn-2_0');
  });

  it('a tool call that never gets a name is malformed', () => {
    const a = new ChatChunkAssembler({ fallbackIdPrefix: 'p' });
    a.push(tc({ index: 0, id: 'x', function: { arguments: '{}' } }));
    expect(() => a.reply()).toThrow(MalformedStreamError);
  });

  it('ignores choices other than the first, reads usage from a choice, accepts choices: null', () => {
    const deltas: string[] = [];
    const a = new ChatChunkAssembler({ fallbackIdPrefix: 'p', onTextDelta: (d) => deltas.push(d) });
    a.push({ choices: [{ index: 0, delta: { content: 'a' } }, { index: 1, delta: { content: 'B' } }] });
    a.push({ choices: [{ index: 0, delta: { content: '' }, finish_reason: 'stop', usage: { prompt_tokens: 3, completion_tokens: 1 } }] });
    a.push({ choices: null, usage: null });
    expect(deltas).toEqual(['a']);
    expect(a.reply()).toEqual({ message: { role: 'assistant', content: 'a' }, finishReason: 'stop', usage: { inputTokens: 3, outputTokens: 1 } });
    expect(a.finished).toBe(true);
  });

  it.each([[42], [null], ['str'], [{ choices: {} }], [{ choices: [1] }], [{ choices: [{ delta: { tool_calls: [3] } }] }]])(
    'rejects a chunk that is not a chunk: %j',
    (chunk) => {
      expect(() => new ChatChunkAssembler({ fallbackIdPrefix: 'p' }).push(chunk)).toThrow(/^malformed stream chunk/);
    },
  );
});

describe('parseArguments', () => {
  it('parses JSON, maps blank to {}, keeps anything else raw', () => {
    expect(parseArguments('{"a":[1]}')).toEqual({ a: [1] });
    expect(parseArguments('  ')).toEqual({});
    expect(parseArguments('{"a":')).toBe('{"a":');
  });
});

describe('finish reasons', () => {
  it.each([
    ['stop', 'stop'],
    ['length', 'length'],
    ['content_filter', 'content-filter'],
    ['content-filter', 'content-filter'],
    ['refusal', 'content-filter'],
    ['tool_calls', 'tool-calls'],
    ['tool-calls', 'tool-calls'],
    ['function_call', 'tool-calls'],
    ['aborted', 'cancelled'],
    ['error', 'other'],
    ['unknown', 'other'],
    [undefined, 'other'],
    [null, 'other'],
  ] as const)('%s → %s', (raw, ours) => {
    expect(normalizeFinishReason(raw)).toBe(ours);
  });

  it('a reply with tool calls never claims it stopped, but a length cut stays visible', () => {
    expect(replyFinishReason('stop', true)).toBe('tool-calls');
    expect(replyFinishReason(undefined, true)).toBe('tool-calls');
    expect(replyFinishReason('length', true)).toBe('length');
    expect(replyFinishReason('stop', false)).toBe('stop');
  });
});

describe('HTTP status helpers', () => {
  const headers = (h: Record<string, string>) => (name: string) => h[name];

  it('reads retry-after-ms, retry-after seconds (fractional) and HTTP dates', () => {
    const now = Date.parse('2025-01-01T00:00:00Z');
    expect(parseRetryAfter(headers({ 'retry-after-ms': '250.4', 'retry-after': '9' }), now)).toBe(250);
    expect(parseRetryAfter(headers({ 'retry-after': '1.5' }), now)).toBe(1500);
    expect(parseRetryAfter(headers({ 'retry-after': 'Wed, 01 Jan 2025 00:00:07 GMT' }), now)).toBe(7000);
    expect(parseRetryAfter(headers({ 'retry-after': 'Tue, 31 Dec 2024 23:59:00 GMT' }), now)).toBe(0);
    expect(parseRetryAfter(headers({ 'retry-after': 'soon' }), now)).toBeUndefined();
    expect(parseRetryAfter(headers({}), now)).toBeUndefined();
  });

  it('finds the provider message in the usual error shapes', () => {
    expect(providerMessage('{"error":{"message":"m1","type":"t"}}')).toBe('m1');
    expect(providerMessage('{"error":"m2"}')).toBe('m2');
    expect(providerMessage('{"message":"m3"}')).toBe('m3');
    expect(providerMessage('{"detail":"m4"}')).toBe('m4');
    // A web page is summarized (what it is, its size, its first line), never dumped.
    expect(providerMessage('<html>Bad Gateway</html>')).toBe('the server sent a web page (HTML, 24 chars), not an API reply; its first line: <html>Bad Gateway</html>');
    expect(providerMessage('')).toBeUndefined();
  });

  it('retryable statuses', () => {
    expect([408, 409, 429, 500, 503, 529].every(isRetryableStatus)).toBe(true);
    expect([400, 401, 403, 404, 413, 422].some(isRetryableStatus)).toBe(false);
  });

  it('builds actionable messages', () => {
    const base = { message: 'nope', retryAfterMs: undefined, model: 'm-1', url: 'http://h/v1/chat/completions' };
    expect(httpModelError({ ...base, status: 401 }).message).toMatch(/API key/);
    expect(httpModelError({ ...base, status: 404 }).message).toContain('"m-1"');
    expect(httpModelError({ ...base, status: 404 }).message).toContain('http://h/v1/chat/completions');
    expect(httpModelError({ ...base, status: 418 })).toMatchObject({ status: 418, retryable: false });
  });
});

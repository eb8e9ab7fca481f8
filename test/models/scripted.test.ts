import { describe, expect, it } from 'vitest';
import { ModelError, type ModelRequest } from '../../src/model.js';
import { withRetry } from '../../src/models/retry.js';
import { InvalidScriptError, ScriptExhaustedError, scriptedModel, type ScriptEntry } from '../../src/models/scripted.js';
import type { Message } from '../../src/schemas.js';
import { estimateTokens } from '../../src/tokens.js';

function request(messages: Message[], extra: Partial<ModelRequest> = {}): ModelRequest {
  return { messages, tools: [], signal: new AbortController().signal, idempotencyKey: 'k', ...extra };
}

const user: Message = { role: 'user', content: 'What is 2 + 3?' };

describe('scriptedModel', () => {
  it('answers with tool calls (deterministic ids), then text, picking the entry from the conversation', async () => {
    const model = scriptedModel([
      { toolCalls: [{ name: 'calculator', args: { expression: '2 + 3' } }, { name: 'list_dir', args: {}, id: 'mine' }] },
      { text: 'It is 5.' },
    ]);
    const first = await model.generate(request([user]));
    expect(first.message).toEqual({
      role: 'assistant',
      content: '',
      toolCalls: [
        { id: 'call_1_0', name: 'calculator', args: { expression: '2 + 3' } },
        { id: 'mine', name: 'list_dir', args: {} },
      ],
    });
    expect(first.finishReason).toBe('tool-calls');

    const history: Message[] = [
      user,
      first.message,
      { role: 'tool', toolCallId: 'call_1_0', toolName: 'calculator', content: '5' },
      { role: 'tool', toolCallId: 'mine', toolName: 'list_dir', content: '[]' },
    ];
    const second = await model.generate(request(history));
    expect(second.message).toEqual({ role: 'assistant', content: 'It is 5.' });
    expect(second.finishReason).toBe('stop');
    expect(model.name).toBe('scripted');
  });

  it('gives the same reply to a fresh instance asked the same conversation (restore across processes)', async () => {
    const script: ScriptEntry[] = [{ toolCalls: [{ name: 't', args: { n: 1 } }] }, { text: 'second' }, { text: 'third' }];
    const conversation: Message[] = [user, { role: 'assistant', content: 'earlier' }, { role: 'user', content: 'again' }];
    const original = scriptedModel(script);
    const restored = scriptedModel(script);
    const a = await original.generate(request(conversation));
    // The same turn asked twice of one instance is answered the same way too.
    const b = await original.generate(request(conversation));
    const c = await restored.generate(request(conversation));
    expect(a.message.content).toBe('second');
    expect(b).toEqual(a);
    expect(c).toEqual(a);
  });

  it('computes a reply from the request with a function entry', async () => {
    const model = scriptedModel([
      { toolCalls: [{ name: 'calculator', args: { expression: '2 + 3' } }] },
      (req) => {
        const result = req.messages.findLast((m) => m.role === 'tool');
        return { text: `The answer is ${result?.content}.` };
      },
    ]);
    const first = await model.generate(request([user]));
    const reply = await model.generate(
      request([user, first.message, { role: 'tool', toolCallId: 'call_1_0', toolName: 'calculator', content: '5' }]),
    );
    expect(reply.message.content).toBe('The answer is 5.');
  });

  it('streams the text in a few deterministic chunks that add up to the reply', async () => {
    const text = 'The folder holds three files: a.txt, b.txt and notes.md 📁.';
    const model = scriptedModel([{ text }]);
    const runs: string[][] = [];
    for (let i = 0; i < 2; i++) {
      const deltas: string[] = [];
      await model.generate(request([user], { onTextDelta: (d) => deltas.push(d) }));
      runs.push(deltas);
    }
    expect(runs[0]!.join('')).toBe(text);
    expect(runs[0]!.length).toBeGreaterThan(1);
    expect(runs[0]!.length).toBeLessThanOrEqual(4);
    expect(runs[1]).toEqual(runs[0]);
  });

  it('estimates usage with the tokenizer unless the entry gives it', async () => {
    const model = scriptedModel([{ text: 'estimated' }, { text: 'given', usage: { inputTokens: 10, outputTokens: 2 } }]);
    const first = await model.generate(request([user]));
    expect(first.usage?.inputTokens).toBe(estimateTokens([user]));
    expect(first.usage?.outputTokens).toBeGreaterThan(0);
    const second = await model.generate(request([user, first.message]));
    expect(second.usage).toEqual({ inputTokens: 10, outputTokens: 2 });
  });

  it('serves failures before the reply they precede, once each: 429 twice then an answer, through withRetry', async () => {
    const model = scriptedModel([
      { error: { message: 'rate limited', status: 429, retryAfterMs: 1_000 } },
      { error: { message: 'rate limited', status: 429 } },
      { text: 'finally' },
    ]);
    const first = await model.generate(request([user])).catch((e: unknown) => e);
    expect(first).toBeInstanceOf(ModelError);
    expect(first).toMatchObject({ status: 429, retryable: true, retryAfterMs: 1_000 });

    const delays: number[] = [];
    const retrying = withRetry(model, { sleep: async (ms) => void delays.push(ms), random: () => 0 });
    const reply = await retrying.generate(request([user]));
    expect(reply.message.content).toBe('finally');
    expect(delays).toEqual([0]);
  });

  it('decides retryable from the status unless the entry says, and throws Error instances as they are', async () => {
    const network = new TypeError('fetch failed');
    const model = scriptedModel([
      { error: { message: 'bad request', status: 400 } },
      { error: { message: 'flaky proxy', status: 400, retryable: true } },
      { error: network },
      { text: 'ok' },
    ]);
    const errors: unknown[] = [];
    for (let i = 0; i < 3; i++) errors.push(await model.generate(request([user])).catch((e: unknown) => e));
    expect(errors[0]).toMatchObject({ status: 400, retryable: false });
    expect(errors[1]).toMatchObject({ status: 400, retryable: true });
    expect(errors[2]).toBe(network);
    expect((await model.generate(request([user]))).message.content).toBe('ok');
  });

  it('throws a clear, non-retryable error when the script runs out', async () => {
    const model = scriptedModel([{ text: 'only one' }], { name: 'demo' });
    const error = await model
      .generate(request([user, { role: 'assistant', content: 'only one' }, { role: 'user', content: 'more?' }]))
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ScriptExhaustedError);
    expect(error).toBeInstanceOf(ModelError);
    expect(error).toMatchObject({ retryable: false, turn: 2 });
    expect((error as Error).message).toBe('scripted model "demo" has no reply for turn 2: the script answers 1 turn(s)');
  });

  it('rejects a malformed entry when the model is built, naming the entry', () => {
    const bad = [{ text: 'ok' }, { toolcalls: [] }] as unknown as ScriptEntry[];
    expect(() => scriptedModel(bad)).toThrow(InvalidScriptError);
    expect(() => scriptedModel(bad)).toThrow(/script entry 1/);
  });

  it.each([
    [{ txt: 'hi' }, /^script entry 0: unknown option "txt" — did you mean "text"\?$/],
    [{ text: 5 }, /^script entry 0: text: Invalid input: expected string, received number$/],
    [{ text: 'a', toolCalls: [{ nme: 'x' }] }, /^script entry 0: toolCalls\.0\.name: Invalid input: expected string, received undefined$/],
    [{ error: 5 }, /^script entry 0: error: expected an? Error or an object \(\{ message, status, retryable, retryAfterMs \}\), got number$/],
    ['hi', /^script entry 0: expected a reply \(\{ text, toolCalls, finishReason, usage, delayMs \}\), a failure \(\{ error, delayMs \}\) or a function of the request, got string$/],
  ])('a malformed entry %j says in one line what is wrong in it, a misspelt key with the closest one', (entry, message) => {
    // Before: "✖ Unrecognized key: \"txt\"" (no suggestion), and "✖ Invalid input" for the others
    // ({ error: 5 }: "✖ Unrecognized key: \"error\"", read against the reply's keys).
    expect(() => scriptedModel([entry as never])).toThrow(InvalidScriptError);
    expect(() => scriptedModel([entry as never])).toThrow(message);
  });

  it('rejects a malformed function result when it is called', async () => {
    const model = scriptedModel([(() => ({ text: 42 })) as unknown as ScriptEntry]);
    await expect(model.generate(request([user]))).rejects.toThrow(/script function for turn 1/);
  });

  it('rejects at once when the signal is already aborted', async () => {
    const model = scriptedModel([{ text: 'never' }]);
    await expect(model.generate(request([user], { signal: AbortSignal.abort() }))).rejects.toMatchObject({
      name: 'AbortError',
    });
  });

  it('can be cancelled during a delayed reply, after part of the text streamed', async () => {
    const controller = new AbortController();
    const deltas: string[] = [];
    const model = scriptedModel([{ text: 'a reply long enough to need four chunks', delayMs: 400 }]);
    const pending = model.generate(
      request([user], {
        signal: controller.signal,
        onTextDelta: (d) => {
          deltas.push(d);
          controller.abort();
        },
      }),
    );
    const started = Date.now();
    await expect(pending).rejects.toMatchObject({ name: 'AbortError' });
    expect(deltas).toHaveLength(1);
    expect(Date.now() - started).toBeLessThan(300);
  });

  it('applies the default delay to entries without their own', async () => {
    const model = scriptedModel([{ toolCalls: [{ name: 't', args: {} }] }], { delayMs: 40 });
    const started = Date.now();
    await model.generate(request([user]));
    expect(Date.now() - started).toBeGreaterThanOrEqual(35);
  });
});

import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { countTokens } from 'gpt-tokenizer/encoding/o200k_base';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { Message } from '../src/schemas.js';
import { countTextTokens, estimateMessageTokens, estimateTokens, estimateToolTokens } from '../src/tokens.js';
import { defineTool } from '../src/tools/define-tool.js';

describe('countTextTokens on short texts', () => {
  it('gives the exact count again and again, for more distinct texts than it keeps', () => {
    const texts = Array.from({ length: 5_000 }, (_, i) => `{"path":"src/file-${i}.ts","line":${i * 7}}`);
    for (const round of [1, 2]) {
      for (const text of texts) expect(countTextTokens(text), `${text} (round ${round})`).toBe(countTokens(text));
    }
    expect(countTextTokens('echo')).toBe(countTokens('echo'));
  });
});

describe('estimateTokens', () => {
  it('counts content with o200k plus 3 per message and 3 to prime the reply (OpenAI counting guide)', () => {
    const messages: Message[] = [
      { role: 'system', content: 'You are a careful assistant.' },
      { role: 'user', content: 'How many files are in the folder?' },
      { role: 'assistant', content: 'Let me look.' },
    ];
    const content = messages.reduce((sum, m) => sum + countTokens(m.content), 0);
    expect(estimateTokens(messages)).toBe(content + 3 * messages.length + 3);
    expect(estimateTokens([])).toBe(3);
  });

  it('counts tool calls as name plus JSON arguments and tool results as their content', () => {
    const call: Message = {
      role: 'assistant',
      content: '',
      toolCalls: [{ id: 'c1', name: 'read_file', args: { path: 'notes/todo.txt' } }],
    };
    expect(estimateMessageTokens(call)).toBe(
      3 + 3 + countTokens('read_file') + countTokens('{"path":"notes/todo.txt"}'),
    );
    const result: Message = { role: 'tool', toolCallId: 'c1', toolName: 'read_file', content: 'buy milk' };
    expect(estimateMessageTokens(result)).toBe(3 + countTokens('buy milk'));
  });

  it('adds the tool definitions when given', () => {
    const tool = defineTool({
      name: 'read_file',
      description: 'Reads a file.',
      input: z.object({ path: z.string() }),
      execute: () => '',
    });
    const messages: Message[] = [{ role: 'user', content: 'hi' }];
    const toolTokens = estimateToolTokens([tool.definition]);
    expect(toolTokens).toBeGreaterThan(countTokens(JSON.stringify(tool.definition.inputSchema)));
    expect(estimateTokens(messages, [tool.definition])).toBe(estimateTokens(messages) + toolTokens);
    expect(estimateToolTokens([])).toBe(0);
  });

  it('counts special-token text as plain text instead of throwing', () => {
    const text = 'a user pasted <|endoftext|> and <|im_start|>';
    expect(() => countTokens(text)).toThrow();
    expect(countTextTokens(text)).toBeGreaterThan(5);
    expect(estimateTokens([{ role: 'user', content: text }])).toBe(countTextTokens(text) + 6);
  });

  it('gives the same count for an equal message whether or not it was seen before', () => {
    const message: Message = { role: 'user', content: 'the same words twice' };
    const first = estimateMessageTokens(message);
    expect(estimateMessageTokens(message)).toBe(first);
    expect(estimateMessageTokens({ ...message })).toBe(first);
  });
});

describe('countTextTokens on long texts', () => {
  const PLAIN = { disallowedSpecial: new Set<string>() };

  it('a long text of real code is estimated within 10% of the exact count (sampling, typically 1-5%)', () => {
    const root = path.resolve(import.meta.dirname, '../src');
    const code = readdirSync(root, { recursive: true })
      .map(String)
      .filter((file) => file.endsWith('.ts'))
      .sort()
      .map((file) => readFileSync(path.join(root, file), 'utf8'))
      .join('\n');
    const exact = countTokens(code, PLAIN);
    expect(Math.abs(countTextTokens(code) - exact) / exact).toBeLessThan(0.1);
  });

  it('short texts are still counted exactly, prose cut into segments included', () => {
    const prose = 'The quick brown fox jumps over the lazy dog, again and again. '.repeat(70).slice(0, 4000);
    expect(countTextTokens(prose)).toBe(countTokens(prose, PLAIN));
    const emoji = '👋🏽 héllo '.repeat(400).slice(0, 4000);
    expect(countTextTokens(emoji)).toBe(countTokens(emoji, PLAIN));
  });
});

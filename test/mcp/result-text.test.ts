/** MCP tool results as the text the model reads (pure; the stdio and HTTP suites cover the wire). */
import { describe, expect, it } from 'vitest';
import { resultText } from '../../src/mcp.js';

const b64 = (bytes: number) => Buffer.alloc(bytes, 7).toString('base64');

describe('resultText', () => {
  it('joins text blocks; notes images and audio with type and size, never their data', () => {
    const { text, isError } = resultText({
      content: [
        { type: 'text', text: 'chart below' },
        { type: 'image', data: b64(1234), mimeType: 'image/png' },
        { type: 'audio', data: b64(5), mimeType: 'audio/wav' },
      ],
    });
    expect(text).toBe('chart below\n[image: image/png, 1234 bytes]\n[audio: audio/wav, 5 bytes]');
    expect(isError).toBe(false);
  });

  it('embedded resources: text inline under its URI, binary noted; links noted', () => {
    expect(
      resultText({
        content: [
          { type: 'resource', resource: { uri: 'file:///a.txt', mimeType: 'text/plain', text: 'hello' } },
          { type: 'resource', resource: { uri: 'file:///b.bin', mimeType: 'application/zip', blob: b64(3) } },
          { type: 'resource_link', uri: 'file:///c.md', name: 'c', mimeType: 'text/markdown' },
        ],
      }).text,
    ).toBe('[resource: file:///a.txt]\nhello\n[resource: file:///b.bin, application/zip, 3 bytes]\n[resource link: file:///c.md, text/markdown]');
  });

  it('structured content is serialized when no text block carries the result; a text block wins when present', () => {
    expect(resultText({ content: [], structuredContent: { n: 1, list: [true] } }).text).toBe('{"n":1,"list":[true]}');
    expect(resultText({ content: [{ type: 'image', data: b64(2), mimeType: 'image/gif' }], structuredContent: { n: 1 } }).text).toBe(
      '{"n":1}\n[image: image/gif, 2 bytes]',
    );
    expect(resultText({ content: [{ type: 'text', text: 'n is 1' }], structuredContent: { n: 1 } }).text).toBe('n is 1');
  });

  it('isError is passed on; an unknown or malformed block is named, not dropped', () => {
    expect(resultText({ content: [{ type: 'text', text: 'no such file' }], isError: true })).toEqual({ text: 'no such file', isError: true });
    expect(resultText({ content: [{ type: 'hologram' }, { type: 'image', mimeType: 'image/png' }] }).text).toBe('[hologram content]\n[image content]');
  });
});

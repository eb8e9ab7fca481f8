import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MalformedStreamError } from '../../src/models/errors.js';
import { openAICompatibleModel } from '../../src/models/openai-compatible.js';
import { MAX_SSE_EVENT_LENGTH, MAX_SSE_LINE_LENGTH, SseParser, type SseEvent } from '../../src/models/sse.js';
import { startChatServer, TEST_MODEL, type ChatServer } from '../support/chat-server.js';

const CHUNK = new Uint8Array(64 * 1024).fill(0x61); // 'a'

function pushLine(parser: SseParser, totalBytes: number): void {
  parser.push(new TextEncoder().encode('data: '));
  for (let sent = 0; sent < totalBytes; sent += CHUNK.length) parser.push(CHUNK);
}

describe('SSE parsing is linear and bounded', () => {
  it('a 32 MB line with no newline parses in linear time (quadratic took ~12 s)', () => {
    const events: SseEvent[] = [];
    const parser = new SseParser((e) => events.push(e), { maxLineLength: Infinity, maxEventLength: Infinity });
    const started = performance.now();
    pushLine(parser, 32 * 1024 * 1024);
    parser.pushText('\n\n');
    expect(events).toHaveLength(1);
    expect(events[0]!.data.length).toBe(32 * 1024 * 1024);
    expect(performance.now() - started).toBeLessThan(5_000);
  });

  it(`a line longer than ${MAX_SSE_LINE_LENGTH} characters fails with MalformedStreamError as soon as it passes the limit`, () => {
    const parser = new SseParser(() => {});
    expect(() => pushLine(parser, 80 * 1024 * 1024)).toThrow(MalformedStreamError);
    expect(() => new SseParser(() => {}, { maxLineLength: 10 }).pushText('data: 0123456789\n')).toThrow(/longer than 10 characters/);
  });

  it(`an event whose data passes ${MAX_SSE_EVENT_LENGTH} characters fails, even in short lines`, () => {
    const parser = new SseParser(() => {}, { maxEventLength: 1000 });
    expect(() => parser.pushText('data: 0123456789\n'.repeat(200))).toThrow(MalformedStreamError);
    const ok: SseEvent[] = [];
    const fine = new SseParser((e) => ok.push(e), { maxEventLength: 1000 });
    fine.pushText('data: 0123456789\n'.repeat(50) + '\n');
    expect(ok).toHaveLength(1);
  });

  describe('over real HTTP', () => {
    let server: ChatServer;
    beforeAll(async () => {
      server = await startChatServer();
    });
    afterAll(() => server.close());

    it('a server sending one endless line gets MalformedStreamError from openAICompatibleModel', async () => {
      const line = `data: {"choices":[{"index":0,"delta":{"content":"${'a'.repeat(MAX_SSE_LINE_LENGTH)}"}}]}`;
      server.enqueue({ type: 'frames', frames: [line, '\n\n'], writeSize: 1024 * 1024 });
      const model = openAICompatibleModel({ baseURL: server.baseURL, model: TEST_MODEL });
      const error = await model
        .generate({ messages: [{ role: 'user', content: 'hi' }], tools: [], signal: new AbortController().signal, idempotencyKey: 'k' })
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      expect(error).toBeInstanceOf(MalformedStreamError);
      expect((error as Error).message).toMatch(/longer than \d+ characters/);
    });
  });
});

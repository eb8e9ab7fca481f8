/**
 * Credentials in a base URL (`http://user:key@proxy/v1`) never reach an error message: errors end
 * up in traces, session stores and eval datasets. The HTTP adapter refuses such a URL when the
 * model is made; whatever quotes a URL anywhere else has its user info redacted.
 */
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { describe, expect, it } from 'vitest';
import { InvalidConfigError } from '../../src/errors.js';
import type { ModelRequest } from '../../src/model.js';
import { aiSdkModel } from '../../src/models/ai-sdk.js';
import { describeError, httpModelError, redactUrlCredentials } from '../../src/models/http-status.js';
import { openAICompatibleModel } from '../../src/models/openai-compatible.js';
import { useChatServer } from '../support/chat-server.js';

const server = useChatServer();
const SECRET = 'sk-SECRET-123';

function request(): ModelRequest {
  return { messages: [{ role: 'user', content: 'hi' }], tools: [], signal: new AbortController().signal, idempotencyKey: 'run-1:turn-1' };
}

function withCredentials(baseURL: string): string {
  return baseURL.replace('http://', `http://user:${SECRET}@`);
}

function thrown(fn: () => unknown): unknown {
  try {
    fn();
  } catch (error) {
    return error;
  }
  throw new Error('expected a throw');
}

describe('credentials in a URL', () => {
  it('openAICompatibleModel refuses a baseURL with user info when made, without repeating it', () => {
    for (const baseURL of [withCredentials(server.baseURL), server.baseURL.replace('http://', `http://${SECRET}@`)]) {
      const error = thrown(() => openAICompatibleModel({ baseURL, model: 'm' }));
      expect(error).toBeInstanceOf(InvalidConfigError);
      expect((error as Error).message).toContain('baseURL must not contain credentials');
      expect((error as Error).message).not.toContain(SECRET);
    }
    expect(server.requests).toHaveLength(0);
  });

  it('aiSdkModel: the error of a provider whose baseURL carries credentials does not quote them', async () => {
    const provider = createOpenAICompatible({ name: 'proxy', baseURL: withCredentials(server.baseURL) });
    const error = await aiSdkModel(provider.chatModel('m')).generate(request()).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(Error);
    expect((error as Error).message).toContain('http://***@127.0.0.1');
    expect((error as Error).message).not.toContain(SECRET);
  });

  it('errors that quote a URL redact its user info: HTTP errors, transport errors, any text', () => {
    const url = `https://user:${SECRET}@proxy.example/v1/chat/completions`;
    const notFound = httpModelError({ status: 404, message: `no route for ${url}`, retryAfterMs: undefined, model: 'm', url });
    expect(notFound.message).not.toContain(SECRET);
    expect(notFound.message).toContain('request went to https://***@proxy.example/v1/chat/completions');
    const transport = describeError(new TypeError('fetch failed', { cause: new Error(`connect refused ${url}`) }));
    expect(transport).toBe('fetch failed (connect refused https://***@proxy.example/v1/chat/completions)');
    expect(redactUrlCredentials('a http://a@b@host/x and HTTPS://k:v@h?q=1@2 and mailto:me@x')).toBe(
      'a http://***@host/x and HTTPS://***@h?q=1@2 and mailto:me@x',
    );
  });
});

/**
 * A base URL that points at a web page (a site, a proxy's error page) answers with HTML: the
 * error says so in one line (status, content type, size, first line) instead of dumping the
 * page, with both HTTP adapters.
 */
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { aiSdkModel } from '../../src/ai-sdk.js';
import { providerMessage } from '../../src/models/http-status.js';
import { openAICompatibleModel } from '../../src/models/openai-compatible.js';
import { runAgent } from '../../src/agent/hosts/run-agent.js';
import { startChatServer, type ChatServer } from '../support/chat-server.js';

const PAGE = `<!DOCTYPE html>\n<html lang="en"><head><title>Teashop: page not found</title>\n<style>${'body{margin:0}'.repeat(400)}</style></head>\n<body><h1>Not here</h1></body></html>\n`;

describe('an HTML error body', () => {
  let server: ChatServer;
  beforeEach(async () => {
    server = await startChatServer();
  });
  afterEach(() => server.close());

  const models = {
    openAICompatibleModel: (baseURL: string) => openAICompatibleModel({ baseURL, model: 'm' }),
    aiSdkModel: (baseURL: string) => aiSdkModel(createOpenAICompatible({ name: 'site', baseURL }).chatModel('m')),
  };

  it.each(Object.keys(models) as (keyof typeof models)[])('%s: summarized as status, content type, size and first line', async (name) => {
    server.enqueue({ type: 'error', status: 404, body: PAGE, headers: { 'content-type': 'text/html; charset=utf-8' } });
    const { outcome } = await runAgent({ model: models[name](server.baseURL), prompt: 'hi', retry: false });
    expect(outcome.type).toBe('Failed');
    const message = outcome.type === 'Failed' ? outcome.error.message : '';
    expect(message).toContain(
      `not found (404): the server sent a web page (text/html; charset=utf-8, ${PAGE.trim().length} chars), not an API reply; its first line: <!DOCTYPE html>`,
    );
    expect(message).toContain('Check the model name "m" and the baseURL');
    expect(message).not.toContain('<title>');
    expect(message).not.toContain('\n');
  });

  it('is recognised by its content when the server names no HTML content type, and JSON bodies keep their message', () => {
    expect(providerMessage('<html><body>Bad gateway</body></html>', 'text/plain')).toBe(
      'the server sent a web page (text/plain, 37 chars), not an API reply; its first line: <html><body>Bad gateway</body></html>',
    );
    expect(providerMessage(`<!doctype html>\n${'x'.repeat(300)}`)).toMatch(/^the server sent a web page \(HTML, 316 chars\)/);
    expect(providerMessage('{"error":{"message":"no such model"}}', 'application/json')).toBe('no such model');
  });
});

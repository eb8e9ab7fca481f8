/**
 * openAICompatibleModel's options are checked when the model is made (InvalidConfigError naming
 * the option), not at the first call: a baseURL that is no http(s) URL, headers that are no plain
 * object, a maxResponseBytes of null, a model id that is only whitespace or holds a control character.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { InvalidConfigError } from '../../src/errors.js';
import { openAICompatibleModel, type OpenAICompatibleOptions } from '../../src/models/openai-compatible.js';

const request = () => ({ messages: [{ role: 'user' as const, content: 'hi' }], tools: [], signal: AbortSignal.timeout(5_000), idempotencyKey: 'k' });

const made = (extra: Partial<OpenAICompatibleOptions>) => () => openAICompatibleModel({ baseURL: 'http://127.0.0.1:1/v1', model: 'm', ...extra });

describe('openAICompatibleModel: options refused when the model is made', () => {
  it.each([
    ['ftp://host/v1', /baseURL must be an http\(s\) URL .*ftp:/],
    ['file:///etc/passwd', /baseURL must be an http\(s\) URL .*file:/],
    ['javascript:alert(1)', /baseURL must be an http\(s\) URL/],
    ['not a url', /baseURL must be an http\(s\) URL .*does not parse/],
    ['localhost:11434/v1', /baseURL must be an http\(s\) URL/],
    ['   ', /baseURL must be an http\(s\) URL .*does not parse/],
    ['http://host/v1#part', /baseURL must not have a #fragment/],
  ])('a baseURL %j (before: accepted, every call then failed)', (baseURL, problem) => {
    expect(made({ baseURL })).toThrow(InvalidConfigError);
    expect(made({ baseURL })).toThrow(problem);
  });

  it('an unparsable baseURL is not quoted (it may hold a key)', () => {
    expect(made({ baseURL: 'sk-SECRET-123 not a url' })).not.toThrow(/SECRET/);
  });

  it.each([
    ['a Headers object', new Headers({ 'x-team': 'a' })],
    ['a Map', new Map([['x-team', 'a']])],
  ])('headers as %s (before: accepted and silently not sent)', (_, headers) => {
    expect(made({ headers: headers as never })).toThrow(InvalidConfigError);
    expect(made({ headers: headers as never })).toThrow(/headers must be an object of string values/);
  });

  it('maxResponseBytes: null (before: read as the default)', () => {
    expect(made({ maxResponseBytes: null as never })).toThrow(/maxResponseBytes must be a positive integer/);
  });

  it.each([
    ['whitespace only', '   ', /model must name a model, got only whitespace/],
    ['a tab and a newline only', '\t\n', /model must name a model, got only whitespace/],
    ['a trailing newline (an env file read whole)', 'gpt-4o\n', /model must not contain control characters .*U\+000A at index 6/],
    ['a newline inside', 'gpt\n4o', /model must not contain control characters .*U\+000A at index 3/],
    ['a NUL', 'gpt-4o\u0000', /model must not contain control characters .*U\+0000/],
    ['a DEL', 'gpt\u007f4o', /model must not contain control characters .*U\+007F/],
    ['a C1 control', 'gpt\u00854o', /model must not contain control characters .*U\+0085/],
  ])('a model id of %s (before: accepted, every call then failed at the server)', (_, model, problem) => {
    expect(made({ model })).toThrow(InvalidConfigError);
    expect(made({ model })).toThrow(problem);
  });

  it('model ids of the usual forms are sent as given', async () => {
    const sent: unknown[] = [];
    const server = createServer((req, res) => {
      let body = '';
      req.on('data', (chunk: Buffer) => (body += chunk.toString()));
      req.on('end', () => {
        sent.push((JSON.parse(body) as { model: unknown }).model);
        res.writeHead(400, { 'content-type': 'application/json' }).end('{"error":{"message":"recorded"}}');
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const baseURL = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
      const ids = ['gpt-4o', 'org/model:tag', 'llama3.1:8b', 'meta-llama/Llama-3.1-8B-Instruct', 'models/gemini-2.0-flash', 'café modèle', 'deployment@2024'];
      for (const model of ids) await openAICompatibleModel({ baseURL, model }).generate(request()).catch(() => undefined);
      expect(sent).toEqual(ids);
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it('valid values still make a model', () => {
    for (const baseURL of ['http://localhost:11434/v1', 'https://api.openai.com/v1/', 'HTTPS://API.example.com:8443/openai/v1']) {
      expect(made({ baseURL })().name).toBe('openai-compatible:m');
    }
    expect(made({ headers: Object.assign(Object.create(null) as Record<string, string>, { 'x-team': 'a' }) })).not.toThrow();
    expect(made({ maxResponseBytes: 1e300 })).not.toThrow();
  });
});

describe('openAICompatibleModel: a baseURL with a query', () => {
  it('keeps the query after the path (before: /chat/completions was appended to the query, the call went to the bare base)', async () => {
    const paths: string[] = [];
    const server = createServer((req, res) => {
      paths.push(req.url ?? '');
      res.writeHead(400, { 'content-type': 'application/json' }).end('{"error":{"message":"recorded"}}');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      for (const baseURL of [`${base}/openai/deployments/d?api-version=2024-10-21`, `${base}/v1/?api-version=1`]) {
        await openAICompatibleModel({ baseURL, model: 'm' }).generate(request()).catch(() => undefined);
      }
      expect(paths).toEqual(['/openai/deployments/d/chat/completions?api-version=2024-10-21', '/v1/chat/completions?api-version=1']);
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });
});

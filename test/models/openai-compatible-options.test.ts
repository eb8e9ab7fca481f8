/**
 * openAICompatibleModel's options are checked when the model is made (InvalidConfigError naming
 * the option), not at the first call: a baseURL that is no http(s) URL, headers that are no plain
 * object, a maxResponseBytes of null, a model id that is only whitespace or holds a control character,
 * an apiKey or a credential header that carries no credential or holds a control character.
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

/** The headers one call sent to a real server on 127.0.0.1 (it answers 400; the call's failure is not the point). */
async function sentHeaders(extra: Partial<OpenAICompatibleOptions>): Promise<Record<string, string | string[] | undefined>> {
  const seen: Record<string, string | string[] | undefined>[] = [];
  const server = createServer((req, res) => {
    seen.push(req.headers);
    res.writeHead(400, { 'content-type': 'application/json' }).end('{"error":{"message":"recorded"}}');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    const baseURL = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
    await openAICompatibleModel({ baseURL, model: 'm', ...extra }).generate(request()).catch(() => undefined);
    expect(seen).toHaveLength(1);
    return seen[0]!;
  } finally {
    await new Promise((resolve) => server.close(resolve));
  }
}

describe('openAICompatibleModel: the apiKey and credential headers', () => {
  it.each([
    ['only spaces', '   ', /apiKey is only whitespace/],
    ['a tab and a newline only', '\t\n', /apiKey is only whitespace/],
    ['a control character inside (fetch refused it at every call)', 'sk-SECRET\u0001abc', /apiKey must not contain control characters .*U\+0001 at index 9/],
    ['a DEL inside', 'sk-SECRET\u007fabc', /apiKey must not contain control characters .*U\+007F/],
    ['a tab inside (sent, then a 401)', 'sk-SECRET\tabc', /apiKey must not contain control characters .*U\+0009 at index 9/],
    ['a C1 control inside (sent as a byte, then a 401)', ' sk-SECRET\u0085abc', /apiKey must not contain control characters .*U\+0085 at index 10/],
  ])('an apiKey of %s is refused without quoting it (before: accepted, "Authorization: Bearer" went without a key or fetch refused each call)', (_, apiKey, problem) => {
    expect(made({ apiKey })).toThrow(InvalidConfigError);
    expect(made({ apiKey })).toThrow(problem);
    expect(made({ apiKey })).not.toThrow(/SECRET/);
  });

  it.each([
    ['a bare Bearer', { Authorization: 'Bearer ' }, /headers\.Authorization holds the scheme "Bearer" and no credential/],
    ['a bare Basic', { authorization: 'basic' }, /headers\.authorization holds the scheme "basic" and no credential/],
    ['a blank x-api-key', { 'x-api-key': '  ' }, /headers\.x-api-key is only whitespace/],
    ['a control character fetch refuses at every call', { 'x-team': 'SECRET\u0001' }, /headers\.x-team must not contain control characters .*U\+0001 at index 6/],
    ['a control character inside a token', { authorization: 'Bearer SECRET\u0085x' }, /headers\.authorization must not contain control characters .*U\+0085 at index 13/],
  ])('a credential header with %s is refused without quoting it (before: accepted)', (_, headers, problem) => {
    expect(made({ headers })).toThrow(InvalidConfigError);
    expect(made({ headers })).toThrow(problem);
    expect(made({ headers })).not.toThrow(/SECRET/);
  });

  it('an apiKey of "" sends no key, as leaving it out does (a local server such as Ollama needs none)', async () => {
    expect((await sentHeaders({ apiKey: '' })).authorization).toBeUndefined();
  });

  it('whitespace around a key is not sent (before: " sk-abc" went as "Bearer  sk-abc"); a trailing newline still works', async () => {
    expect((await sentHeaders({ apiKey: '  sk-abc\t' })).authorization).toBe('Bearer sk-abc');
    expect((await sentHeaders({ apiKey: 'sk-abc\n' })).authorization).toBe('Bearer sk-abc');
    expect((await sentHeaders({ apiKey: '\ufeffsk-abc\r\n' })).authorization).toBe('Bearer sk-abc');
  });

  it('headers accepted before are sent as before', async () => {
    const sent = await sentHeaders({ apiKey: 'sk-abc', headers: { 'x-api-key': '', 'x-team': 'a\tb', 'X-Title': 'Caf\u00e9' } });
    expect(sent.authorization).toBe('Bearer sk-abc');
    expect(sent['x-api-key']).toBe('');
    expect(sent['x-team']).toBe('a\tb');
    expect((await sentHeaders({ headers: { Authorization: 'Token abc' } })).authorization).toBe('Token abc');
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

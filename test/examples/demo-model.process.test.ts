/**
 * `npm start` on a real model: `chooseModel` reads the environment, and the demo, run as a real
 * child process with OPENAI_BASE_URL pointing at the local Chat Completions server, completes a
 * tool-calling run over HTTP and exits 0.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { chooseModel, DEFAULT_REAL_MODEL } from '../../examples/folder-agent.js';
import { checkChatRequest, startChatServer, type ChatServer } from '../support/chat-server.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const TSX = fileURLToPath(new URL('../../node_modules/tsx/dist/cli.mjs', import.meta.url));
// The demo stores its session here, never in the checkout's .loopchart/.
const scratch = mkdtempSync(join(tmpdir(), 'loopchart-demo-model-'));
const STORE = join(scratch, 'demo.db');
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('chooseModel', () => {
  let stderr: ReturnType<typeof vi.spyOn>;
  beforeEach(() => {
    stderr = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
  });
  afterEach(() => stderr.mockRestore());

  it('is the scripted model when the environment names no endpoint', () => {
    expect(chooseModel('.', {}).name).toBe('scripted-folder-analyst');
    expect(stderr).not.toHaveBeenCalled();
  });

  it('is the OpenAI-compatible adapter when OPENAI_BASE_URL is set, with LOOPCHART_MODEL or the default name', () => {
    expect(chooseModel('.', { OPENAI_BASE_URL: 'http://127.0.0.1:1/v1' }).name).toBe(`openai-compatible:${DEFAULT_REAL_MODEL}`);
    expect(chooseModel('.', { OPENAI_BASE_URL: 'http://127.0.0.1:1/v1', LOOPCHART_MODEL: 'llama3.2' }).name).toBe(
      'openai-compatible:llama3.2',
    );
    // Blank values count as unset.
    expect(chooseModel('.', { OPENAI_BASE_URL: '  ', LOOPCHART_MODEL: '' }).name).toBe('scripted-folder-analyst');
  });

  it('stays scripted, and says why, when a key or model name comes without a base URL', () => {
    expect(chooseModel('.', { OPENAI_API_KEY: 'sk-x' }).name).toBe('scripted-folder-analyst');
    expect(chooseModel('.', { LOOPCHART_MODEL: 'gpt-4o' }).name).toBe('scripted-folder-analyst');
    expect(stderr).toHaveBeenCalledTimes(2);
    expect(String(stderr.mock.calls[0]![0])).toMatch(/OPENAI_BASE_URL is not/);
  });
});

interface Exit {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs the demo as `npm start` does (tsx examples/demo.ts), with `env` added to a clean environment. */
function runDemo(env: Record<string, string>, timeoutMs = 25_000): Promise<Exit> {
  const base = { ...process.env };
  for (const name of ['OPENAI_BASE_URL', 'OPENAI_API_KEY', 'LOOPCHART_MODEL']) delete base[name];
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [TSX, 'examples/demo.ts'], {
      cwd: ROOT,
      env: { ...base, ...env, LOOPCHART_STORE: STORE, NO_COLOR: '1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`the demo did not exit within ${timeoutMs} ms\nstdout:\n${stdout}\nstderr:\n${stderr}`));
    }, timeoutMs);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

describe('npm start with OPENAI_BASE_URL', () => {
  let server: ChatServer;
  beforeEach(async () => {
    server = await startChatServer();
  });
  afterEach(() => server.close());

  it('runs the demo on the endpoint: a tool call over HTTP, then the answer; exits 0 with valid requests', async () => {
    server.enqueue(
      { type: 'reply', text: ['Let me look ', 'at the folder.'], toolCalls: [{ id: 'call_ls', name: 'list_dir', arguments: { path: '.' } }] },
      { type: 'reply', text: ['The folder holds ', 'three files ', 'and a notes directory.'] },
    );
    const exit = await runDemo({ OPENAI_BASE_URL: server.baseURL, OPENAI_API_KEY: 'sk-local-test', LOOPCHART_MODEL: 'test-model' });

    expect(exit.code, `stdout:\n${exit.stdout}\nstderr:\n${exit.stderr}`).toBe(0);
    expect(exit.stdout).toContain(`stored in ${STORE})`);
    expect(exit.stdout).toContain('model: openai-compatible:test-model');
    expect(exit.stdout).toContain('The folder holds three files and a notes directory.');
    expect(server.queued).toBe(0);
    expect(server.requests).toHaveLength(2);
    for (const request of server.requests) {
      expect(request.path).toBe('/v1/chat/completions');
      expect(request.headers.authorization).toBe('Bearer sk-local-test');
      expect(checkChatRequest(request.body)).toEqual([]);
      expect(request.body).toMatchObject({ model: 'test-model', stream: true });
    }
    // The second request carries the tool call and the real list_dir result of the fixture folder.
    const second = (server.requests[1]!.body as { messages: { role: string; tool_call_id?: string; content: string | null }[] }).messages;
    expect(second.map((m) => m.role)).toEqual(['system', 'user', 'assistant', 'tool']);
    expect(second[3]!.tool_call_id).toBe('call_ls');
    expect(second[3]!.content).toContain('orders.csv');
  });

  it('without OPENAI_API_KEY sends no Authorization header and uses the default model name', async () => {
    server.enqueue({ type: 'reply', text: ['Nothing to read.'] });
    const exit = await runDemo({ OPENAI_BASE_URL: server.baseURL });
    expect(exit.code, exit.stderr).toBe(0);
    expect(exit.stdout).toContain(`stored in ${STORE})`);
    expect(server.requests).toHaveLength(1);
    expect(server.requests[0]!.headers.authorization).toBeUndefined();
    expect(server.requests[0]!.body).toMatchObject({ model: DEFAULT_REAL_MODEL });
    expect(checkChatRequest(server.requests[0]!.body)).toEqual([]);
  });
});

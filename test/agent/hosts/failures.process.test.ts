/**
 * Failures say why (issue 24): a Failed run's result carries the typed error (`error`), whose
 * message is one line with the cause and the fix; the README's quickstart and real-model
 * examples print it and exit non-zero, and the CLI does the same on stderr.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import { ModelError, openAICompatibleModel, RunFailedError, runAgent, streamAgent, type Model } from '../../../src/index.js';
import { DurableSession } from '../../../src/sessions/durable-session.js';
import { SqliteSessionStore } from '../../../src/stores/sqlite.js';
import { scriptedModel } from '../../../src/testing.js';
import { startChatServer, type ChatServer } from '../../support/chat-server.js';
import { REFUSAL } from '../../sessions/fixtures/failing-agent.js';
import { bundledCommands, tsxCommand, type NodeCommand } from '../../sessions/fixtures/processes.js';

const REPO = fileURLToPath(new URL('../../../', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'loopchart-failures-'));
/**
 * The snippets from bundles (see bundledCommands: a third of tsx's start-up CPU); src/cli.ts,
 * which loads an --agent module, through tsx, so the module and the CLI share one library.
 */
const SNIPPETS = ['examples/readme/quickstart.ts', 'examples/readme/real-model.ts'];
const bundles = new Map<string, NodeCommand>();
beforeAll(async () => {
  (await bundledCommands(SNIPPETS.map((file) => join(REPO, file)))).forEach((command, i) => bundles.set(SNIPPETS[i]!, command));
});
afterAll(() => {
  bundles.forEach((command) => command.dispose());
  rmSync(dir, { recursive: true, force: true });
});

const UNAUTHORIZED = { type: 'error' as const, status: 401, body: { error: { message: 'Incorrect API key provided: sk-wrong.' } } };

/** Runs a TypeScript file (with the repository's tsconfig paths) in the temporary folder. */
function runTs(file: string, args: string[], env: Record<string, string | undefined>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const base: NodeJS.ProcessEnv = { ...process.env, TSX_TSCONFIG_PATH: join(REPO, 'tsconfig.json'), NO_COLOR: '1' };
  for (const name of ['OPENAI_BASE_URL', 'OPENAI_API_KEY', 'LOOPCHART_MODEL', 'LOOPCHART_STORE']) delete base[name];
  return new Promise((resolve, reject) => {
    const command = bundles.get(file) ?? tsxCommand(join(REPO, file));
    const child = spawn(process.execPath, [...command.args, ...args], { cwd: dir, env: { ...base, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const timer = setTimeout(() => (child.kill('SIGKILL'), reject(new Error(`${file} did not exit\n${stdout}\n${stderr}`))), 30_000);
    child.on('close', (code) => (clearTimeout(timer), resolve({ code, stdout, stderr })));
  });
}

describe("runAgent's error", () => {
  let server: ChatServer;
  beforeEach(async () => {
    server = await startChatServer();
  });
  afterEach(() => server.close());

  it('a wrong API key: the ModelError itself (status 401), one line naming the cause and the key to check', async () => {
    server.enqueue(UNAUTHORIZED);
    const model = openAICompatibleModel({ baseURL: server.baseURL, apiKey: 'sk-wrong', model: 'gpt-4o-mini' });
    const result = await runAgent({ model, prompt: 'Say hello.' });
    expect(result.outcome.type).toBe('Failed');
    expect(ModelError.isInstance(result.error)).toBe(true);
    expect((result.error as ModelError).status).toBe(401);
    expect(result.error!.message).toBe(
      // The provider quoted the key: the adapter knows its own apiKey and redacts it (redact.ts).
      'authentication failed (401 Unauthorized): Incorrect API key provided: ***. Check the API key (apiKey option / OPENAI_API_KEY).',
    );
    expect(result.outcome.type === 'Failed' && result.outcome.error.message).toBe(result.error!.message);
  });

  it('a custom model that throws a plain Error: a RunFailedError (code RunFailed) with the thrown error as cause', async () => {
    const thrown = new Error('the quota service is down');
    const model: Model = { name: 'custom', generate: () => Promise.reject(thrown) };
    const result = await runAgent({ model, prompt: 'x', retry: false });
    expect(RunFailedError.isInstance(result.error)).toBe(true);
    expect(result.error!.code).toBe('RunFailed');
    expect(result.error!.cause).toBe(thrown);
    expect(result.error!.message).toBe('the run failed (ModelError): the quota service is down');
  });

  it('no error when the run completes or is cancelled', async () => {
    expect((await runAgent({ model: scriptedModel([{ text: 'hi' }]), prompt: 'x' })).error).toBeUndefined();
    const cancelled = await runAgent({ model: scriptedModel([{ text: 'hi' }]), prompt: 'x', signal: AbortSignal.abort() });
    expect(cancelled.outcome.type).toBe('Cancelled');
    expect(cancelled.error).toBeUndefined();
  });

  it("streamAgent's done result carries the same error", async () => {
    server.enqueue(UNAUTHORIZED);
    const model = openAICompatibleModel({ baseURL: server.baseURL, apiKey: 'sk-wrong', model: 'gpt-4o-mini' });
    let done: Extract<Awaited<ReturnType<ReturnType<typeof streamAgent>['next']>>['value'], { type: 'done' }> | undefined;
    for await (const event of streamAgent({ model, prompt: 'x' })) if (event.type === 'done') done = event;
    expect(ModelError.isInstance(done?.result.error)).toBe(true);
    expect(done!.result.error!.message).toContain('Check the API key');
  });

  it('the README quickstart with a wrong key: exit 1, one line on stderr with the cause and the fix', async () => {
    server.enqueue(UNAUTHORIZED);
    const run = await runTs('examples/readme/quickstart.ts', [], { OPENAI_BASE_URL: server.baseURL, OPENAI_API_KEY: 'sk-wrong' });
    expect(run.code).toBe(1);
    expect(run.stdout).toBe('');
    expect(run.stderr).toBe(
      'Failed: authentication failed (401 Unauthorized): Incorrect API key provided: ***. Check the API key (apiKey option / OPENAI_API_KEY).\n',
    );
  });

  it('the README real-model example sends the key with both adapters, and says why each failed, exit 1', async () => {
    server.enqueue(UNAUTHORIZED, UNAUTHORIZED);
    const run = await runTs('examples/readme/real-model.ts', [], { OPENAI_BASE_URL: server.baseURL, OPENAI_API_KEY: 'sk-wrong' });
    expect(run.code).toBe(1);
    expect(server.requests.map((request) => request.headers.authorization)).toEqual(['Bearer sk-wrong', 'Bearer sk-wrong']);
    const lines = run.stderr.trimEnd().split('\n');
    expect(lines).toHaveLength(2);
    // openAICompatibleModel redacts its own apiKey where the provider quotes it; aiSdkModel the key
    // the example names in `secrets` ('sk-wrong' has no known key shape: without it, it was shown).
    for (const line of lines) expect(line).toMatch(/: authentication failed \(401 Unauthorized\): Incorrect API key provided: \*\*\*\. Check the API key/);
  });
});

describe('the CLI on a failed run', () => {
  it('loopchart sessions send: exit 1 and one line on stderr with the cause and the fix', async () => {
    const db = join(dir, 'sessions.db');
    const store = new SqliteSessionStore({ path: db });
    await (await DurableSession.open({ machine: createAgentMachine({ model: scriptedModel([]) }), store, sessionId: 'keyless' })).close();
    await store.close();
    const agent = fileURLToPath(new URL('../../sessions/fixtures/failing-agent.ts', import.meta.url));
    const run = await runTs('src/cli.ts', ['sessions', 'send', 'keyless', 'Hello?', '--agent', agent, '--store', db], {});
    expect(run.code).toBe(1);
    expect(run.stderr).toBe(`loopchart: run 1 of session keyless failed: ModelError: ${REFUSAL}\n`);
    expect(run.stdout).toContain(`outcome: Failed: ModelError: ${REFUSAL}`);
  });
});

/**
 * Model fallback: `model` as a list moves a run to the next model when a call fails with one of
 * the listed triggers, after that model's own retries; the switch is recorded (event, trace,
 * viewer, telemetry), persisted (a run restored in another process goes on with it) and usage is
 * booked to the model that produced it. Against the real local Chat Completions server.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createActor, waitFor } from 'xstate';
import { z } from 'zod';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import { type AgentEmitted } from '../../../src/agent/protocol/actor-types.js';
import { fallbackTrigger, modelList } from '../../../src/agent/fallback/fallback.js';
import { InvalidConfigError } from '../../../src/errors.js';
import { InvalidSnapshotError } from '../../../src/errors.js';
import { ModelError } from '../../../src/model.js';
import { ModelDeadlineError, ReadTimeoutError } from '../../../src/models/errors.js';
import { openAICompatibleModel } from '../../../src/models/openai-compatible.js';
import { scriptedModel } from '../../../src/models/scripted.js';
import { DurableSession } from '../../../src/sessions/durable-session.js';
import { replaySession } from '../../../src/sessions/replay.js';
import { readSessionTrace } from '../../../src/sessions/trace.js';
import { MemorySessionStore } from '../../../src/stores/memory.js';
import { SqliteSessionStore } from '../../../src/stores/sqlite.js';
import { defineTool } from '../../../src/tools/define-tool.js';
import { loadSessionView } from '../../../src/viewer/load.js';
import { rowsOf } from '../../../src/viewer/rows.js';
import { useChatServer, type Behaviour } from '../../support/chat-server.js';
import { bundledCommand, runNode, type NodeCommand } from '../../sessions/fixtures/processes.js';
import { memoryTracing } from '../tracing/support.js';

const server = useChatServer({ checkRequests: false });

const PRIMARY = 'openai-compatible:primary';
const BACKUP = 'openai-compatible:backup';
const http = (name: string, options: { readTimeoutMs?: number } = {}) => openAICompatibleModel({ baseURL: server.baseURL, apiKey: 'sk-test', model: name, ...options });
/** Which model each request asked for, in order. */
const asked = () => server.requests.map((request) => (request.body as { model: string }).model);
/** One retry, no real wait: the fallback comes after the retries. */
const oneRetry = { maxRetries: 1, baseDelayMs: 1, maxDelayMs: 1 };

async function run(config: Partial<Parameters<typeof createAgentMachine>[0]>, prompt = 'hi') {
  const machine = createAgentMachine({ model: [http('primary'), http('backup')], retry: oneRetry, ...config });
  const actor = createActor(machine, { input: { prompt } });
  const emitted: AgentEmitted[] = [];
  actor.on('*', (event) => emitted.push(event));
  actor.start();
  const done = await waitFor(actor, (s) => s.status === 'done', { timeout: 10_000 });
  return { output: done.output!, context: done.context, emitted };
}

const error = (status: number, message: string, extra: Record<string, unknown> = {}): Behaviour => ({ type: 'error', status, body: { error: { message, ...extra } } });
const reply = (text: string, usage?: { prompt_tokens: number; completion_tokens: number }): Behaviour => ({ type: 'reply', text: [text], ...(usage && { usage }) });

describe('fallback triggers (pure)', () => {
  it('reads status, name and cause: a retry wrapper\'s "failed after n attempts" keeps the last error as its cause', () => {
    expect(fallbackTrigger(new ModelError('rate limited (429)', { status: 429, retryable: false }))).toBe('rate-limit');
    expect(fallbackTrigger(new ModelError('HTTP 529', { status: 529, retryable: true }))).toBe('server-error');
    expect(fallbackTrigger(new ModelError('failed after 5 attempts', { retryable: false, cause: new ReadTimeoutError(50) }))).toBe('timeout');
    expect(fallbackTrigger(new ModelDeadlineError(1000))).toBe('timeout');
    expect(fallbackTrigger(new ModelError("400: This model's maximum context length is 8192 tokens", { status: 400, retryable: false }))).toBe('context-length');
    expect(fallbackTrigger(new ModelError('prompt is too long: 208000 tokens > 200000 maximum', { status: 400, retryable: false }))).toBe('context-length');
    expect(fallbackTrigger(new TypeError('fetch failed', { cause: Object.assign(new Error('connect'), { code: 'ECONNREFUSED' }) }))).toBe('server-error');
    // Not triggers: a bad request, a bad key, a cancel, a bad reply.
    expect(fallbackTrigger(new ModelError('400: temperature must be at most 2', { status: 400, retryable: false }))).toBeNull();
    expect(fallbackTrigger(new ModelError('401', { status: 401, retryable: false }))).toBeNull();
    expect(fallbackTrigger(Object.assign(new Error('aborted'), { name: 'AbortError' }))).toBeNull();
    expect(fallbackTrigger(new Error('the model returned an invalid reply'))).toBeNull();
  });

  it('a list with something that is not a model, an empty list, unknown triggers: InvalidConfigError at machine creation', () => {
    const m = scriptedModel([{ text: 'hi' }]);
    for (const bad of [[m, 42], [m, { name: 'x' }], [], [m, { model: m, prices: { inputPerMillionUsd: -1, outputPerMillionUsd: 0 } }], 'gpt-4']) {
      expect(() => createAgentMachine({ model: bad as never }), JSON.stringify(bad)).toThrow(InvalidConfigError);
    }
    expect(() => createAgentMachine({ model: [m, m], fallbackOn: ['nope' as never] })).toThrow(/fallbackOn must be a function \(error\) => boolean or a non-empty list/);
    expect(() => createAgentMachine({ model: [m, m], fallbackOn: [] })).toThrow(InvalidConfigError);
    expect(() => createAgentMachine({ model: m, fallbackOn: ['timeout'] })).toThrow(/needs a list of models/);
    expect(modelList([m, { model: m }], undefined, undefined).on.size).toBe(4);
  });

  it('no model at all says that the option is missing and what to give, in words', () => {
    expect(() => createAgentMachine({} as never)).toThrow(
      'invalid agent configuration: model is missing: give a model (openAICompatibleModel(...), aiSdkModel(...), scriptedModel(...) from loopchart/testing) or a list of them',
    );
    expect(() => createAgentMachine({ model: 42 as never })).toThrow('model must be a model (with a name and generate()) or a list of them, got a number');
  });
});

describe('a run falls back to the next model', () => {
  const cases: Array<[string, Behaviour[], string[]]> = [
    ['rate limit, after the retries', [error(429, 'Rate limit reached'), error(429, 'Rate limit reached')], ['primary', 'primary', 'backup']],
    ['server error, after the retries', [error(503, 'overloaded'), error(500, 'boom')], ['primary', 'primary', 'backup']],
    ['context length (not retried)', [error(400, "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.", { code: 'context_length_exceeded' })], ['primary', 'backup']],
  ];
  for (const [name, failures, models] of cases) {
    it(name, async () => {
      server.enqueue(...failures, reply('from the backup'));
      const { output, context, emitted } = await run({});
      expect(output.outcome).toEqual({ type: 'Completed', finalText: 'from the backup' });
      expect(asked()).toEqual(models);
      expect(context.models?.active).toEqual({ index: 1, name: BACKUP });
      const switched = emitted.filter((e) => e.type === 'model.fallback');
      expect(switched).toEqual([expect.objectContaining({ type: 'model.fallback', turn: 1, from: PRIMARY, to: BACKUP, trigger: name.split(' ')[0] === 'rate' ? 'rate-limit' : name.startsWith('server') ? 'server-error' : 'context-length' })]);
    });
  }

  it('timeout: a stream that stalls past the read timeout, twice', async () => {
    server.enqueue({ type: 'stall', afterBytes: 0 }, { type: 'stall', afterBytes: 0 }, reply('from the backup'));
    const { output, emitted } = await run({ model: [http('primary', { readTimeoutMs: 150 }), http('backup')] });
    expect(output.outcome).toEqual({ type: 'Completed', finalText: 'from the backup' });
    expect(asked()).toEqual(['primary', 'primary', 'backup']);
    expect(emitted.find((e) => e.type === 'model.fallback')).toMatchObject({ trigger: 'timeout' });
  });

  it('a trigger not in fallbackOn, or an error that is no trigger, fails the run on the model it has', async () => {
    server.enqueue(error(503, 'overloaded'), error(503, 'overloaded'));
    const notListed = await run({ fallbackOn: ['rate-limit'] });
    expect(notListed.output.outcome).toMatchObject({ type: 'Failed', error: { type: 'ModelError' } });
    expect(asked()).toEqual(['primary', 'primary']);
    server.requests.length = 0;

    server.enqueue(error(401, 'Incorrect API key provided'));
    const notATrigger = await run({});
    expect(notATrigger.output.outcome).toMatchObject({ type: 'Failed', error: { type: 'ModelError', message: expect.stringContaining('401') } });
    expect(asked()).toEqual(['primary']);
    expect(notATrigger.emitted.some((e) => e.type === 'model.fallback')).toBe(false);
  });

  it('the last model failing too fails the run; the next run starts on the first model again', async () => {
    server.enqueue(error(503, 'a'), error(503, 'a'), error(503, 'b'), error(503, 'b'));
    const { output } = await run({});
    expect(output.outcome).toMatchObject({ type: 'Failed', error: { type: 'ModelError' } });
    expect(asked()).toEqual(['primary', 'primary', 'backup', 'backup']);
    server.requests.length = 0;

    const machine = createAgentMachine({ model: [http('primary'), http('backup')], retry: false });
    const actor = createActor(machine).start();
    server.enqueue(error(503, 'down'), reply('backup, run 1'), reply('primary, run 2'));
    actor.send({ type: 'input', message: 'one' });
    await waitFor(actor, (s) => s.context.lastRun !== null && s.value === 'Idle', { timeout: 10_000 });
    actor.send({ type: 'input', message: 'two' });
    const second = await waitFor(actor, (s) => s.context.runIndex === 2 && s.value === 'Idle', { timeout: 10_000 });
    expect(second.context.lastRun?.outcome).toEqual({ type: 'Completed', finalText: 'primary, run 2' });
    expect(asked()).toEqual(['primary', 'backup', 'primary']);
    actor.stop();
  });
});

describe('usage and cost per model', () => {
  it('each reply is booked to the model that produced it, priced at that model\'s prices', async () => {
    const step = defineTool({ name: 'step', description: 'A step.', input: z.object({}), execute: () => 'stepped' });
    server.enqueue(
      { type: 'reply', toolCalls: [{ name: 'step', arguments: {} }], usage: { prompt_tokens: 100, completion_tokens: 10 } },
      error(503, 'down'),
      reply('done', { prompt_tokens: 200, completion_tokens: 20 }),
    );
    const { output, context } = await run({
      model: [http('primary'), { model: http('backup'), prices: { inputPerMillionUsd: 1, outputPerMillionUsd: 2 } }],
      prices: { inputPerMillionUsd: 10, outputPerMillionUsd: 20 },
      tools: [step],
      retry: false,
    });
    expect(asked()).toEqual(['primary', 'primary', 'backup']);
    expect(output.usage).toEqual({ inputTokens: 300, outputTokens: 30 });
    expect(output.usageByModel).toEqual([
      { model: PRIMARY, usage: { inputTokens: 100, outputTokens: 10 }, costUsd: (100 * 10 + 10 * 20) / 1e6 },
      { model: BACKUP, usage: { inputTokens: 200, outputTokens: 20 }, costUsd: (200 * 1 + 20 * 2) / 1e6 },
    ]);
    expect(output.costUsd).toBeCloseTo((1200 + 240) / 1e6, 12);
    expect(context.models?.session).toEqual(context.models?.run);
  });
});

describe('the switch is recorded', () => {
  it('a durable session traces it (and which model each call used), the viewer shows it, replay goes through it', async () => {
    server.enqueue(error(503, 'overloaded'), reply('from the backup'));
    const store = new MemorySessionStore();
    const machine = createAgentMachine({ model: [http('primary'), http('backup')], retry: false });
    const session = await DurableSession.open({ machine, store, sessionId: 'fb' });
    session.send({ type: 'input', message: 'hi' });
    expect((await session.whenIdle())?.outcome).toEqual({ type: 'Completed', finalText: 'from the backup' });
    await session.close();
    const entries = (await readSessionTrace(store, 'fb')).flatMap((r) => ('entry' in r ? [r.entry] : []));
    expect(entries.filter((e) => e.type === 'fallback')).toEqual([
      expect.objectContaining({ type: 'fallback', run: 1, turn: 1, from: PRIMARY, to: BACKUP, trigger: 'server-error', error: expect.stringContaining('503') }),
    ]);
    expect(entries.filter((e) => e.type === 'model').map((e) => (e as { model?: string }).model)).toEqual([PRIMARY, BACKUP]);
    const rows = rowsOf({ session: (await loadSessionView(store, 'fb'))! }).rows;
    expect(rows.find((row) => row.kind === 'fallback')?.title).toBe(`model fallback on turn 1: ${PRIMARY} → ${BACKUP} (server-error)`);
    expect((await replaySession(store, 'fb')).divergence).toBeNull();
  });

  it('telemetry: an event on the run span, and each chat span names the model that took it', async () => {
    const tracing = memoryTracing();
    server.enqueue(error(503, 'down'), reply('ok'));
    const { output } = await run({ retry: false, telemetry: { tracer: tracing.tracer } });
    expect(output.outcome.type).toBe('Completed');
    expect(tracing.named('chat').map((span) => [span.name, span.attributes['gen_ai.request.model']])).toEqual([
      ['chat primary', 'primary'],
      ['chat backup', 'backup'],
    ]);
    const [runSpan] = tracing.named('invoke_agent');
    expect(runSpan!.events.find((event) => event.name === 'loopchart.model.fallback')?.attributes).toMatchObject({ 'gen_ai.request.model': 'backup', 'loopchart.turn': 1 });
    expect(runSpan!.attributes['loopchart.model.fallback']).toBe(BACKUP);
  });

  it('a stored active model this agent does not list there is refused on restore (InvalidSnapshotError), not silently swapped', async () => {
    server.enqueue(error(503, 'down'), reply('ok'));
    const machine = createAgentMachine({ model: [http('primary'), http('backup')], retry: false });
    const actor = createActor(machine).start();
    actor.send({ type: 'input', message: 'hi' });
    await waitFor(actor, (s) => s.value === 'Idle' && s.context.lastRun !== null, { timeout: 10_000 });
    const persisted = structuredClone(actor.getPersistedSnapshot());
    actor.stop();
    // The same list restores; another list at that place does not.
    expect(createActor(createAgentMachine({ model: [http('primary'), http('backup')] }), { snapshot: persisted }).getSnapshot().status).toBe('active');
    const restored = createActor(createAgentMachine({ model: [http('primary'), http('another')] }), { snapshot: persisted as never });
    expect(restored.getSnapshot().status).toBe('error');
    const refused = (restored.getSnapshot() as { error?: unknown }).error as Error;
    expect(InvalidSnapshotError.isInstance(refused)).toBe(true);
    expect(refused.message).toContain("the run uses model 1 'openai-compatible:backup', this agent lists 'openai-compatible:another' there");
  });
});

describe('restored in another process', () => {
  const root = mkdtempSync(join(tmpdir(), 'loopchart-fallback-'));
  let child: NodeCommand;
  beforeAll(async () => {
    child = await bundledCommand(fileURLToPath(new URL('./fixtures/fallback-child.ts', import.meta.url)));
  });
  afterAll(() => {
    child?.dispose();
    rmSync(root, { recursive: true, force: true });
  });

  it('a run that fell back, reopened mid-run by a child process on the same SQLite file, goes on with the backup', async () => {
    const path = join(root, 'moved.db');
    let release: () => void = () => {};
    const hung = new Promise<string>((resolve) => (release = () => resolve('never')));
    const wait = defineTool({ name: 'wait', description: 'Waits.', input: z.object({}), execute: () => hung });
    // Process A: the primary fails, the backup asks for a tool, and A goes away while it runs.
    server.enqueue(error(503, 'down'), { type: 'reply', toolCalls: [{ name: 'wait', arguments: {} }], usage: { prompt_tokens: 40, completion_tokens: 4 } });
    const storeA = new SqliteSessionStore({ path });
    const a = await DurableSession.open({ machine: createAgentMachine({ model: [http('primary'), http('backup')], tools: [wait], retry: false }), store: storeA, sessionId: 'moved' });
    a.send({ type: 'input', message: 'go' });
    await waitFor(a.actor, (s) => s.matches({ Running: 'AwaitingTools' }), { timeout: 10_000 });
    await a.flush();
    await a.close();
    release();
    await storeA.close();
    expect(asked()).toEqual(['primary', 'backup']);
    server.requests.length = 0;

    // Process B: the primary would answer now; the run must still use the backup.
    server.enqueue(reply('done by the backup', { prompt_tokens: 60, completion_tokens: 6 }));
    const b = await runNode([...child.args, JSON.stringify({ path, sessionId: 'moved', baseURL: server.baseURL })], { timeoutMs: 30_000 });
    expect(b.code, b.stderr).toBe(0);
    const report = JSON.parse(b.lines.at(-1)!) as { outcome: unknown; usageByModel: unknown; models: { active: unknown } };
    expect(asked()).toEqual(['backup']);
    expect(report.outcome).toEqual({ type: 'Completed', finalText: 'done by the backup' });
    expect(report.models.active).toEqual({ index: 1, name: BACKUP });
    expect(report.usageByModel).toEqual([{ model: BACKUP, usage: { inputTokens: 100, outputTokens: 10 } }]);
  });
});

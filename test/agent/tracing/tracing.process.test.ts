/**
 * OpenTelemetry GenAI traces (issue 12 part 3): a real SDK tracer with an InMemorySpanExporter.
 * One `invoke_agent` span per run; `chat`, `execute_tool`, compaction, prune and approval-wait
 * spans under it; GenAI attributes; errors as status + exception; content only on request.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { trace } from '@opentelemetry/api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createActor, waitFor } from 'xstate';
import { z } from 'zod';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import type { AgentConfig } from '../../../src/agent/core/config.js';
import { ModelError, type Model } from '../../../src/model.js';
import { scriptedModel } from '../../../src/models/scripted.js';
import { defineTool } from '../../../src/tools/define-tool.js';
import { runFinished, runToCompletion, sleepOrAbort, WAIT_MS } from '../../support/driver.js';
import { AWAITING_APPROVAL } from '../../support/hitl.js';
import { idOf, memoryTracing, parentOf, summary, traceOf } from './support.js';
import { bundledCommands, type NodeCommand } from '../../sessions/fixtures/processes.js';

const add = defineTool({
  name: 'add',
  description: 'Adds two numbers',
  input: z.object({ a: z.number(), b: z.number() }),
  execute: ({ a, b }) => String(a + b),
});
const broken = defineTool({
  name: 'broken',
  description: 'Always fails',
  input: z.object({}),
  execute: () => {
    throw new Error('disk on fire');
  },
});
const slow = defineTool({
  name: 'slow',
  description: 'Takes its time',
  input: z.object({}),
  execute: async (_, { signal }) => {
    await sleepOrAbort(10_000, signal);
    return 'late';
  },
});
const guarded = defineTool({
  name: 'write',
  description: 'Needs a human',
  input: z.object({ path: z.string() }),
  needsApproval: true,
  execute: ({ path }) => `wrote ${path}`,
});

function traced(config: Omit<AgentConfig, 'telemetry'>, options: { recordContent?: boolean } = {}) {
  const tracing = memoryTracing();
  const machine = createAgentMachine({ ...config, telemetry: { tracer: tracing.tracer, name: 'helper', ...options } });
  return { tracing, machine };
}

const toolTurn = { text: '', toolCalls: [{ name: 'add', args: { a: 1, b: 2 } }], usage: { inputTokens: 30, outputTokens: 5 } };
const answer = { text: 'It is 3.', usage: { inputTokens: 40, outputTokens: 4 } };

describe('a traced run', () => {
  it('is one invoke_agent span with a chat span per model call and an execute_tool span per tool call under it', async () => {
    const { tracing, machine } = traced({ model: scriptedModel([toolTurn, answer], { name: 'acme:small-1' }), tools: [add], retry: false });
    const output = await runToCompletion(createActor(machine, { input: { prompt: 'add 1 and 2', sessionId: 'conv-7' } }));
    expect(output.outcome.type).toBe('Completed');

    const [run, ...more] = tracing.named('invoke_agent');
    expect(more).toEqual([]);
    expect(run!.name).toBe('invoke_agent helper');
    expect(parentOf(run!)).toBe('');
    expect(run!.attributes).toMatchObject({
      'gen_ai.operation.name': 'invoke_agent',
      'gen_ai.agent.name': 'helper',
      'gen_ai.conversation.id': 'conv-7',
      'gen_ai.provider.name': 'acme',
      'gen_ai.request.model': 'small-1',
      'gen_ai.usage.input_tokens': 70,
      'gen_ai.usage.output_tokens': 9,
      'loopchart.outcome': 'Completed',
    });

    const chats = tracing.named('chat ');
    expect(chats.map((s) => s.name)).toEqual(['chat small-1', 'chat small-1']);
    expect(chats[0]!.attributes).toMatchObject({
      'gen_ai.operation.name': 'chat',
      'gen_ai.provider.name': 'acme',
      'gen_ai.request.model': 'small-1',
      'gen_ai.conversation.id': 'conv-7',
      'gen_ai.usage.input_tokens': 30,
      'gen_ai.usage.output_tokens': 5,
      'gen_ai.response.finish_reasons': ['tool-calls'],
    });
    expect(chats[1]!.attributes['gen_ai.response.finish_reasons']).toEqual(['stop']);

    const [tool] = tracing.named('execute_tool');
    expect(tool!.name).toBe('execute_tool add');
    expect(tool!.attributes).toMatchObject({
      'gen_ai.operation.name': 'execute_tool',
      'gen_ai.tool.name': 'add',
      'gen_ai.tool.call.id': 'call_1_0',
      'gen_ai.conversation.id': 'conv-7',
    });
    for (const child of [...chats, tool!]) {
      expect(parentOf(child)).toBe(idOf(run!));
      expect(traceOf(child)).toBe(traceOf(run!));
    }
    // The tool ran between the two model calls: spans are exported as they end, so the export
    // order is the order they ended in. (Span times cannot order them: the SDK anchors each span
    // on Date.now(), whole milliseconds.)
    const ended = tracing.spans();
    expect(ended.indexOf(chats[0]!)).toBeLessThan(ended.indexOf(tool!));
    expect(ended.indexOf(tool!)).toBeLessThan(ended.indexOf(chats[1]!));
  });

  it('records no message or tool content unless recordContent is true', async () => {
    const off = traced({ model: scriptedModel([toolTurn, answer]), tools: [add], retry: false });
    await runToCompletion(createActor(off.machine, { input: { prompt: 'secret prompt' } }));
    const everything = JSON.stringify(off.tracing.spans().map((s) => s.attributes));
    expect(everything).not.toContain('secret prompt');
    expect(everything).not.toContain('gen_ai.input.messages');
    expect(everything).not.toContain('gen_ai.tool.call.arguments');

    const on = traced({ model: scriptedModel([toolTurn, answer]), tools: [add], retry: false }, { recordContent: true });
    await runToCompletion(createActor(on.machine, { input: { prompt: 'secret prompt' } }));
    const [first, second] = on.tracing.named('chat ');
    expect(JSON.parse(first!.attributes['gen_ai.input.messages'] as string)).toEqual([{ role: 'user', content: 'secret prompt' }]);
    expect(JSON.parse(second!.attributes['gen_ai.output.messages'] as string)).toEqual([{ role: 'assistant', content: 'It is 3.' }]);
    const [tool] = on.tracing.named('execute_tool');
    expect(tool!.attributes).toMatchObject({ 'gen_ai.tool.call.arguments': '{"a":1,"b":2}', 'gen_ai.tool.call.result': '3' });
  });

  it('a tool that throws marks its span as an error with an exception event (its text with recordContent); the run goes on', async () => {
    const { tracing, machine } = traced(
      {
        model: scriptedModel([{ toolCalls: [{ name: 'broken', args: {} }] }, { text: 'sorry' }]),
        tools: [broken],
        retry: false,
      },
      { recordContent: true },
    );
    expect((await runToCompletion(createActor(machine, { input: { prompt: 'go' } }))).outcome.type).toBe('Completed');
    const [tool] = tracing.named('execute_tool');
    expect(tool!.status).toMatchObject({ code: 2 });
    expect(tool!.status.message).toContain('disk on fire');
    expect(tool!.attributes['error.type']).toBe('tool_error');
    expect(tool!.events.map((e) => e.name)).toEqual(['exception']);
    expect(tool!.events[0]!.attributes).toMatchObject({ 'exception.type': 'tool_error', 'exception.message': 'disk on fire' });
    expect(tracing.named('invoke_agent')[0]!.status.code).toBe(0);
  });

  it('a tool call with invalid arguments is a failed span with an exception event naming the argument (with recordContent)', async () => {
    const { tracing, machine } = traced(
      {
        model: scriptedModel([{ toolCalls: [{ name: 'add', args: { a: 1 } }] }, { text: 'sorry' }]),
        tools: [add],
        retry: false,
      },
      { recordContent: true },
    );
    expect((await runToCompletion(createActor(machine, { input: { prompt: 'go' } }))).outcome.type).toBe('Completed');
    const [tool] = tracing.named('execute_tool');
    expect(tool!.status.code).toBe(2);
    const [event, ...more] = tool!.events;
    expect(more).toEqual([]);
    expect(event!.name).toBe('exception');
    expect(event!.attributes!['exception.message']).toContain('- b:');
  });

  it('a successful tool call has no exception event', async () => {
    const { tracing, machine } = traced({ model: scriptedModel([toolTurn, answer]), tools: [add], retry: false });
    await runToCompletion(createActor(machine, { input: { prompt: 'go' } }));
    const [tool] = tracing.named('execute_tool');
    expect(tool!.status.code).toBe(0);
    expect(tool!.events).toEqual([]);
  });

  it('a model call that fails sets the status and records the exception on chat and run spans; retries are events', async () => {
    let calls = 0;
    const flaky: Model = {
      name: 'acme:flaky',
      generate: async () => {
        calls++;
        if (calls === 1) throw new ModelError('overloaded', { retryable: true, status: 529 });
        throw new ModelError('bad key', { retryable: false, status: 401 });
      },
    };
    const { tracing, machine } = traced({ model: flaky, retry: { maxRetries: 3, baseDelayMs: 1, maxDelayMs: 2 } });
    const output = await runToCompletion(createActor(machine, { input: { prompt: 'go' } }));
    expect(output.outcome.type).toBe('Failed');

    const [chat, ...others] = tracing.named('chat ');
    expect(others).toEqual([]);
    expect(chat!.status).toMatchObject({ code: 2, message: 'bad key' });
    expect(chat!.attributes['error.type']).toBe('ModelError');
    expect(chat!.events.map((e) => e.name)).toEqual(['gen_ai.retry', 'exception']);
    expect(chat!.events[0]!.attributes).toMatchObject({ 'loopchart.retry': 1, 'error.type': 'ModelError', 'loopchart.error.message': 'overloaded' });
    expect(chat!.events[1]!.attributes).toMatchObject({ 'exception.message': 'bad key' });

    const [run] = tracing.named('invoke_agent');
    expect(run!.status.code).toBe(2);
    expect(run!.attributes).toMatchObject({ 'loopchart.outcome': 'Failed', 'error.type': 'ModelError' });
    expect(run!.events.map((e) => e.name)).toContain('exception');
  });

  it('a cancelled run ends its spans: the tool in flight is marked cancelled, the run says Cancelled, nothing is an error', async () => {
    const { tracing, machine } = traced({ model: scriptedModel([{ toolCalls: [{ name: 'slow', args: {} }] }]), tools: [slow], retry: false });
    const actor = createActor(machine, { input: { prompt: 'go' } });
    actor.start();
    await waitFor(actor, (s) => s.matches({ Running: 'AwaitingTools' }), { timeout: WAIT_MS });
    // The tool span is open while the tool runs.
    await new Promise((r) => setTimeout(r, 20));
    expect(tracing.named('execute_tool')).toEqual([]);
    actor.send({ type: 'cancel' });
    await waitFor(actor, (s) => s.status === 'done', { timeout: WAIT_MS });
    await expect.poll(() => tracing.named('execute_tool').length).toBe(1);

    const [tool] = tracing.named('execute_tool');
    const [run] = tracing.named('invoke_agent');
    expect(run!.attributes['loopchart.outcome']).toBe('Cancelled');
    expect(run!.status.code).toBe(0);
    expect(parentOf(tool!)).toBe(idOf(run!));
    expect(tool!.attributes['loopchart.cancelled']).toBe(true);
    expect(tool!.status.code).toBe(0);
  });

  it('an approval wait is a span with the decision and the wait time, under the run', async () => {
    // Ended spans are exported at once: what the tool sees when it runs is what had ended by then.
    // (Span times cannot order them: the SDK anchors each span on Date.now(), whole milliseconds.)
    let endedWaitsWhenToolRan: number | undefined;
    const watched = defineTool({
      ...guarded,
      execute: ({ path }) => {
        endedWaitsWhenToolRan = tracing.named('await_approval').length;
        return `wrote ${path}`;
      },
    });
    const { tracing, machine } = traced({
      model: scriptedModel([{ toolCalls: [{ name: 'write', args: { path: 'a.txt' } }] }, { text: 'done' }]),
      tools: [watched],
      retry: false,
    });
    const actor = createActor(machine, { input: { prompt: 'go', sessionId: 's-approve' } });
    actor.start();
    const snapshot = await waitFor(actor, (s) => s.matches(AWAITING_APPROVAL), { timeout: WAIT_MS });
    await new Promise((r) => setTimeout(r, 30));
    actor.send({ type: 'approve', toolCallId: snapshot.context.approvals.waiting[0]! });
    expect((await runToCompletion(actor)).outcome.type).toBe('Completed');

    const [wait] = tracing.named('await_approval');
    const [run] = tracing.named('invoke_agent');
    expect(wait!.name).toBe('await_approval write');
    expect(parentOf(wait!)).toBe(idOf(run!));
    expect(wait!.attributes).toMatchObject({ 'gen_ai.tool.name': 'write', 'loopchart.approval.approved': true, 'gen_ai.conversation.id': 's-approve' });
    expect(wait!.attributes['loopchart.approval.wait_ms'] as number).toBeGreaterThanOrEqual(25);
    // The tool ran after the wait ended.
    expect(endedWaitsWhenToolRan).toBe(1);
  });

  function filling(extra: Partial<AgentConfig>) {
    const filler = defineTool({ name: 'fill', description: 'Returns a lot', input: z.object({}), execute: () => 'word '.repeat(1_000) });
    return traced({
      model: scriptedModel([...Array.from({ length: 3 }, () => ({ toolCalls: [{ name: 'fill', args: {} }] })), { text: 'done' }]),
      tools: [filler],
      retry: false,
      policy: { contextWindow: 2_400, compactThreshold: 80 },
      ...extra,
    });
  }

  it('a prune is one span under the run, with what it saved', async () => {
    const { tracing, machine } = filling({ pruning: { threshold: 50, protectTokens: 100 } });
    await runToCompletion(createActor(machine, { input: { prompt: 'fill it up' } }));
    const [run] = tracing.named('invoke_agent');
    const prunes = tracing.named('prune');
    expect(prunes.length).toBeGreaterThan(0);
    for (const span of prunes) expect(parentOf(span)).toBe(idOf(run!));
    expect(prunes[0]!.attributes['loopchart.prune.tokens_saved'] as number).toBeGreaterThan(0);
  });

  it('a compaction is one span under the run, with its reason and the tokens before and after', async () => {
    const { tracing, machine } = filling({
      compactor: async ({ messages }) => ({ messages: [{ role: 'user', content: `summary of ${messages.length} messages` }], tokensAfter: 10 }),
    });
    await runToCompletion(createActor(machine, { input: { prompt: 'fill it up' } }));
    const [run] = tracing.named('invoke_agent');
    const compactions = tracing.named('compaction');
    expect(compactions.length).toBeGreaterThan(0);
    for (const span of compactions) expect(parentOf(span)).toBe(idOf(run!));
    expect(compactions[0]!.attributes).toMatchObject({ 'loopchart.compaction.rewritten': true });
    expect(compactions[0]!.attributes['loopchart.tokens.before'] as number).toBeGreaterThan(compactions[0]!.attributes['loopchart.tokens.after'] as number);
  });
});

describe('operations', () => {
  it('each operation hook is one span under the run, naming the operation and the point', async () => {
    const { tracing, machine } = traced({
      model: scriptedModel([toolTurn, answer]),
      tools: [add],
      retry: false,
      operations: [{ name: 'audit', beforeTools: async () => {}, afterReply: async () => {} }],
    });
    expect((await runToCompletion(createActor(machine, { input: { prompt: 'go' } }))).outcome.type).toBe('Completed');
    const [run] = tracing.named('invoke_agent');
    const hooks = tracing.named('operation ');
    expect(hooks.map((span) => `${span.name}:${span.attributes['loopchart.operation.hook']}`)).toEqual([
      'operation audit:afterReply',
      'operation audit:beforeTools',
      'operation audit:afterReply',
    ]);
    for (const span of hooks) expect(parentOf(span)).toBe(idOf(run!));
  });
});

describe('a traced machine rebuilt by a host', () => {
  it('withExecutor and withClock keep one tracing: each effect is one span, under its run', async () => {
    const { tracing, machine } = traced({ model: scriptedModel([toolTurn, answer], { name: 'acme:small-1' }), tools: [add], retry: false });
    const wrapped = machine.withExecutor((inner) => (effect, perform) => inner(effect, perform)).withClock(() => 1_000);
    await runToCompletion(createActor(wrapped, { input: { prompt: 'go' } }));
    const [run, ...moreRuns] = tracing.named('invoke_agent');
    expect(moreRuns).toEqual([]);
    const children = tracing.spans().filter((span) => span !== run);
    expect(children.map((span) => span.name).sort()).toEqual(['chat small-1', 'chat small-1', 'execute_tool add']);
    for (const child of children) expect(parentOf(child)).toBe(idOf(run!));
  });
});

describe('telemetry off', () => {
  it('an agent without telemetry stores no trace context', async () => {
    const machine = createAgentMachine({ model: scriptedModel([answer]), retry: false });
    const actor = createActor(machine, { input: { prompt: 'hi' } });
    await runToCompletion(actor);
    expect(actor.getSnapshot().context.trace).toBeUndefined();
  });

  it('a session keeps its runs apart: each run is its own trace, the context names the current one', async () => {
    const { tracing, machine } = traced({ model: scriptedModel([answer, answer]), retry: false });
    const actor = createActor(machine, { input: { sessionId: 'multi' } }).start();
    actor.send({ type: 'input', message: 'one' });
    await runFinished(actor, 1);
    actor.send({ type: 'input', message: 'two' });
    await runFinished(actor, 2);
    const runs = tracing.named('invoke_agent');
    expect(runs.map((r) => r.attributes['loopchart.run.index'])).toEqual([1, 2]);
    expect(traceOf(runs[0]!)).not.toBe(traceOf(runs[1]!));
    await waitFor(actor, (s) => s.context.trace?.includes(idOf(runs[1]!)) === true, { timeout: WAIT_MS });
    actor.stop();
  });
});

describe('a persisted snapshot restored in a fresh actor', () => {
  it('continues the run trace: the restored run span is a child of the first one, and the rest of the run is under it', async () => {
    const config = {
      model: scriptedModel([{ toolCalls: [{ name: 'write', args: { path: 'a.txt' } }] }, { text: 'done' }], { name: 'acme:m' }),
      tools: [guarded],
      retry: false as const,
    };
    const first = traced(config);
    const actor = createActor(first.machine, { input: { prompt: 'go', sessionId: 'snap' } }).start();
    await waitFor(actor, (s) => s.matches(AWAITING_APPROVAL) && typeof s.context.trace === 'string', { timeout: WAIT_MS });
    const persisted = JSON.parse(JSON.stringify(actor.getPersistedSnapshot()));
    actor.stop();
    await expect.poll(() => first.tracing.named('invoke_agent').length).toBe(1);
    const [firstRun] = first.tracing.named('invoke_agent');

    const second = traced(config);
    const restored = createActor(second.machine, { snapshot: persisted }).start();
    restored.send({ type: 'approve', toolCallId: persisted.context.approvals.waiting[0] });
    expect((await runToCompletion(restored)).outcome.type).toBe('Completed');
    const [run] = second.tracing.named('invoke_agent');
    expect(traceOf(run!)).toBe(traceOf(firstRun!));
    expect(parentOf(run!)).toBe(idOf(firstRun!));
    expect(run!.attributes).toMatchObject({ 'loopchart.run.resumed': true, 'loopchart.outcome': 'Completed' });
    for (const name of ['execute_tool write', 'chat m']) expect(parentOf(second.tracing.named(name)[0]!)).toBe(idOf(run!));
  });
});

/**
 * The children of this file, from one bundle build (see bundledCommands: a third of tsx's
 * start-up CPU): a traced session, examples/otel.ts.
 */
const [tracedSession, otelExample] = [
  fileURLToPath(new URL('./fixtures/traced-session.ts', import.meta.url)),
  fileURLToPath(new URL('../../../examples/otel.ts', import.meta.url)),
];
const children = new Map<string, NodeCommand>();
beforeAll(async () => {
  const files = [tracedSession, otelExample];
  (await bundledCommands(files)).forEach((command, i) => children.set(files[i]!, command));
});
afterAll(() => children.forEach((command) => command.dispose()));
const commandOf = (file: string) => children.get(file)!.args;

describe('a durable session resumed in another process', () => {
  function child(path: string, phase: 'ask' | 'approve'): { spans: ReturnType<typeof summary>[]; trace?: string } {
    const result = spawnSync(process.execPath, [...commandOf(tracedSession), path, phase], { encoding: 'utf8', timeout: 30_000 });
    expect(result.status, result.stderr).toBe(0);
    return JSON.parse(result.stdout.trim().split('\n').pop()!);
  }

  it('continues the same trace: the resumed run span is a child of the first process run span', () => {
    const dir = mkdtempSync(join(tmpdir(), 'loopchart-otel-'));
    try {
      const db = join(dir, 'sessions.db');
      const first = child(db, 'ask');
      // The first process closed the session while the run waited: its run span ended as suspended.
      const firstChat = first.spans.find((s) => s.name === 'chat m')!;
      const firstRun = first.spans.find((s) => s.name === 'invoke_agent durable')!;
      expect(firstRun.attributes).toMatchObject({ 'loopchart.run.suspended': true });
      expect(firstRun.attributes['loopchart.outcome']).toBeUndefined();
      expect(firstChat.parentSpanId).toBe(firstRun.spanId);
      expect(first.trace).toBe(`00-${firstRun.traceId}-${firstRun.spanId}-01`);

      const second = child(db, 'approve');
      const run = second.spans.find((s) => s.name === 'invoke_agent durable')!;
      expect(run.traceId).toBe(firstChat.traceId);
      expect(run.parentSpanId).toBe(firstRun.spanId);
      expect(run.attributes).toMatchObject({ 'loopchart.run.resumed': true, 'gen_ai.conversation.id': 'traced-1', 'loopchart.outcome': 'Completed' });
      const tool = second.spans.find((s) => s.name === 'execute_tool write')!;
      const chat = second.spans.find((s) => s.name === 'chat m')!;
      for (const span of [tool, chat]) {
        expect(span.traceId).toBe(firstChat.traceId);
        expect(span.parentSpanId).toBe(run.spanId);
      }
      // The store now names the resumed run's span, for a third process.
      expect(second.trace).toBe(`00-${run.traceId}-${run.spanId}-01`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('the default tracer', () => {
  it('without a tracer, spans go to the global tracer provider as trace.getTracer("loopchart")', async () => {
    const tracing = memoryTracing();
    trace.setGlobalTracerProvider(tracing.provider);
    try {
      const machine = createAgentMachine({ model: scriptedModel([answer]), retry: false, telemetry: {} });
      await runToCompletion(createActor(machine, { input: { prompt: 'hi' } }));
      const [run] = tracing.named('invoke_agent');
      expect(run!.name).toBe('invoke_agent agent');
      expect(run!.instrumentationScope.name).toBe('loopchart');
    } finally {
      trace.disable();
    }
  });
});

describe('examples/otel.ts', () => {
  it('prints the run traced by the console exporter: the run span and its children, then the answer', () => {
    const result = spawnSync(process.execPath, commandOf(otelExample), { encoding: 'utf8', timeout: 30_000 });
    expect(result.status, result.stderr).toBe(0);
    for (const name of ['chat scripted-1', 'execute_tool add', 'invoke_agent calculator']) expect(result.stdout).toContain(`name: '${name}'`);
    expect(result.stdout).toContain("'gen_ai.tool.call.id': 'call_1_0'");
    expect(result.stdout.trim().split('\n').at(-1)).toBe('2 + 3 = 5.');
  });
});

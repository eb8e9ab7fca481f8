/**
 * What the tracing hands to OpenTelemetry, probed from outside with the real SDK: a tracer, span
 * processor or exporter that throws never reaches the agent.
 */
import { BasicTracerProvider, type SpanProcessor } from '@opentelemetry/sdk-trace-base';
import { describe, expect, it } from 'vitest';
import { createActor } from 'xstate';
import { z } from 'zod';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import { scriptedModel } from '../../../src/models/scripted.js';
import { defineTool } from '../../../src/tools/define-tool.js';
import { agentTool } from '../../../src/agent/subagents/agent-tool.js';
import { DurableSession } from '../../../src/sessions/durable-session.js';
import { MemorySessionStore } from '../../../src/stores/memory.js';
import { runToCompletion } from '../../support/driver.js';
import { idOf, memoryTracing, parentOf, traceOf } from './support.js';
import { boundedText } from '../../../src/agent/tracing/agent-tracing.js';

const add = defineTool({ name: 'add', description: 'Adds', input: z.object({ a: z.number(), b: z.number() }), execute: ({ a, b }) => String(a + b) });
const toolTurn = { toolCalls: [{ name: 'add', args: { a: 1, b: 2 } }] };
const answer = { text: 'It is 3.' };

const processor = (overrides: Partial<SpanProcessor>): SpanProcessor => ({
  onStart: () => {},
  onEnd: () => {},
  forceFlush: async () => {},
  shutdown: async () => {},
  ...overrides,
});

describe('a tracer that throws', () => {
  const boom = () => {
    throw new Error('telemetry boom');
  };
  it.each([
    ['startSpan throws', { startSpan: boom }],
    ['a span processor throws as a span starts', new BasicTracerProvider({ spanProcessors: [processor({ onStart: boom })] }).getTracer('t')],
    ['a span processor (an exporter behind it) throws as a span ends', new BasicTracerProvider({ spanProcessors: [processor({ onEnd: boom })] }).getTracer('t')],
  ])('%s: the run goes on to its answer, the actor unharmed', async (_, tracer) => {
    const machine = createAgentMachine({ model: scriptedModel([toolTurn, answer]), tools: [add], retry: false, telemetry: { tracer } });
    const output = await runToCompletion(createActor(machine, { input: { prompt: 'add 1 and 2', sessionId: 'boom' } }));
    expect(output.outcome).toEqual({ type: 'Completed', finalText: 'It is 3.' });
  });

  it('a span whose setAttribute throws: the run goes on and its spans still end', async () => {
    const tracing = memoryTracing();
    const tracer = {
      startSpan: (...args: Parameters<typeof tracing.tracer.startSpan>) => {
        const span = tracing.tracer.startSpan(...args);
        span.setAttribute = boom;
        span.setAttributes = boom;
        return span;
      },
    };
    const machine = createAgentMachine({ model: scriptedModel([toolTurn, answer]), tools: [add], retry: false, telemetry: { tracer } });
    const output = await runToCompletion(createActor(machine, { input: { prompt: 'add 1 and 2', sessionId: 'boom' } }));
    expect(output.outcome.type).toBe('Completed');
    expect(tracing.spans().map((span) => span.name).sort()).toEqual(['chat scripted', 'chat scripted', 'execute_tool add', 'invoke_agent agent']);
  });
});

describe('the size of what a span holds', () => {
  const huge = 'x'.repeat(5_000_000);
  /** A run whose one tool returns 5 MB, traced with recordContent and `options`. */
  const bigResultRun = async (options: { maxAttributeLength?: number }) => {
    const big = defineTool({ name: 'big', description: 'Big', input: z.object({}), execute: () => huge });
    const tracing = memoryTracing();
    const machine = createAgentMachine({
      model: scriptedModel([{ toolCalls: [{ name: 'big', args: {} }] }, answer]),
      tools: [big],
      retry: false,
      telemetry: { tracer: tracing.tracer, recordContent: true, ...options },
    });
    await runToCompletion(createActor(machine, { input: { prompt: 'go', sessionId: 'big' } }));
    return tracing;
  };
  const largest = (tracing: ReturnType<typeof memoryTracing>) =>
    Math.max(...tracing.spans().map((span) => JSON.stringify({ attributes: span.attributes, events: span.events, status: span.status }).length));

  it('a 5 MB tool result recorded with recordContent is cut to maxAttributeLength (default 16 KiB), saying so', async () => {
    const tracing = await bigResultRun({});
    const [tool] = tracing.named('execute_tool');
    const result = tool!.attributes['gen_ai.tool.call.result'] as string;
    expect(result.length).toBeLessThan(16_384 + 100);
    expect(result.startsWith('xxxx')).toBe(true);
    expect(result).toMatch(/truncated/);
    // The next model call's input messages hold it too.
    expect(largest(tracing)).toBeLessThan(5 * 16_384);
  });

  it('maxAttributeLength sets the bound; it must be a positive whole number', async () => {
    const tracing = await bigResultRun({ maxAttributeLength: 1000 });
    expect((tracing.named('execute_tool')[0]!.attributes['gen_ai.tool.call.result'] as string).length).toBeLessThan(1100);
    for (const maxAttributeLength of [0, -1, 1.5, Number.NaN, '100']) {
      expect(() => createAgentMachine({ model: scriptedModel([answer]), telemetry: { maxAttributeLength: maxAttributeLength as number } })).toThrow(/maxAttributeLength/);
    }
  });

  it('a 5 MB error message (a model error, a tool that throws) is bounded in the status, the exception event and the run span', async () => {
    const tracing = memoryTracing();
    const throwing = defineTool({
      name: 'throwing',
      description: 'Throws',
      input: z.object({}),
      execute: () => {
        throw new Error(huge);
      },
    });
    const withTool = createAgentMachine({
      model: scriptedModel([{ toolCalls: [{ name: 'throwing', args: {} }] }, answer]),
      tools: [throwing],
      retry: false,
      telemetry: { tracer: tracing.tracer, recordContent: true },
    });
    await runToCompletion(createActor(withTool, { input: { prompt: 'go', sessionId: 'tool' } }));
    const failing = createAgentMachine({
      model: { name: 'acme:x', generate: async () => Promise.reject(new Error(huge)) },
      retry: false,
      telemetry: { tracer: tracing.tracer },
    });
    const output = await runToCompletion(createActor(failing, { input: { prompt: 'go', sessionId: 'model' } }));
    expect(output.outcome.type).toBe('Failed');
    expect(tracing.named('chat x')[0]!.events.map((event) => event.name)).toEqual(['exception']);
    expect(largest(tracing)).toBeLessThan(5 * 16_384);
  });
});

describe('content left out (recordContent false, the default)', () => {
  const everything = (tracing: ReturnType<typeof memoryTracing>) =>
    JSON.stringify(tracing.spans().map((span) => ({ name: span.name, attributes: span.attributes, events: span.events, status: span.status })));
  const lookup = defineTool({
    name: 'lookup',
    description: 'Finds an account',
    input: z.object({ email: z.string() }),
    execute: ({ email }) => {
      throw new Error(`no account for ${email}`);
    },
  });
  const machine = (tracing: ReturnType<typeof memoryTracing>, recordContent?: boolean) =>
    createAgentMachine({
      model: scriptedModel([{ toolCalls: [{ name: 'lookup', args: { email: 'alice@example.com' } }] }, answer]),
      tools: [lookup],
      retry: false,
      telemetry: { tracer: tracing.tracer, ...(recordContent !== undefined && { recordContent }) },
    });

  it("a tool's error result (the text the model reads, which may quote the arguments) is not in the span, its exception event or its status", async () => {
    const tracing = memoryTracing();
    await runToCompletion(createActor(machine(tracing), { input: { prompt: 'find alice', sessionId: 'content' } }));
    expect(everything(tracing)).not.toContain('alice@example.com');
    const [tool] = tracing.named('execute_tool');
    expect(tool!.status.code).toBe(2);
    expect(tool!.attributes['error.type']).toBe('tool_error');
    expect(tool!.events.map((event) => [event.name, event.attributes?.['exception.type']])).toEqual([['exception', 'tool_error']]);
  });

  it('with recordContent the error text is recorded', async () => {
    const tracing = memoryTracing();
    await runToCompletion(createActor(machine(tracing, true), { input: { prompt: 'find alice', sessionId: 'content' } }));
    const [tool] = tracing.named('execute_tool');
    expect(tool!.events[0]!.attributes!['exception.message']).toBe('no account for alice@example.com');
    expect(tool!.status.message).toBe('no account for alice@example.com');
  });

  it.each([false, true])('the credentials of a URL quoted in an error never reach a span (recordContent %s)', async (recordContent) => {
    const tracing = memoryTracing();
    const failing = createAgentMachine({
      model: {
        name: 'acme:x',
        generate: async () => Promise.reject(new Error('could not reach https://me:sk-live-4242424242@proxy.example/v1: connection refused')),
      },
      retry: false,
      telemetry: { tracer: tracing.tracer, recordContent },
    });
    expect((await runToCompletion(createActor(failing, { input: { prompt: 'go', sessionId: 'url' } }))).outcome.type).toBe('Failed');
    const recorded = everything(tracing);
    expect(recorded).not.toContain('sk-live-4242424242');
    expect(recorded).toContain('https://***@proxy.example/v1');
  });

  it.each([false, true])('nor does a key in a query string, a header or a key-shaped word (recordContent %s)', async (recordContent) => {
    const tracing = memoryTracing();
    const failing = createAgentMachine({
      model: {
        name: 'acme:x',
        generate: async () =>
          Promise.reject(new Error('GET https://api.example/v1?key=AIzaQueryKey123456 refused; Authorization: Bearer tok-abcdefghijkl; tried sk-proj-abcdefghijklmnop')),
      },
      retry: false,
      telemetry: { tracer: tracing.tracer, recordContent },
    });
    expect((await runToCompletion(createActor(failing, { input: { prompt: 'go', sessionId: 'keys' } }))).outcome.type).toBe('Failed');
    const recorded = everything(tracing);
    for (const secret of ['AIzaQueryKey123456', 'tok-abcdefghijkl', 'sk-proj-abcdefghijklmnop']) expect(recorded).not.toContain(secret);
    expect(recorded).toContain('https://api.example/v1?key=***');
  });
});

describe('the session id in spans (gen_ai.conversation.id)', () => {
  // A session id often names the user (a chat keyed by user, an MCP caller's tag): the trace backend need not see it.
  const spansOf = async (conversationId: ((sessionId: string) => string | undefined) | undefined) => {
    const tracing = memoryTracing();
    const approve = defineTool({ ...add, name: 'pay', needsApproval: true });
    const machine = createAgentMachine({
      model: scriptedModel([toolTurn, { toolCalls: [{ id: 'p1', name: 'pay', args: { a: 1, b: 2 } }] }, answer]),
      tools: [add, approve],
      retry: false,
      telemetry: { tracer: tracing.tracer, conversationId },
    });
    const actor = createActor(machine, { input: { prompt: 'go', sessionId: 'user-ada@example.com' } });
    actor.on('approval.requested', () => actor.send({ type: 'approve', toolCallId: 'p1' }));
    expect((await runToCompletion(actor)).outcome.type).toBe('Completed');
    const spans = tracing.spans();
    expect(spans.map((span) => span.name)).toEqual(expect.arrayContaining(['invoke_agent agent', 'execute_tool add', 'await_approval pay']));
    return { spans, recorded: JSON.stringify(spans.map((span) => ({ attributes: span.attributes, events: span.events }))) };
  };

  it('is recorded as it is by default', async () => {
    const { spans } = await spansOf(undefined);
    for (const span of spans) expect(span.attributes['gen_ai.conversation.id'], span.name).toBe('user-ada@example.com');
  });

  it('conversationId maps it (a pseudonym) on every span, or leaves it out when it returns undefined', async () => {
    const mapped = await spansOf((id) => `conv-${id.length}`);
    expect(mapped.recorded).not.toContain('ada@example.com');
    for (const span of mapped.spans) expect(span.attributes['gen_ai.conversation.id'], span.name).toBe('conv-20');
    const left = await spansOf(() => undefined);
    expect(left.recorded).not.toContain('ada@example.com');
    for (const span of left.spans) expect(span.attributes, span.name).not.toHaveProperty(['gen_ai.conversation.id']);
  });

  it('a conversationId that throws leaves the attribute out; the run goes on', async () => {
    const { spans, recorded } = await spansOf(() => {
      throw new Error('no key');
    });
    expect(recorded).not.toContain('ada@example.com');
    for (const span of spans) expect(span.attributes, span.name).not.toHaveProperty(['gen_ai.conversation.id']);
  });
});

describe("a subagent's spans", () => {
  // No context manager is registered (as in most of these tests): the link must not depend on one.
  const family = (tracing: ReturnType<typeof memoryTracing>) => {
    const child = createAgentMachine({ model: scriptedModel([{ text: 'Tea is from China.' }]), retry: false, telemetry: { tracer: tracing.tracer, name: 'researcher' } });
    return createAgentMachine({
      model: scriptedModel([{ toolCalls: [{ name: 'research', args: { task: 'Where is tea from?' } }] }, { text: 'China.' }]),
      tools: [agentTool({ agent: child, name: 'research', description: 'Researches one question.' })],
      retry: false,
      telemetry: { tracer: tracing.tracer, name: 'coordinator' },
    });
  };
  const expectLinked = (tracing: ReturnType<typeof memoryTracing>) => {
    const [parentRun] = tracing.named('invoke_agent coordinator');
    const [call] = tracing.named('execute_tool research');
    const [childRun] = tracing.named('invoke_agent researcher');
    expect(traceOf(childRun!)).toBe(traceOf(parentRun!));
    expect(parentOf(childRun!)).toBe(idOf(call!));
    // The child's own calls are under its run.
    const childChat = tracing.spans().find((span) => span.name.startsWith('chat ') && parentOf(span) === idOf(childRun!));
    expect(childChat).toBeDefined();
  };

  it("the child's run span is a child of the parent's execute_tool span, in the parent's trace", async () => {
    const tracing = memoryTracing();
    await runToCompletion(createActor(family(tracing), { input: { prompt: 'go', sessionId: 'tree' } }));
    expectLinked(tracing);
  });

  it('the same under a durable session (the child is a session of its own)', async () => {
    const tracing = memoryTracing();
    const session = await DurableSession.open({ machine: family(tracing), store: new MemorySessionStore(), sessionId: 'tree' });
    session.send({ type: 'input', message: 'go' });
    expect((await session.whenIdle())?.outcome.type).toBe('Completed');
    await session.close();
    expectLinked(tracing);
  });
});

describe('boundedText', () => {
  it('keeps a short string, redacts URL credentials, cuts a long one saying how much went', () => {
    expect(boundedText('plain', 10)).toBe('plain');
    expect(boundedText('see https://me:sk-1@host/v1', 100)).toBe('see https://***@host/v1');
    expect(boundedText('a'.repeat(50), 10)).toBe(`${'a'.repeat(10)}…[truncated 40 chars]`);
    // A URL across the cut is redacted before the cut; a 5 MB string is cut, not scanned whole.
    const cut = boundedText(`${'a'.repeat(8)}https://me:sk-1234567890@host/${'b'.repeat(5_000_000)}`, 20);
    expect(cut).not.toContain('sk-1234');
    expect(cut.startsWith('aaaaaaaahttps://***@')).toBe(true);
    expect(cut.length).toBeLessThan(60);
    // Never half a surrogate pair.
    expect(boundedText(`${'a'.repeat(9)}😀😀`, 10)).toBe(`${'a'.repeat(9)}…[truncated 4 chars]`);
  });
});

describe('a side effect that ignores its abort', () => {
  it("its span ends, cancelled, when its run ends without it (it may never return), and once only when it does return", async () => {
    let release: (value: string) => void = () => {};
    let markStarted: () => void = () => {};
    const started = new Promise<void>((resolve) => (markStarted = resolve));
    const stubborn = defineTool({
      name: 'stubborn',
      description: 'Ignores its abort signal',
      input: z.object({}),
      execute: () => {
        markStarted();
        return new Promise<string>((resolve) => (release = resolve));
      },
    });
    const tracing = memoryTracing();
    const machine = createAgentMachine({ model: scriptedModel([{ toolCalls: [{ name: 'stubborn', args: {} }] }, answer]), tools: [stubborn], retry: false, telemetry: { tracer: tracing.tracer } });
    const actor = createActor(machine, { input: { prompt: 'go', sessionId: 'stubborn' } });
    const done = runToCompletion(actor);
    await started;
    actor.send({ type: 'cancel' });
    expect((await done).outcome.type).toBe('Cancelled');
    const tool = tracing.named('execute_tool stubborn');
    expect(tool).toHaveLength(1);
    expect(tool[0]!.attributes).toMatchObject({ 'loopchart.cancelled': true });
    expect(tracing.named('invoke_agent')).toHaveLength(1);
    release('late');
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(tracing.named('execute_tool stubborn')).toHaveLength(1);
  });
});

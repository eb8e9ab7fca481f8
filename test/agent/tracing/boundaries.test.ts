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
import { runToCompletion } from '../../support/driver.js';
import { memoryTracing } from './support.js';

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

// examples/readme/otel.ts
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { defineTool, runAgent } from 'loopchart';
import { scriptedModel } from 'loopchart/testing';
import { z } from 'zod';

const exporter = new InMemorySpanExporter(); // in an application: OTLPTraceExporter, ConsoleSpanExporter...
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });

const add = defineTool({
  name: 'add',
  description: 'Adds two numbers.',
  input: z.object({ a: z.number(), b: z.number() }),
  execute: ({ a, b }) => a + b,
});
const model = scriptedModel([{ toolCalls: [{ name: 'add', args: { a: 2, b: 3 } }] }, { text: '5' }], { name: 'acme:small-1' });

await runAgent({
  model,
  tools: [add],
  prompt: 'What is 2 + 3?',
  // tracer defaults to trace.getTracer('loopchart'); recordContent (default false) adds messages and tool I/O.
  telemetry: { tracer: provider.getTracer('my-app'), name: 'calculator' },
});

const spans = exporter.getFinishedSpans();
console.log(spans.map((span) => span.name).join(', ')); // chat small-1, execute_tool add, chat small-1, invoke_agent calculator
const tool = spans.find((span) => span.name === 'execute_tool add')!;
console.log(tool.attributes['gen_ai.tool.call.id'], tool.parentSpanContext?.spanId === spans.at(-1)!.spanContext().spanId); // call_1_0 true

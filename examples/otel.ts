/**
 * An agent run traced with OpenTelemetry, printed by the console exporter: `npx tsx examples/otel.ts`.
 *
 * The run span `invoke_agent calculator` holds a `chat` span per model call and an
 * `execute_tool add` span per tool call, with the GenAI attributes (provider, model, token usage,
 * finish reasons, tool name and call id, the session id as `gen_ai.conversation.id`).
 * Needs `@opentelemetry/api` and `@opentelemetry/sdk-trace-base` (any exporter works the same).
 */
import { BasicTracerProvider, ConsoleSpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { z } from 'zod';
import { defineTool, runAgent } from '../src/index.js';
import { scriptedModel } from '../src/testing.js';

const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(new ConsoleSpanExporter())] });

const add = defineTool({
  name: 'add',
  description: 'Adds two numbers.',
  input: z.object({ a: z.number(), b: z.number() }),
  execute: ({ a, b }) => a + b,
});

// A scripted model, so the example runs offline; any Model (openAICompatibleModel, aiSdkModel) traces alike.
const model = scriptedModel([{ toolCalls: [{ name: 'add', args: { a: 2, b: 3 } }] }, { text: '2 + 3 = 5.' }], { name: 'demo:scripted-1' });

const { text } = await runAgent({
  model,
  tools: [add],
  prompt: 'What is 2 + 3?',
  telemetry: { tracer: provider.getTracer('examples'), name: 'calculator', recordContent: true },
});
await provider.shutdown();
console.log(text);

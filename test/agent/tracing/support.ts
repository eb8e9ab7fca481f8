import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';

/** A real OpenTelemetry SDK tracer whose spans land in memory, exported as each one ends. */
export function memoryTracing() {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  const tracer = provider.getTracer('loopchart-test');
  return {
    provider,
    tracer,
    spans: (): ReadableSpan[] => exporter.getFinishedSpans(),
    named: (prefix: string): ReadableSpan[] => exporter.getFinishedSpans().filter((span) => span.name.startsWith(prefix)),
    reset: () => exporter.reset(),
  };
}

/** The span's parent span id ('' for a root). */
export const parentOf = (span: ReadableSpan): string => span.parentSpanContext?.spanId ?? '';
export const idOf = (span: ReadableSpan): string => span.spanContext().spanId;
export const traceOf = (span: ReadableSpan): string => span.spanContext().traceId;

/** The plain facts of a span, for a child process to print and a test to compare. */
export const summary = (span: ReadableSpan) => ({
  name: span.name,
  traceId: traceOf(span),
  spanId: idOf(span),
  parentSpanId: parentOf(span),
  attributes: span.attributes,
  status: span.status.code,
});

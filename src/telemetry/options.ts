import { z } from 'zod';

/**
 * The part of an OpenTelemetry `Tracer` loopchart calls, written out so loopchart's own types
 * never name `@opentelemetry/api`: a project without it still type-checks. Any `Tracer` from
 * `@opentelemetry/api` 1.x fits (`trace.getTracer(...)`, a `TracerProvider`'s `getTracer`).
 *
 * @example
 * ```ts
 * import { trace } from '@opentelemetry/api';
 * import type { TelemetryTracer } from 'loopchart';
 *
 * const tracer: TelemetryTracer = trace.getTracer('my-app');
 * ```
 */
export interface TelemetryTracer {
  startSpan(name: string, options?: object, context?: object): object;
}

/**
 * Traces every run of an agent as OpenTelemetry spans named and attributed per the GenAI
 * semantic conventions: `invoke_agent {name}` per run, with `chat {model}` per model call,
 * `execute_tool {tool}` per tool call, and one span per compaction, prune and approval wait.
 *
 * @example
 * ```ts
 * import { trace } from '@opentelemetry/api';
 * import { createAgentMachine } from 'loopchart';
 *
 * const agent = createAgentMachine({
 *   model,
 *   telemetry: { tracer: trace.getTracer('my-app'), name: 'support-bot', recordContent: false },
 * });
 * ```
 */
export interface TelemetryOptions {
  /**
   * Where spans go. Default: `trace.getTracer('loopchart')` from `@opentelemetry/api`, loaded
   * (synchronously, when the machine is made) only because telemetry is on.
   */
  tracer?: TelemetryTracer | undefined;
  /**
   * Record message and tool content (`gen_ai.input.messages`, `gen_ai.output.messages`,
   * `gen_ai.tool.call.arguments`, `gen_ai.tool.call.result`, and a failed tool's error text in
   * its exception event and status). Default false: prompts and tool output often hold what must
   * not leave the process.
   */
  recordContent?: boolean | undefined;
  /** The agent's name: `gen_ai.agent.name` and the run span's name. Default 'agent'. */
  name?: string | undefined;
  /**
   * The most characters any one string the tracing records may have (an attribute, an event's
   * attribute, an exception's message and stack, a status message): longer ones are cut there and
   * end `…[truncated N chars]`. Default `DEFAULT_MAX_ATTRIBUTE_LENGTH` (16 KiB): a 5 MB tool
   * result recorded with `recordContent` is not a 5 MB span.
   */
  maxAttributeLength?: number | undefined;
  /**
   * How a run's session id is shown on its spans (`gen_ai.conversation.id`). Default: as it is. A
   * session id often names the user (a chat keyed by user id, an MCP caller's tag): return a
   * pseudonym (a keyed hash) to keep it out of the trace backend while spans of one conversation
   * still group, or `undefined` to leave the attribute out. Asked once per run; one that throws
   * leaves it out too.
   */
  conversationId?: ((sessionId: string) => string | undefined) | undefined;
}

/** The default of `TelemetryOptions.maxAttributeLength`: 16 KiB. */
export const DEFAULT_MAX_ATTRIBUTE_LENGTH = 16_384;

/** The options as given, checked when the machine is made. */
export const TelemetryOptionsSchema = z.strictObject({
  tracer: z
    .custom<TelemetryTracer>((value) => typeof value === 'object' && value !== null && typeof (value as { startSpan?: unknown }).startSpan === 'function', {
      message: 'expected an OpenTelemetry Tracer (an object with startSpan)',
    })
    .optional(),
  recordContent: z.boolean().optional(),
  name: z.string().min(1).max(200).optional(),
  maxAttributeLength: z.number().int().positive().optional(),
  conversationId: z.custom<(sessionId: string) => string | undefined>((value) => typeof value === 'function', { message: 'expected a function of the session id' }).optional(),
});

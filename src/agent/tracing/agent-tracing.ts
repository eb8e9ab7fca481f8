import { AsyncLocalStorage } from 'node:async_hooks';
import type { AttributeValue, Attributes, Context, Exception, Span, SpanContext, SpanStatus, Tracer } from '@opentelemetry/api';
import type { Executor, SideEffect, SideEffectKind, SideEffectOutputs } from '../protocol/executor.js';
import type { Usage } from '../../model.js';
import type { Outcome, ToolCall } from '../../schemas.js';
import { DEFAULT_MAX_ATTRIBUTE_LENGTH, TelemetryOptionsSchema, type TelemetryOptions } from '../../telemetry/options.js';
import { parseOptions } from '../../known-keys.js';
import { otelApi, type OtelApi } from '../../telemetry/otel-api.js';
import { formatTraceparent, parseTraceparent } from '../../telemetry/traceparent.js';
import { redactText } from '../../models/redact.js';

/*
 * Spans for an agent's runs, from two sources and nothing else: the executor seam (every model,
 * tool, compaction and approval-check call is an effect with a key) and the chart's marks at the
 * points only the chart knows (a run starts, resumes, ends; a prune; an approval wait).
 * Effects find their run by key: every effect key of a run starts with the run's key prefix.
 */

// Numeric values of the API's enums (stable since API 1.0), so no enum object is needed.
const SPAN_KIND_INTERNAL = 0;
const SPAN_KIND_CLIENT = 2;
const STATUS_ERROR = 2;
/** Where a run key ends inside an effect key. */
const RUN_KEY_END = /:run-\d+:/g;

/**
 * The trace context of the effect being performed (its span), carried with the effect's async
 * work: a run started inside it (an agent tool's child, in process or as a durable session of its
 * own) is a child of the call's span in the caller's trace. Ours, so it holds without a context
 * manager registered with OpenTelemetry (the effect also runs in `context.with`, for one that is).
 */
const effectContext = new AsyncLocalStorage<Context>();

/** What the chart tells the tracing when a run starts or continues. */
export interface RunFacts {
  /** Every effect key of the run starts with it (`serviceKey`'s prefix). */
  runKey: string;
  sessionId: string;
  runIndex: number;
  /** The stored trace context of the run this one continues (a resumed session), if any. */
  continues?: string | null | undefined;
}

interface OpenRun {
  span: GuardedSpan;
  context: Context;
  /** `gen_ai.conversation.id` as this run's spans show it (see `TelemetryOptions.conversationId`), or nothing. */
  conversation: Attributes;
  /** Approval waits by tool-call id, with when they began. */
  waits: Map<string, { span: GuardedSpan; started: number }>;
  /** Spans of the run's side effects still in flight, ended with the run if they outlive it (a call that ignores its abort may never return). */
  effects: Set<GuardedSpan>;
}

/**
 * `value` as a span may hold it: credentials in it redacted as the model adapters redact their
 * errors (`redactText`: URL user info, `?key=`, `Authorization` and other credential-named fields,
 * key-shaped words), since an error from a custom model or a tool that quotes one must not put a
 * key in the trace backend; then
 * cut to `limit` characters (never inside a surrogate pair), saying how much was cut.
 */
export function boundedText(given: string, limit: number): string {
  // Only what may be kept is searched (a 5 MB result is not scanned whole), with a margin for a URL across the cut.
  const head = given.length > limit + URL_MARGIN ? given.slice(0, limit + URL_MARGIN) : given;
  const value = redactText(head);
  if (value.length <= limit && head === given) return value;
  let end = Math.min(limit, value.length);
  const last = value.charCodeAt(end - 1);
  if (last >= 0xd800 && last <= 0xdbff) end--;
  const cut = value.length - end + (given.length - head.length);
  return cut === 0 ? value : `${value.slice(0, end)}…[truncated ${cut} chars]`;
}

/** How far past the bound a recorded string is searched for credentials before it is cut. */
const URL_MARGIN = 2_048;

function boundedValue(value: AttributeValue, limit: number): AttributeValue {
  if (typeof value === 'string') return boundedText(value, limit);
  if (Array.isArray(value)) return value.map((item) => (typeof item === 'string' ? boundedText(item, limit) : item)) as AttributeValue;
  return value;
}

/** The attributes with every string (and every string of an array) bounded. */
function boundedAttributes(attributes: Attributes, limit: number): Attributes {
  const out: Attributes = {};
  for (const [key, value] of Object.entries(attributes)) out[key] = value === undefined ? value : boundedValue(value, limit);
  return out;
}

/**
 * A span as the tracing uses it, the one way anything reaches OpenTelemetry:
 * - every call into it (the SDK, its span processors and, behind a simple processor, the
 *   exporter) is caught and reported to OpenTelemetry's own `diag` logger. Telemetry observes the
 *   agent; a tracer that throws must never fail a call or stop an actor (a throw in a chart action
 *   would put the actor in error; in the executor, fail the effect).
 * - every string it is given is cut to `maxAttributeLength` (`boundedText`): content, error
 *   messages and stacks can be megabytes, an exporter's batch should not be.
 * - it ends once; what comes after (a call that returns after its run closed its span) is dropped.
 */
class GuardedSpan {
  private ended = false;

  constructor(
    readonly raw: Span,
    private readonly report: (error: unknown) => void,
    private readonly limit: number,
  ) {}

  private text(value: string): string {
    return boundedText(value, this.limit);
  }

  private value(value: AttributeValue): AttributeValue {
    return boundedValue(value, this.limit);
  }

  private bounded(attributes: Attributes): Attributes {
    return boundedAttributes(attributes, this.limit);
  }

  private guard(work: (span: Span) => void): void {
    if (this.ended) return;
    try {
      work(this.raw);
    } catch (error) {
      this.report(error);
    }
  }

  /** The span's context, if it has a valid one (a span that failed to start has none). */
  spanContext(): SpanContext | undefined {
    try {
      const context = this.raw.spanContext();
      return parseTraceparent(formatTraceparent(context)) ? context : undefined;
    } catch (error) {
      this.report(error);
      return undefined;
    }
  }

  setAttribute(key: string, value: AttributeValue): void {
    this.guard((span) => span.setAttribute(key, this.value(value)));
  }

  setAttributes(attributes: Attributes): void {
    this.guard((span) => span.setAttributes(this.bounded(attributes)));
  }

  addEvent(name: string, attributes: Attributes): void {
    this.guard((span) => span.addEvent(name, this.bounded(attributes)));
  }

  /** Recorded as a plain `{ code?, name, message, stack? }`, each bounded (an Error's own message and stack may be megabytes). */
  recordException(exception: { name: string; message: string; code?: string | undefined; stack?: string | undefined }): void {
    const { name, message, code, stack } = exception;
    const plain: Exception = {
      name: this.text(name),
      message: this.text(message),
      ...(code !== undefined && { code: this.text(code) }),
      ...(stack !== undefined && { stack: this.text(stack) }),
    };
    this.guard((span) => span.recordException(plain));
  }

  setStatus(status: SpanStatus): void {
    this.guard((span) => span.setStatus(status.message === undefined ? status : { ...status, message: this.text(status.message) }));
  }

  end(): void {
    this.guard((span) => span.end());
    this.ended = true;
  }
}

/** The model's provider and model id, from its `name` (`provider:model` by convention). */
export function modelIdentity(name: string): { provider: string; model: string } {
  const colon = name.indexOf(':');
  return colon > 0 ? { provider: name.slice(0, colon), model: name.slice(colon + 1) } : { provider: name, model: name };
}

export class AgentTracing {
  private readonly api: OtelApi;
  private readonly tracer: Tracer;
  private readonly recordContent: boolean;
  private readonly agentName: string;
  private readonly maxAttributeLength: number;
  private readonly model: { provider: string; model: string };
  private readonly conversationId: ((sessionId: string) => string | undefined) | undefined;
  /** Open runs by run key; effects match the longest key their own key starts with. */
  private readonly runs = new Map<string, OpenRun>();
  /** Open model-call spans by effect key, for the retry events the chart reports. */
  private readonly calls = new Map<string, GuardedSpan>();

  constructor(given: TelemetryOptions, modelName: string) {
    const options = parseOptions(TelemetryOptionsSchema, given, 'telemetry');
    this.api = otelApi();
    this.tracer = (options.tracer as Tracer | undefined) ?? this.api.trace.getTracer('loopchart');
    this.recordContent = options.recordContent === true;
    this.agentName = options.name ?? 'agent';
    this.maxAttributeLength = options.maxAttributeLength ?? DEFAULT_MAX_ATTRIBUTE_LENGTH;
    this.model = modelIdentity(modelName);
    this.conversationId = options.conversationId;
  }

  /** The session id as the run's spans show it: the user's mapping, asked once per run; one that throws or gives no string shows nothing. */
  private conversationOf(sessionId: string): Attributes {
    if (!this.conversationId) return { 'gen_ai.conversation.id': sessionId };
    try {
      const shown = this.conversationId(sessionId);
      return typeof shown === 'string' ? { 'gen_ai.conversation.id': shown } : {};
    } catch (error) {
      this.report(error);
      return {};
    }
  }

  /** Starts a span; a tracer that throws gives a span that records nothing (see `GuardedSpan`). */
  private start(name: string, options: { kind: number; attributes: Attributes }, parent: Context): GuardedSpan {
    const bound = (span: Span) => new GuardedSpan(span, this.report, this.maxAttributeLength);
    try {
      return bound(this.tracer.startSpan(name, { ...options, attributes: boundedAttributes(options.attributes, this.maxAttributeLength) }, parent));
    } catch (error) {
      this.report(error);
      return bound(this.api.trace.wrapSpanContext(this.api.INVALID_SPAN_CONTEXT));
    }
  }

  /** A failure of the tracer, told to OpenTelemetry's diagnostic logger (itself guarded: it may be the user's). */
  private readonly report = (error: unknown): void => {
    try {
      this.api.diag.error('loopchart: the tracer failed (the agent goes on without this span)', error);
    } catch {
      // Nowhere left to tell it.
    }
  };

  /**
   * Opens the run's span; returns its trace context (a W3C traceparent) to store with the session,
   * or undefined when the tracer failed to start it.
   */
  runStarted(facts: RunFacts): string | undefined {
    this.closeRun(facts.runKey, { interrupted: true });
    const stored = facts.continues ? parseTraceparent(facts.continues) : undefined;
    const parent = stored
      ? this.api.trace.setSpanContext(this.api.ROOT_CONTEXT, { ...stored, isRemote: true })
      : (effectContext.getStore() ?? this.api.context.active());
    const conversation = this.conversationOf(facts.sessionId);
    const span = this.start(
      `invoke_agent ${this.agentName}`,
      {
        kind: SPAN_KIND_INTERNAL,
        attributes: {
          'gen_ai.operation.name': 'invoke_agent',
          'gen_ai.agent.name': this.agentName,
          ...conversation,
          'gen_ai.provider.name': this.model.provider,
          'gen_ai.request.model': this.model.model,
          'loopchart.run.index': facts.runIndex,
          ...(stored && { 'loopchart.run.resumed': true }),
        },
      },
      parent,
    );
    this.runs.set(facts.runKey, { span, context: this.api.trace.setSpan(parent, span.raw), conversation, waits: new Map(), effects: new Set() });
    const context = span.spanContext();
    return context && formatTraceparent(context);
  }

  runFinished(runKey: string, result: { outcome: Outcome; usage: Usage; turns: number }): void {
    const run = this.runs.get(runKey);
    if (!run) return;
    const { outcome } = result;
    run.span.setAttributes({
      'loopchart.outcome': outcome.type,
      'loopchart.turns': result.turns,
      'gen_ai.usage.input_tokens': result.usage.inputTokens,
      'gen_ai.usage.output_tokens': result.usage.outputTokens,
      ...(outcome.type === 'Sealed' && { 'loopchart.sealed.reason': outcome.reason }),
    });
    if (outcome.type === 'Failed') {
      run.span.recordException({ name: outcome.error.type, message: outcome.error.message });
      run.span.setAttribute('error.type', outcome.error.type);
      run.span.setStatus({ code: STATUS_ERROR, message: outcome.error.message });
    }
    this.closeRun(runKey, { interrupted: outcome.type === 'Cancelled' || outcome.type === 'Sealed' });
  }

  /** A prune pass: instantaneous, so a span that starts and ends at once. */
  pruned(runKey: string, facts: { pruned: number; tokensSaved: number; before: number; after: number }): void {
    const run = this.runs.get(runKey);
    if (!run) return;
    this
      .start(
        'prune',
        {
          kind: SPAN_KIND_INTERNAL,
          attributes: {
            ...run.conversation,
            'loopchart.prune.messages': facts.pruned,
            'loopchart.prune.tokens_saved': facts.tokensSaved,
            'loopchart.tokens.before': facts.before,
            'loopchart.tokens.after': facts.after,
          },
        },
        run.context,
      )
      .end();
  }

  /** Calls that now wait for a human: one `await_approval` span each, open until the decision. */
  approvalRequested(runKey: string, calls: readonly ToolCall[]): void {
    const run = this.runs.get(runKey);
    if (!run) return;
    for (const call of calls) {
      if (run.waits.has(call.id)) continue;
      const span = this.start(
        `await_approval ${call.name}`,
        {
          kind: SPAN_KIND_INTERNAL,
          attributes: { ...run.conversation, 'gen_ai.tool.name': call.name, 'gen_ai.tool.call.id': call.id },
        },
        run.context,
      );
      run.waits.set(call.id, { span, started: performance.now() });
    }
  }

  approvalDecided(runKey: string, decisions: ReadonlyArray<{ callId: string; approved: boolean }>): void {
    const run = this.runs.get(runKey);
    if (!run) return;
    for (const { callId, approved } of decisions) {
      const wait = run.waits.get(callId);
      if (!wait) continue;
      run.waits.delete(callId);
      wait.span.setAttributes({ 'loopchart.approval.approved': approved, 'loopchart.approval.wait_ms': Math.round(performance.now() - wait.started) });
      wait.span.end();
    }
  }

  /**
   * The run's IO stopped. At a run's end the chart has already closed the run (the run span ends
   * in the same step); if it is still open, the actor was stopped mid-run (a session closed
   * while the run waits for approval, a host shutting down): the span ends as suspended, so it
   * is exported, and the run resumed elsewhere continues its trace. Checked a microtask later,
   * after the step that stopped the IO has run its remaining actions.
   */
  ioStopped(lastKey: string | undefined): void {
    if (lastKey === undefined) return;
    queueMicrotask(() => {
      const found = this.runEntryFor(lastKey);
      if (!found) return;
      found[1].span.setAttribute('loopchart.run.suspended', true);
      this.closeRun(found[0], { interrupted: true });
    });
  }

  /** The run moved to the next model of its list: an event on the run's span, which names the model in use from now on. */
  fellBack(runKey: string, facts: { turn: number; to: string; error: unknown }): void {
    const run = this.runs.get(runKey);
    if (!run) return;
    const to = modelIdentity(facts.to);
    run.span.addEvent('loopchart.model.fallback', {
      'loopchart.turn': facts.turn,
      'gen_ai.request.model': to.model,
      'gen_ai.provider.name': to.provider,
      'error.type': errorType(facts.error),
      'loopchart.error.message': errorMessage(facts.error),
    });
    run.span.setAttribute('loopchart.model.fallback', facts.to);
  }

  /** A model call failed and is tried again: an event on its `chat` span. */
  retried(key: string, attempt: { retry: number; delayMs: number; error: unknown }): void {
    this.calls.get(key)?.addEvent('gen_ai.retry', {
      'loopchart.retry': attempt.retry,
      'loopchart.retry.delay_ms': attempt.delayMs,
      'error.type': errorType(attempt.error),
      'loopchart.error.message': errorMessage(attempt.error),
    });
  }

  /** The executor wrapper: one span per effect, a child of its run's span. */
  readonly wrap = (inner: Executor): Executor => {
    const traced = async <K extends SideEffectKind>(effect: SideEffect<K>, perform: () => Promise<SideEffectOutputs[K]>) => {
      const run = this.runFor(effect.key);
      const parent = run?.context ?? this.api.context.active();
      const span = this.start(...this.effectSpan(effect, run), parent);
      run?.effects.add(span);
      if (effect.kind === 'model') this.calls.set(effect.key, span);
      const within = this.api.trace.setSpan(parent, span.raw);
      try {
        const output = await effectContext.run(within, () => this.api.context.with(within, () => inner(effect, perform)));
        // An aborted call may still resolve (a tool call's result says it was interrupted): it
        // was cancelled, not failed.
        if (effect.signal.aborted) span.setAttribute('loopchart.cancelled', true);
        else this.recordOutput(span, effect, output);
        return output;
      } catch (error) {
        if (effect.signal.aborted) span.setAttribute('loopchart.cancelled', true);
        else failSpan(span, error);
        throw error;
      } finally {
        if (this.calls.get(effect.key) === span) this.calls.delete(effect.key);
        run?.effects.delete(span);
        span.end();
      }
    };
    return traced as Executor;
  };

  private effectSpan(effect: SideEffect, run: OpenRun | undefined): [string, { kind: number; attributes: Attributes }] {
    const conversation = run ? run.conversation : {};
    switch (effect.kind) {
      case 'model': {
        const { request, turn, model: name } = effect.input as SideEffect<'model'>['input'];
        const model = name === undefined ? this.model : modelIdentity(name);
        return [
          `chat ${model.model}`,
          {
            kind: SPAN_KIND_CLIENT,
            attributes: {
              'gen_ai.operation.name': 'chat',
              'gen_ai.provider.name': model.provider,
              'gen_ai.request.model': model.model,
              'loopchart.turn': turn,
              ...conversation,
              ...(this.recordContent && { 'gen_ai.input.messages': JSON.stringify(request.messages) }),
            },
          },
        ];
      }
      case 'tool': {
        const { call } = effect.input as SideEffect<'tool'>['input'];
        return [
          `execute_tool ${call.name}`,
          {
            kind: SPAN_KIND_INTERNAL,
            attributes: {
              'gen_ai.operation.name': 'execute_tool',
              'gen_ai.tool.name': call.name,
              'gen_ai.tool.call.id': call.id,
              'gen_ai.tool.type': 'function',
              ...conversation,
              ...(this.recordContent && { 'gen_ai.tool.call.arguments': JSON.stringify(call.args) ?? 'undefined' }),
            },
          },
        ];
      }
      case 'compaction': {
        const { reason, tokensBefore } = effect.input as SideEffect<'compaction'>['input'];
        return [
          'compaction',
          { kind: SPAN_KIND_INTERNAL, attributes: { 'loopchart.compaction.reason': reason, 'loopchart.tokens.before': tokensBefore, ...conversation } },
        ];
      }
      case 'approval': {
        const { call } = effect.input as SideEffect<'approval'>['input'];
        return [
          `check_approval ${call.name}`,
          { kind: SPAN_KIND_INTERNAL, attributes: { 'gen_ai.tool.name': call.name, 'gen_ai.tool.call.id': call.id, ...conversation } },
        ];
      }
      case 'operation': {
        const { operation, hook, turn } = effect.input as SideEffect<'operation'>['input'];
        return [
          `operation ${operation}`,
          { kind: SPAN_KIND_INTERNAL, attributes: { 'loopchart.operation.name': operation, 'loopchart.operation.hook': hook, 'loopchart.turn': turn, ...conversation } },
        ];
      }
      case 'guardrail': {
        const { guardrail, stage, turn } = effect.input as SideEffect<'guardrail'>['input'];
        return [`guardrail ${guardrail}`, { kind: SPAN_KIND_INTERNAL, attributes: { 'loopchart.guardrail.name': guardrail, 'loopchart.guardrail.stage': stage, 'loopchart.turn': turn, ...conversation } }];
      }
      case 'toolset': {
        const { sources } = effect.input as SideEffect<'toolset'>['input'];
        return ['list_tools', { kind: SPAN_KIND_INTERNAL, attributes: { 'loopchart.tool_sources': sources, ...conversation } }];
      }
    }
    // A kind this build does not know (a newer host's): traced plainly, never refused.
    return [String(effect.kind), { kind: SPAN_KIND_INTERNAL, attributes: conversation }];
  }

  private recordOutput(span: GuardedSpan, effect: SideEffect, output: unknown): void {
    switch (effect.kind) {
      case 'model': {
        const reply = output as SideEffectOutputs['model'];
        span.setAttribute('gen_ai.response.finish_reasons', [reply.finishReason]);
        if (reply.usage) {
          span.setAttributes({ 'gen_ai.usage.input_tokens': reply.usage.inputTokens, 'gen_ai.usage.output_tokens': reply.usage.outputTokens });
        }
        if (this.recordContent) span.setAttribute('gen_ai.output.messages', JSON.stringify([reply.message]));
        return;
      }
      case 'tool': {
        const result = output as SideEffectOutputs['tool'];
        if (this.recordContent) span.setAttribute('gen_ai.tool.call.result', result.content);
        if (result.isError) {
          // The runner turned the failure (a throw, a timeout, bad arguments) into the result the
          // model reads; that text is the exception OpenTelemetry's convention records. It is the
          // tool's result, content like any other (an error quotes what it was given: an email, an
          // account number), so without recordContent the span only says the call failed.
          const message = this.recordContent ? result.content.slice(0, 500) : undefined;
          span.recordException({ name: 'tool_error', message: message ?? 'the tool call failed (its error text is content: recorded with recordContent)' });
          span.setAttribute('error.type', 'tool_error');
          span.setStatus({ code: STATUS_ERROR, ...(message !== undefined && { message: message.slice(0, 200) }) });
        }
        return;
      }
      case 'compaction': {
        const result = output as SideEffectOutputs['compaction'];
        span.setAttributes({ 'loopchart.tokens.after': result.after, 'loopchart.compaction.rewritten': result.messages !== undefined });
        return;
      }
      case 'approval':
        span.setAttribute('loopchart.approval.needed', output as boolean);
        return;
    }
  }

  /** The open run an effect belongs to: the longest run key its key starts with. */
  private runFor(key: string): OpenRun | undefined {
    return this.runEntryFor(key)?.[1];
  }

  /**
   * Run keys end in `:run-<n>:` (see `runKeyOf`), so the candidates are the key's prefixes that
   * end there: one lookup each, however many runs are open.
   */
  private runEntryFor(key: string): [string, OpenRun] | undefined {
    let found: [string, OpenRun] | undefined;
    for (const match of key.matchAll(RUN_KEY_END)) {
      const runKey = key.slice(0, match.index + match[0].length);
      const run = this.runs.get(runKey);
      if (run) found = [runKey, run];
    }
    return found;
  }

  private closeRun(runKey: string, how: { interrupted: boolean }): void {
    const run = this.runs.get(runKey);
    if (!run) return;
    this.runs.delete(runKey);
    for (const wait of run.waits.values()) {
      wait.span.setAttributes({ 'loopchart.approval.wait_ms': Math.round(performance.now() - wait.started), 'loopchart.cancelled': how.interrupted });
      wait.span.end();
    }
    // A side effect still in flight was abandoned (cancel, seal, deadline, the actor stopped) and
    // may never return: its span ends with its run, so the trace is whole without it.
    for (const effect of run.effects) {
      effect.setAttribute('loopchart.cancelled', true);
      effect.end();
    }
    run.span.end();
  }
}

function failSpan(span: GuardedSpan, error: unknown): void {
  span.recordException(exceptionOf(error));
  span.setAttribute('error.type', errorType(error));
  span.setStatus({ code: STATUS_ERROR, message: errorMessage(error) });
}

function errorType(error: unknown): string {
  if (error instanceof Error) {
    const code = (error as Error & { code?: unknown }).code;
    return typeof code === 'string' ? code : error.name;
  }
  return typeof error;
}

function errorMessage(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).slice(0, 500);
}

/** What an exception event records of a thrown value: its code (or name) as the type, its message and stack. */
function exceptionOf(error: unknown): { name: string; message: string; code?: string | undefined; stack?: string | undefined } {
  if (!(error instanceof Error)) return { name: errorType(error), message: errorMessage(error) };
  const code = (error as Error & { code?: unknown }).code;
  return { name: error.name, message: error.message, ...(typeof code === 'string' && { code }), ...(error.stack !== undefined && { stack: error.stack }) };
}

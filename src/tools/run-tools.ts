import type { PendingToolCall, ToolCall, ToolMessage } from '../schemas.js';
import { ToolSet, type Tool, type ToolContext } from './define-tool.js';
import { parseToolArguments, type ArgumentIssue, type ParsedArguments } from './own-arguments.js';
import { MAX_TIMER_MS } from '../timer-bound.js';
import { withSignal } from '../object-slot.js';

export interface RunToolCallsOptions {
  /** How many tools may run at once. Default 4. */
  concurrency?: number | undefined;
  /** Cancels the batch: in-flight tools are aborted, unfinished calls get an interrupted result. */
  signal?: AbortSignal | undefined;
  /**
   * Timeout for tools that set no `timeoutMs` of their own, in ms. Default DEFAULT_TOOL_TIMEOUT_MS
   * (5 minutes); `Infinity` turns it off.
   */
  defaultTimeoutMs?: number | undefined;
  /** The session the calls belong to, and its memory scope: what each tool's context says (`ToolContext`). */
  session?: { sessionId: string; scope?: string | undefined } | undefined;
  /** Computed for every call to run before any of them starts, so a throwing key function runs nothing. */
  idempotencyKey(call: ToolCall): string;
  /** A call was taken up (validation included). Every call that starts also finishes. */
  onStart?(call: ToolCall): void;
  /**
   * A result now exists for this call: fires at once, not at the end of the batch, so a journal can
   * record it before a crash. Also fires for calls interrupted before they started; never for
   * `preAnswered` calls, whose results existed before the batch.
   */
  onFinish?(call: ToolCall, result: ToolMessage): void;
}

export const DEFAULT_TOOL_CONCURRENCY = 4;
/**
 * Every tool call has a timeout unless one is switched off explicitly (`timeoutMs: Infinity` on the
 * tool, or `defaultTimeoutMs: Infinity` for the batch): a hung tool would otherwise hold the run,
 * and its session, forever. Five minutes leaves room for builds and test runs.
 *
 * @example
 * ```ts
 * const execute = async () => 'done';
 * defineTool({ name: 'build', description: 'runs the build', input: z.object({}), timeoutMs: 2 * DEFAULT_TOOL_TIMEOUT_MS, execute });
 * defineTool({ name: 'watch', description: 'waits for a human', input: z.object({}), timeoutMs: Infinity, execute });
 * ```
 */
export const DEFAULT_TOOL_TIMEOUT_MS = 5 * 60_000;
/** The longest end reason an interrupted answer quotes (a host's seal reason is free text). */
const MAX_REASON_CHARS = 200;

/**
 * Why a run stopped before a call's end, as its interrupted answer words it: cancelled (by the
 * user or the host), stopped with the seal's reason (a budget's says so: "budget: ..."), failed,
 * or its batch cut by the time budget before the run's final call.
 */
export type RunStop = { type: 'cancelled' } | { type: 'stopped'; reason: string } | { type: 'failed'; reason: string } | { type: 'timeUp'; reason: string };

const quotedReason = (reason: string) => (reason.length > MAX_REASON_CHARS ? `${reason.slice(0, MAX_REASON_CHARS)}…` : reason);

function stopText(stop: RunStop): string {
  if (stop.type === 'cancelled') return 'the run was cancelled';
  if (stop.type === 'stopped') return `the run was stopped (${quotedReason(stop.reason)})`;
  if (stop.type === 'failed') return `the run failed (${quotedReason(stop.reason)})`;
  return `the time budget ran out (${quotedReason(stop.reason)})`;
}

/**
 * The answer a call without a result gets when the run stops: what stopped it and whether the
 * call had started (it may have partly run) or never did (queued behind `toolConcurrency`,
 * waiting for a decision, or its batch cut before it started). The model reads it in the next
 * run, so it says only what happened; the text is stable (the same stop and start give the same
 * words). A cancelled call that ran reads `INTERRUPTED_CONTENT`.
 *
 * @example
 * ```ts
 * console.log(interruptedContent({ type: 'stopped', reason: 'budget: 2 tool calls made, limit 1' }, false));
 * // interrupted: the run was stopped (budget: 2 tool calls made, limit 1) before this tool call started; it did not run
 * ```
 */
export function interruptedContent(stop: RunStop, started: boolean): string {
  return `interrupted: ${stopText(stop)} before this tool call ${started ? 'finished' : 'started; it did not run'}`;
}

/**
 * What a call that was running gets when the run is cancelled: the tool was started and may have
 * partly run (`interruptedContent`'s words for a cancel, kept as a constant for matching).
 */
export const INTERRUPTED_CONTENT = interruptedContent({ type: 'cancelled' }, true);

const INTERRUPTED_PATTERN = /^interrupted: the (run was cancelled|run was stopped \(.*\)|run failed \(.*\)|time budget ran out \(.*\)) before this tool call (finished|started; it did not run)$/s;

/**
 * Whether a tool result is an interrupted answer (any wording `interruptedContent` gives), not a
 * result of the tool's own.
 *
 * @example
 * ```ts
 * console.log(isInterruptedResult(interruptedResult({ id: 'c1', name: 'search', args: {} }))); // true
 * ```
 */
export const isInterruptedResult = (result: ToolMessage): boolean => result.isError === true && INTERRUPTED_PATTERN.test(result.content);

/**
 * The result a call gets when the run stops before it finished (a cancel, a seal, a batch never
 * reached): every call keeps its answer, so the history stays coherent. Without `stop`, a call
 * cancelled while it ran.
 *
 * @example
 * ```ts
 * console.log(interruptedResult({ id: 'c1', name: 'search', args: {} }).content); // interrupted: the run was cancelled before this tool call finished
 * console.log(interruptedResult({ id: 'c2', name: 'pay', args: {} }, { type: 'cancelled' }, false).content); // interrupted: the run was cancelled before this tool call started; it did not run
 * ```
 */
export const interruptedResult = (call: ToolCall, stop: RunStop = { type: 'cancelled' }, started = true): ToolMessage =>
  errorResult(call, interruptedContent(stop, started));

/** What a call the cancel reached before its `execute` began reads: it did not run. */
const notRun = (call: ToolCall): ToolMessage => interruptedResult(call, { type: 'cancelled' }, false);

/** What one call is run with (see `runToolCall`): the batch's options, its idempotency key given. */
export type RunToolCallOptions = Pick<RunToolCallsOptions, 'signal' | 'defaultTimeoutMs' | 'session'> & {
  /** The call's idempotency key (see `ToolContext.idempotencyKey`). */
  idempotencyKey: string;
};

/**
 * Runs one tool call to its result, as `runToolCalls` runs each of a batch: validated, with its
 * timeout, interrupted when `signal` aborts. It never rejects for the tool's sake. What an agent's
 * IO runs for each call, with its own scheduling of a batch.
 *
 * @example
 * ```ts
 * declare const tools: Parameters<typeof runToolCall>[1]; // with an 'echo' tool that returns its text
 * const result = await runToolCall({ id: 'c1', name: 'echo', args: { text: 'hi' } }, tools, { idempotencyKey: 'k1' });
 * console.log(result.content); // hi
 * ```
 */
export async function runToolCall(call: ToolCall, tools: ToolSet, options: RunToolCallOptions): Promise<ToolMessage> {
  const defaultTimeoutMs = checkedTimeout(options.defaultTimeoutMs);
  if (options.signal?.aborted) return notRun(call);
  return runOne(call, tools, options.idempotencyKey, options.signal, null, defaultTimeoutMs, options.session);
}

/** The timeout of tools that set none; a bad one is the caller's error. */
function checkedTimeout(value: number | undefined): number {
  const ms = value ?? DEFAULT_TOOL_TIMEOUT_MS;
  if (typeof ms !== 'number' || Number.isNaN(ms) || ms <= 0) {
    throw new RangeError(`defaultTimeoutMs must be a positive number of ms (or Infinity for none), got ${String(ms)}`);
  }
  return ms;
}

/**
 * Runs a batch of tool calls and returns one result per call, in call order. It never rejects for a
 * tool's sake (bad arguments, a throw, a timeout, cancellation all become `isError` results) so the
 * history always pairs every call with a result; the caller decides what the outcome is. It rejects
 * only when one of the caller's own hooks threw, after every call has its result.
 */
export async function runToolCalls(
  calls: readonly PendingToolCall[],
  tools: ToolSet | Iterable<Tool>,
  options: RunToolCallsOptions,
): Promise<ToolMessage[]> {
  const toolSet = tools instanceof ToolSet ? tools : new ToolSet(tools);
  const concurrency = options.concurrency ?? DEFAULT_TOOL_CONCURRENCY;
  if (!Number.isInteger(concurrency) || concurrency < 1) {
    throw new RangeError(`concurrency must be a positive integer, got ${concurrency}`);
  }
  const defaultTimeoutMs = checkedTimeout(options.defaultTimeoutMs);
  const { signal } = options;
  const results: Array<ToolMessage | undefined> = calls.map((pending) => pending.preAnswered);
  const toRun = calls.flatMap((pending, index) =>
    pending.preAnswered ? [] : [{ index, call: pending.call, key: options.idempotencyKey(pending.call) }],
  );

  let hookError: { error: unknown } | undefined;
  const hook = (fn: () => void): void => {
    try {
      fn();
    } catch (error) {
      hookError ??= { error };
    }
  };
  const finish = (index: number, call: ToolCall, result: ToolMessage): void => {
    results[index] = result;
    hook(() => options.onFinish?.(call, result));
  };

  // One abort listener for the whole batch (a listener per call would trip Node's leak warning
  // past 10 concurrent calls); it interrupts whatever is in flight.
  const inFlight = new Set<CallInFlight>();
  const onAbort = (): void => {
    for (const call of inFlight) call.interrupt(signal?.reason);
  };
  signal?.addEventListener('abort', onAbort, { once: true });

  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < toRun.length && !signal?.aborted) {
      const { index, call, key } = toRun[next++]!;
      hook(() => options.onStart?.(call));
      finish(index, call, await runOne(call, toolSet, key, signal, inFlight, defaultTimeoutMs, options.session));
    }
  };
  try {
    await Promise.all(Array.from({ length: Math.min(concurrency, toRun.length) }, worker));
  } finally {
    signal?.removeEventListener('abort', onAbort);
  }

  // Calls never reached because the batch was cancelled: they did not run.
  for (const { index, call } of toRun) {
    if (!results[index]) finish(index, call, notRun(call));
  }
  if (hookError) throw hookError.error;
  return results as ToolMessage[];
}

/**
 * One call running: the first outcome (its value, a throw, its timeout, an interrupt) settles it;
 * a tool that ignores its signal keeps running but can no longer answer. A class, not closures
 * per call: under `keepNames` (tsup, tsx) each named closure costs a call. It listens for the
 * abort of a call run alone itself (`handleEvent`); a batch's one listener interrupts its calls.
 */
class CallInFlight {
  readonly controller = new AbortController();
  private settled = false;
  private timer: ReturnType<typeof setTimeout> | undefined;

  constructor(
    private readonly call: ToolCall,
    private readonly outer: AbortSignal | undefined,
    private readonly inFlight: Set<CallInFlight> | null,
    private readonly resolve: (result: ToolMessage) => void,
  ) {
    if (inFlight) inFlight.add(this);
    else outer?.addEventListener('abort', this, { once: true });
  }

  /** Times the call out after `ms` (none past setTimeout's longest delay). */
  arm(ms: number, toolName: string): void {
    if (ms > MAX_TIMER_MS) return;
    this.timer = setTimeout(() => {
      const message = `tool "${toolName}" timed out after ${ms} ms`;
      this.settle(errorResult(this.call, message));
      this.controller.abort(new DOMException(message, 'TimeoutError'));
    }, ms);
  }

  settle(result: ToolMessage): void {
    if (this.settled) return;
    this.settled = true;
    clearTimeout(this.timer);
    if (this.inFlight) this.inFlight.delete(this);
    else this.outer?.removeEventListener('abort', this);
    this.resolve(result);
  }

  /**
   * The abort: the tool's signal fires at once, and the call is answered interrupted unless its
   * value came first. The answer is settled a microtask later, queued before the signal fires: a
   * value the tool's promise had when the abort came is ahead of it in the queue and wins (its
   * result exists), one the tool gives in answer to the signal comes after it and is dropped.
   */
  interrupt(reason: unknown): void {
    queueMicrotask(() => this.settle(errorResult(this.call, INTERRUPTED_CONTENT)));
    this.controller.abort(reason);
  }

  /** The abort of a call run alone (see the constructor). */
  handleEvent(): void {
    this.interrupt(this.outer?.reason);
  }
}

async function runOne(
  call: ToolCall,
  tools: ToolSet,
  idempotencyKey: string,
  outer: AbortSignal | undefined,
  inFlight: Set<CallInFlight> | null,
  defaultTimeoutMs: number,
  session: RunToolCallsOptions['session'],
): Promise<ToolMessage> {
  const tool = tools.get(call.name);
  if (!tool) {
    return errorResult(call, `unknown tool "${call.name}"; available tools: ${tools.names.join(', ') || '(none)'}`);
  }
  let parsed: ParsedArguments;
  try {
    parsed = parseToolArguments(tool, call.args);
  } catch (error) {
    // A refinement or transform in the tool's own schema threw: that is the tool failing.
    return errorResult(call, `tool "${tool.name}" failed validating its arguments: ${errorText(error)}`);
  }
  if (!parsed.success) return errorResult(call, invalidArguments(tool.name, parsed.issues));
  // An onStart hook may have cancelled the batch: its execute never began.
  if (outer?.aborted) return notRun(call);

  return new Promise<ToolMessage>((resolve) => {
    const running = new CallInFlight(call, outer, inFlight, resolve);
    running.arm(tool.timeoutMs ?? defaultTimeoutMs, tool.name);
    let returned: unknown;
    try {
      returned = tool.execute(parsed.data, toolContext(running.controller, call.id, idempotencyKey, session));
    } catch (error) {
      return running.settle(errorResult(call, errorText(error)));
    }
    // Its value's reaction is attached to the tool's own promise (no wrapper in between), so it is
    // queued the moment that promise settles: ahead of an abort that comes later (see `interrupt`).
    Promise.resolve(returned).then(
      (value) => running.settle(valueResult(call, value)),
      (error: unknown) => running.settle(errorResult(call, errorText(error))),
    );
  });
}

/**
 * What a tool's `execute` is given. The signal is made on first read: Node builds a controller's
 * AbortSignal (an EventTarget, ~3.6 µs) lazily, and most tools never look at it. The getter is
 * own and enumerable, so destructuring or spreading the context reads the signal as before.
 */
function toolContext(controller: AbortController, toolCallId: string, idempotencyKey: string, session: RunToolCallsOptions['session']): ToolContext {
  const context: { -readonly [K in keyof ToolContext]: ToolContext[K] } = withSignal({} as ToolContext, controller);
  context.toolCallId = toolCallId;
  context.idempotencyKey = idempotencyKey;
  if (session) context.sessionId = session.sessionId;
  if (session?.scope !== undefined) context.scope = session.scope;
  return context;
}

function valueResult(call: ToolCall, value: unknown): ToolMessage {
  let content: string;
  try {
    // `undefined` (a tool with nothing to say) has no JSON text.
    content = typeof value === 'string' ? value : (JSON.stringify(value) ?? '');
  } catch (error) {
    return errorResult(call, `tool "${call.name}" returned a value with no JSON form: ${errorText(error)}`);
  }
  return { role: 'tool', toolCallId: call.id, toolName: call.name, content };
}

function errorResult(call: ToolCall, content: string): ToolMessage {
  return { role: 'tool', toolCallId: call.id, toolName: call.name, content, isError: true };
}

/**
 * The text of anything a tool threw. It must itself never throw, or the call would never settle:
 * a thrown value may be null, a symbol, an Error whose `message` getter throws, or a Proxy whose
 * every trap (even the `instanceof` check) throws.
 */
function errorText(error: unknown): string {
  try {
    if (error instanceof Error) {
      const message: unknown = error.message;
      if (typeof message === 'string' && message !== '') return message;
      const name: unknown = error.name;
      return typeof name === 'string' && name !== '' ? name : 'the tool failed';
    }
    return String(error);
  } catch {
    return 'the tool failed with an unprintable error';
  }
}

/** One line per zod issue with its path, the form a model reliably corrects itself from. */
function invalidArguments(toolName: string, issues: readonly ArgumentIssue[]): string {
  const lines = issues.map((issue) => `- ${issuePath(issue.path)}: ${issue.message}`);
  return `invalid arguments for tool "${toolName}":\n${lines.join('\n')}`;
}

function issuePath(path: readonly PropertyKey[]): string {
  if (path.length === 0) return '(arguments)';
  return path
    .map((key, i) => (typeof key === 'number' ? `[${key}]` : i === 0 ? String(key) : `.${String(key)}`))
    .join('');
}

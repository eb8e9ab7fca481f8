import { z } from 'zod';
import { jsonValueProblem } from '../../json-value.js';
import { ToolMessageSchema, type PendingToolCall, type ToolMessage } from '../../schemas.js';
import { OperationError, OperationStateError, type Operation, type OperationContext, type OperationStep } from './operation.js';
import { OPERATION_HOOKS, type OperationHook, type OperationsState } from './operation-state.js';
import { InvalidConfigError } from '../../errors.js';
import { readAnswer, thrownMessage as messageOf } from '../../read-answer.js';

/**
 * The operations' rules as pure functions: the configuration check (names, list order), what
 * a hook's returned effects do to the operations' state, and the check of a stored state
 * against the operations' schemas. The chart and the caller-driven API both use them.
 */

/** A hook's effects once checked: plain JSON, what the executor journals. Null: it declined. */
export interface OperationOutput {
  state?: unknown;
  results?: ToolMessage[] | undefined;
  yield?: { reason: string; payload: unknown } | undefined;
}

/** The operations of one agent, checked, with each point's list in list order. */
export interface OperationPlan {
  readonly list: readonly Operation[];
  readonly byName: ReadonlyMap<string, Operation>;
  readonly at: Readonly<Record<OperationHook, readonly Operation[]>>;
}

const NAME = /^[A-Za-z][\w.-]{0,99}$/;

/**
 * Checks a list of operations and indexes it. Throws `InvalidConfigError` for a bad or repeated
 * name, a bad timeout, a state without a schema, and for the ordering rule of seed 003: an
 * operation that may yield before tools (approval-like: `beforeTools` and `resume`) must come
 * before every operation that runs tools (`runsTools`), or the request would run unapproved.
 */
export function planOperations(list: readonly Operation[]): OperationPlan {
  const byName = new Map<string, Operation>();
  let toolRunner: Operation | undefined;
  for (const op of list) {
    if (typeof op?.name !== 'string' || !NAME.test(op.name) || op.name === '__proto__') {
      throw new InvalidConfigError(`operation name ${JSON.stringify(op?.name)} must be 1-100 letters, digits, '_', '-' or '.', starting with a letter`);
    }
    if (byName.has(op.name)) throw new InvalidConfigError(`operation name '${op.name}' is used twice; names must be unique`);
    byName.set(op.name, op);
    if (op.timeoutMs !== undefined && !(op.timeoutMs > 0)) throw new InvalidConfigError(`operation '${op.name}': timeoutMs must be positive, got ${op.timeoutMs}`);
    if (op.state && typeof op.state.schema?.safeParse !== 'function') throw new InvalidConfigError(`operation '${op.name}': state needs a zod schema`);
    if (op.resume && typeof op.resume.schema?.safeParse !== 'function') throw new InvalidConfigError(`operation '${op.name}': resume needs a zod schema`);
    if (op.state) {
      const problem = sliceProblem(op, op.state.initial);
      if (problem) throw new InvalidConfigError(`operation '${op.name}': initial state ${problem}`);
    }
    if (op.beforeTools && op.resume && toolRunner) {
      throw new InvalidConfigError(
        `operation '${op.name}' may yield before tools run but comes after '${toolRunner.name}', which runs tools: ` +
          `list it first, or the calls it waits for would already have run (seed 003)`,
      );
    }
    if (op.runsTools) toolRunner ??= op;
  }
  const at = Object.fromEntries(OPERATION_HOOKS.map((hook) => [hook, list.filter((op) => typeof op[hook] === 'function')])) as Record<
    OperationHook,
    Operation[]
  >;
  return { list, byName, at };
}

/** An operation's slice as its schema reads it, or why it cannot be one (its schema refuses it, reading it threw, it is not plain JSON). */
function readSlice(op: Operation, value: unknown): { ok: true; value: unknown } | { ok: false; problem: string } {
  const parsed = readAnswer(op.state!.schema, value);
  if (!parsed.ok) return { ok: false, problem: `does not match its schema: ${parsed.problem}` };
  const problem = jsonValueProblem(parsed.value, 'state');
  return problem ? { ok: false, problem } : parsed;
}

/** Why a value cannot be an operation's slice, or null. */
const sliceProblem = (op: Operation, value: unknown): string | null => {
  const slice = readSlice(op, value);
  return slice.ok ? null : slice.problem;
};

/** An operation's slice: the stored one, else its initial value. */
export const sliceOf = (state: OperationsState, op: Operation): unknown =>
  Object.hasOwn(state.slices, op.name) ? state.slices[op.name] : op.state?.initial;

/**
 * Operation state that came from outside (a stored session, a persisted snapshot) checked
 * against this agent's operations: each slice against its schema, a yield against the
 * operation it names. Slices of operations the agent no longer has are kept as they are.
 * Throws `OperationStateError` naming the operation.
 */
export function checkStoredOperations(plan: OperationPlan, state: OperationsState): OperationsState {
  for (const op of plan.list) {
    if (!op.state || !Object.hasOwn(state.slices, op.name)) continue;
    const problem = sliceProblem(op, state.slices[op.name]);
    if (problem) throw new OperationStateError(op.name, `stored state ${problem}`);
  }
  if (state.waiting && !plan.byName.get(state.waiting.operation)?.resume) {
    throw new OperationStateError(state.waiting.operation, 'the stored run waits on it, but this agent has no such operation that can be resumed');
  }
  return state;
}

const StepShape = z.strictObject({
  state: z.unknown().optional(),
  results: z.array(ToolMessageSchema).optional(),
  yield: z.strictObject({ reason: z.string().min(1), payload: z.unknown().optional() }).optional(),
});

/**
 * A hook's return value checked against the operation's contract, or an `OperationError`
 * naming it: nothing or an object of effects; a slice its schema accepts (and only with a
 * schema); results only from a `runsTools` operation at `beforeTools`, each for a call of the
 * batch; a yield only from an operation that declares how it resumes.
 */
export function checkOutput(
  op: Operation,
  hook: OperationHook | 'resume',
  value: OperationStep | void | undefined,
  batch: readonly PendingToolCall[] = [],
): OperationOutput | null {
  if (value === undefined || value === null) return null;
  const fail = (problem: string) => new OperationError(op.name, hook, problem);
  // readAnswer: effects whose fields throw when read (a getter, a Proxy) are no effects either.
  const shape = readAnswer(StepShape, value);
  if (!shape.ok) throw fail(`returned something that is not effects: ${shape.problem}`);
  const step = shape.value;
  const output: OperationOutput = {};
  if ('state' in step && step.state !== undefined) {
    if (!op.state) throw fail('returned state, but declares no state schema');
    const slice = readSlice(op, step.state);
    if (!slice.ok) throw fail(`returned state that ${slice.problem}`);
    output.state = slice.value;
  }
  if (step.results) {
    if (!op.runsTools || hook !== 'beforeTools') throw fail('returned tool results, but only a runsTools operation may, at beforeTools');
    const ids = new Set(batch.map(({ call }) => call.id));
    const stray = step.results.find((result) => !ids.has(result.toolCallId));
    if (stray) throw fail(`returned a result for '${stray.toolCallId}', which is not a call of this batch`);
    output.results = step.results;
  }
  if (step.yield) {
    if (!op.resume) throw fail('yielded, but declares no resume schema');
    const payload = step.yield.payload ?? null;
    const problem = jsonValueProblem(payload, 'yield.payload');
    if (problem) throw fail(problem);
    output.yield = { reason: step.yield.reason, payload };
  }
  return Object.keys(output).length === 0 ? null : output;
}

/**
 * Operation `index` of the open point's list has returned `output`: its slice replaced, the
 * point moved past it, a yield recorded. The point closes when its last operation is done and
 * nobody waits.
 */
export function applyOperated(
  state: OperationsState,
  plan: OperationPlan,
  index: number,
  output: OperationOutput | null,
): OperationsState {
  const point = state.point!;
  const op = plan.at[point.hook][index]!;
  const slices = output && 'state' in output ? { ...state.slices, [op.name]: output.state } : state.slices;
  const waiting = output?.yield ? { operation: op.name, ...output.yield, key: point.key } : state.waiting;
  return settle({ ...state, slices, point: { ...point, next: index + 1 }, waiting }, plan);
}

/** A point whose operations are all done (and that nobody waits on) is closed and marked done. */
function settle(state: OperationsState, plan: OperationPlan): OperationsState {
  const { point } = state;
  if (!point || state.waiting || point.next < plan.at[point.hook].length) return state;
  return { ...state, point: null, done: point.key };
}

/** Opens a point (its operations run from the first), unless it has none. */
export function openPoint(state: OperationsState, plan: OperationPlan, hook: OperationHook, key: string, reply?: unknown): OperationsState {
  if (plan.at[hook].length === 0) return state;
  return { ...state, point: { key, hook, next: 0, ...(reply !== undefined && { reply: reply as never }) } };
}

/** The waiting operation has been resumed: its effects applied, the point goes on after it. */
export function applyResumed(state: OperationsState, plan: OperationPlan, output: OperationOutput | null): OperationsState {
  const waiting = state.waiting!;
  const op = plan.byName.get(waiting.operation)!;
  const slices = output && 'state' in output ? { ...state.slices, [op.name]: output.state } : state.slices;
  const again = output?.yield ? { operation: op.name, ...output.yield, key: waiting.key } : null;
  return settle({ ...state, slices, waiting: again }, plan);
}

/** A run that stops (cancel, seal, failure, a new run) leaves no point open and nobody waiting. */
export const closeOperations = (state: OperationsState): OperationsState =>
  state.point === null && state.waiting === null ? state : { ...state, point: null, waiting: null };

/**
 * What a resume event does, decided once: refused (wrong operation, payload its schema
 * refuses: the event changes nothing), failed (`apply` threw or broke the contract: the run
 * fails), or the effects to apply.
 */
export type ResumeVerdict =
  | { type: 'refused'; reason: string }
  | { type: 'failed'; error: OperationError }
  | { type: 'accepted'; output: OperationOutput | null };

export function resumeVerdict(
  state: OperationsState,
  plan: OperationPlan,
  event: { operation: string; payload?: unknown },
  ctx: Omit<OperationContext, 'state'>,
): ResumeVerdict {
  const waiting = state.waiting;
  if (!waiting) return { type: 'refused', reason: 'no operation is waiting' };
  if (event.operation !== waiting.operation) {
    return { type: 'refused', reason: `operation '${String(event.operation).slice(0, 100)}' is not waiting ('${waiting.operation}' is)` };
  }
  const op = plan.byName.get(waiting.operation)!;
  const parsed = readAnswer(op.resume!.schema, event.payload);
  if (!parsed.ok) return { type: 'refused', reason: `payload for '${op.name}': ${parsed.problem}` };
  if (!op.resume!.apply) return { type: 'accepted', output: null };
  try {
    const value = op.resume!.apply(parsed.value, { ...ctx, state: sliceOf(state, op) });
    if (value && typeof (value as { then?: unknown }).then === 'function') {
      return { type: 'failed', error: new OperationError(op.name, 'resume', 'apply returned a promise; it must be synchronous') };
    }
    return { type: 'accepted', output: checkOutput(op, 'resume', value) };
  } catch (error) {
    if (OperationError.isInstance(error)) return { type: 'failed', error };
    return { type: 'failed', error: new OperationError(op.name, 'resume', `apply threw: ${messageOf(error)}`, { cause: error }) };
  }
}

/** A thrown value's message, whatever was thrown (one helper for every reader of user answers). */
export { messageOf };

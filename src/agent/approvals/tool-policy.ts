import { z } from 'zod';
import { LoopchartError } from '../../errors.js';
import type { Message, ToolCall, ToolMessage } from '../../schemas.js';
import type { Approvals } from '../core/call-decisions.js';
import { digestOf } from './approval-binding.js';
import { messageOf } from '../operations/operation-rules.js';
import { InvalidConfigError } from '../../errors.js';
import { timedCheck } from '../core/timed-check.js';
import { readAnswer } from '../../read-answer.js';

/**
 * Tool policy: rules as code that see a tool call, its arguments and the whole run, and decide
 * before the approval rules and before anything runs. A denial is the call's result (the model
 * reads the reason); `needs-approval` sends the call down the approval path as a tool's own
 * `needsApproval` would. The rules here are pure; the driver runs each call's decision through
 * the executor seam (kind `policy`) and records it in its context, so a restore never asks again.
 */

/**
 * What a policy decides for one call. Policies of a list combine: the first `deny` wins, else
 * any `needs-approval`, else `allow`.
 *
 * @example
 * ```ts
 * const noDeletes: ToolPolicy = ({ call }): ToolPolicyVerdict =>
 *   call.name === 'delete_file' ? { type: 'deny', reason: 'deleting files is not allowed here' } : { type: 'allow' };
 * ```
 */
export type ToolPolicyVerdict = z.infer<typeof ToolPolicyVerdictSchema>;

/** A verdict as a policy returns it, and as an executor replays it from a journal. */
export const ToolPolicyVerdictSchema = z.discriminatedUnion('type', [
  z.strictObject({ type: z.literal('allow') }),
  z.strictObject({ type: z.literal('deny'), reason: z.string().min(1).max(10_000) }),
  z.strictObject({ type: z.literal('needs-approval') }),
]);

/** An earlier tool call of the run, with its result once it has one. */
export interface EarlierCall {
  readonly call: ToolCall;
  readonly result?: ToolMessage | undefined;
}

/**
 * What a policy sees for one call: the call (its arguments as the model sent them), the whole
 * conversation, this run's earlier calls with their results (earlier batches, then the calls
 * before this one in its own batch, which have no result yet), and a signal aborted when the
 * run stops needing the answer or the policy's time is up.
 *
 * @example
 * ```ts
 * const onlyAfterRead: ToolPolicy = (request: ToolPolicyRequest) =>
 *   request.call.name !== 'write_file' || request.earlierCalls.some(({ call, result }) => call.name === 'read_file' && result && !result.isError)
 *     ? { type: 'allow' }
 *     : { type: 'deny', reason: 'read the file before writing it' };
 * ```
 */
export interface ToolPolicyRequest {
  readonly call: ToolCall;
  readonly sessionId: string;
  readonly turn: number;
  /** The whole conversation: committed history, then this run's messages (the batch's reply last). */
  readonly messages: readonly Message[];
  readonly earlierCalls: readonly EarlierCall[];
  readonly signal: AbortSignal;
}

/**
 * A tool policy: decides one call, synchronously or not (within `toolPolicyTimeoutMs`). A policy
 * that throws, returns anything but a verdict, or takes too long fails the run with
 * `ToolPolicyError`, and no call of the batch runs: a broken safety rule stops the run rather
 * than letting the model try its way around it.
 *
 * @example
 * ```ts
 * import { createAgentMachine, type ToolPolicy } from 'loopchart';
 *
 * const askForWrites: ToolPolicy = ({ call }) => (call.name === 'write_file' ? { type: 'needs-approval' } : { type: 'allow' });
 * const agent = createAgentMachine({ model, tools, toolPolicy: askForWrites });
 * ```
 */
export type ToolPolicy = (request: ToolPolicyRequest) => ToolPolicyVerdict | Promise<ToolPolicyVerdict>;

/**
 * How long a tool policy may take for one call unless `toolPolicyTimeoutMs` says otherwise.
 *
 * @example
 * ```ts
 * const agent = createAgentMachine({ model, tools, toolPolicy: () => ({ type: 'allow' }), toolPolicyTimeoutMs: DEFAULT_TOOL_POLICY_TIMEOUT_MS / 2 });
 * ```
 */
export const DEFAULT_TOOL_POLICY_TIMEOUT_MS = 10_000;

/**
 * A tool policy threw, timed out or returned something that is not a verdict; `index` is its
 * place in the `toolPolicy` list. The run fails with `ToolPolicyError` and no call of the batch runs.
 *
 * @example
 * ```ts
 * const logged: Executor = async (effect, perform) =>
 *   perform().catch((error: unknown) => {
 *     if (ToolPolicyError.isInstance(error)) console.error(`policy ${error.policy} failed on ${effect.key}`);
 *     throw error;
 *   });
 * ```
 */
export class ToolPolicyError extends LoopchartError {
  /** The policy's name (its function's name), or `#index` in the list. */
  readonly policy: string;
  constructor(policy: string, problem: string, options?: { cause?: unknown }) {
    super('ToolPolicyFailed', `tool policy ${policy}: ${problem}`, options);
    this.policy = policy;
  }
}

/** The agent's tool policies, checked once at machine creation. */
export interface ToolPolicyPlan {
  readonly list: readonly ToolPolicy[];
  readonly timeoutMs: number;
}

const isFunction = (value: unknown): boolean => typeof value === 'function';
const PolicyConfigSchema = z.object({
  toolPolicy: z.custom((value) => isFunction(value) || (Array.isArray(value) && value.length > 0 && value.every(isFunction)), {
    error: 'toolPolicy must be a function or a non-empty list of functions',
  }),
  toolPolicyTimeoutMs: z.number().positive({ error: 'toolPolicyTimeoutMs must be a positive number of ms' }).optional(),
});

/** The plan for an agent's `toolPolicy` (null without one); garbage is an `InvalidConfigError`. */
export function planToolPolicies(config: { toolPolicy?: unknown; toolPolicyTimeoutMs?: unknown }): ToolPolicyPlan | null {
  if (config.toolPolicy === undefined) {
    if (config.toolPolicyTimeoutMs !== undefined) throw new InvalidConfigError('toolPolicyTimeoutMs is set, but there is no toolPolicy');
    return null;
  }
  const parsed = PolicyConfigSchema.safeParse(config);
  if (!parsed.success) throw new InvalidConfigError(parsed.error.issues.map((issue) => issue.message).join('; '));
  const list = (Array.isArray(config.toolPolicy) ? [...config.toolPolicy] : [config.toolPolicy]) as ToolPolicy[];
  return { list, timeoutMs: parsed.data.toolPolicyTimeoutMs ?? DEFAULT_TOOL_POLICY_TIMEOUT_MS };
}

/** The calls of `run` (this run's messages) before `callId`, each with its result if it has one. */
export function earlierCallsOf(run: readonly Message[], callId: string): EarlierCall[] {
  const results = new Map<string, ToolMessage>();
  for (const message of run) if (message.role === 'tool') results.set(message.toolCallId, message);
  const calls: EarlierCall[] = [];
  for (const message of run) {
    if (message.role !== 'assistant') continue;
    for (const call of message.toolCalls ?? []) {
      if (call.id === callId) return calls;
      const result = results.get(call.id);
      calls.push(result ? { call, result } : { call });
    }
  }
  return calls;
}

/** A policy as a trace and an error name it: its function's name, or `#n` (1-based) in the list. */
const labelOf = (policy: ToolPolicy, index: number): string => policy.name || `#${index + 1}`;
const nameOf = (policy: ToolPolicy, index: number): string => (policy.name ? `'${policy.name}'` : `#${index + 1}`);

/**
 * Which policy decided each verdict `decideCall` made in this process, for the trace. The
 * effect's output stays the verdict the side-effect contract names (a build that reads it
 * strictly, or a journal, never sees more); who decided rides beside it, by the verdict object,
 * and is gone once an executor copies it (then the trace has the verdict without its rule).
 */
const decidedBy = new WeakMap<object, string>();

/**
 * The policy whose verdict decided (the one that denied, else the first that asked for approval),
 * as its function's name or `#n` in the list; undefined for an allow (every policy allowed) and
 * for a verdict this process did not decide (replayed from a journal).
 *
 * @example
 * ```ts
 * const traced: Executor = async (effect, perform) => {
 *   const output = await perform();
 *   if (effect.kind === 'policy') console.log(effect.key, (output as ToolPolicyVerdict).type, policyDecidedBy(output));
 *   return output;
 * };
 * ```
 */
export function policyDecidedBy(verdict: unknown): string | undefined {
  return typeof verdict === 'object' && verdict !== null ? decidedBy.get(verdict) : undefined;
}

/** Runs every policy on one call, in list order, and combines their verdicts (a deny stops the list). */
export async function decideCall(plan: ToolPolicyPlan, request: Omit<ToolPolicyRequest, 'signal'>, run: AbortSignal): Promise<ToolPolicyVerdict> {
  let asked: string | undefined;
  for (const [index, policy] of plan.list.entries()) {
    const name = nameOf(policy, index);
    let value: unknown;
    try {
      value = await timedCheck(run, plan.timeoutMs, (signal) => policy({ ...request, signal }), () => new ToolPolicyError(name, `timed out after ${plan.timeoutMs} ms`));
    } catch (error) {
      if (ToolPolicyError.isInstance(error)) throw error;
      throw new ToolPolicyError(name, `threw: ${messageOf(error)}`, { cause: error });
    }
    // readAnswer: a verdict whose fields throw when read (a getter, a Proxy) is no verdict either.
    const verdict = readAnswer(ToolPolicyVerdictSchema, value);
    if (!verdict.ok) throw new ToolPolicyError(name, `returned no verdict for '${request.call.name}': ${verdict.problem}`);
    if (verdict.value.type === 'deny') return decided({ ...verdict.value }, labelOf(policy, index));
    if (verdict.value.type === 'needs-approval') asked ??= labelOf(policy, index);
  }
  return asked === undefined ? { type: 'allow' } : decided({ type: 'needs-approval' }, asked);
}

const decided = (verdict: ToolPolicyVerdict, by: string): ToolPolicyVerdict => {
  decidedBy.set(verdict, by);
  return verdict;
};

/** A verdict an executor handed back (perhaps from a journal written elsewhere), checked. */
export function checkedVerdict(key: string, value: unknown): ToolPolicyVerdict {
  const parsed = readAnswer(ToolPolicyVerdictSchema, value);
  if (!parsed.ok) throw new ToolPolicyError(`at ${key}`, `the executor returned no verdict: ${parsed.problem}`);
  return parsed.value;
}

/**
 * The policy's denials recorded as decisions: the call's result is `denied: <reason>`, as a human's
 * denial. Each names the digest of the call it was made for (`batch`), as a human's does: a restore
 * keeps only decisions that prove themselves (`restoredApprovals`), and the call of a dropped
 * denial, already marked policy-checked, would run unasked.
 */
export function applyPolicyVerdicts(approvals: Approvals, verdicts: readonly { toolCallId: string; verdict: ToolPolicyVerdict }[], batch: readonly ToolCall[]): Approvals {
  const calls = new Map(batch.map((call) => [call.id, call]));
  const denials = verdicts.flatMap(({ toolCallId, verdict }) => {
    if (verdict.type !== 'deny') return [];
    const call = calls.get(toolCallId);
    return [[toolCallId, { approved: false, reason: verdict.reason, ...(call && { digest: digestOf(call) }) }] as const];
  });
  if (denials.length === 0) return approvals;
  // fromEntries defines own properties: an id such as `__proto__` stays data.
  return { ...approvals, decisions: { ...approvals.decisions, ...Object.fromEntries(denials) } };
}

import { z } from 'zod';
import type { PendingToolCall, ToolCall, ToolMessage } from '../../schemas.js';
import type { ToolSet } from '../../tools/define-tool.js';
import { parseToolArguments } from '../../tools/own-arguments.js';
import { bindingRefusal, digestOf, provenDecisions, type RefusalReason } from './approval-binding.js';
import { pendingCalls, type BrainState } from '../core/brain-state.js';

/**
 * Human approval of tool calls (seed 003: an approval step yields while a request awaits a
 * decision and lets it run once the decision is saved). Decisions live in the driver's context,
 * so they are persisted with it: a decision is never asked for twice, not after a restore.
 */
export const DecisionSchema = z.object({
  approved: z.boolean(),
  reason: z.string().optional(),
  /** Who decided, as the decision said. */
  by: z.string().optional(),
  /** The digest of the call it was made for (see `callDigest`): a restore keeps it only while it matches. */
  digest: z.string().optional(),
});
export type Decision = z.infer<typeof DecisionSchema>;

/**
 * A record keyed by strings the model chose (call ids, tool names). Every key stays an own
 * property, `__proto__` included (`z.record` drops that one), and values are checked one by one.
 * Read it with `Object.hasOwn`, never by plain indexing.
 */
export function keyedByModel<T extends z.ZodType>(value: T, lenient = false) {
  return z
    .custom<Record<string, unknown>>((input) => typeof input === 'object' && input !== null && !Array.isArray(input), 'expected an object')
    .transform((input, ctx) => {
      const entries: [string, z.output<T>][] = [];
      for (const [key, item] of Object.entries(input)) {
        const parsed = value.safeParse(item);
        if (parsed.success) entries.push([key, parsed.data]);
        // A decision that cannot be read proves nothing: dropped, its call is asked again.
        else if (!lenient) for (const issue of parsed.error.issues) ctx.addIssue({ ...issue, path: [key, ...issue.path] } as never);
      }
      // fromEntries defines own properties, so a `__proto__` key is data, not the prototype.
      return Object.fromEntries(entries) as Record<string, z.output<T>>;
    });
}

export const ApprovalsSchema = z.object({
  /** Calls of the current batch that wait for a decision. */
  waiting: z.array(z.string()),
  /** Decisions for calls of the current batch, by tool call id. */
  decisions: keyedByModel(DecisionSchema, true),
  /** "Always for this session": a standing decision per tool name. */
  standing: keyedByModel(z.enum(['approve', 'deny'])),
});
export type Approvals = z.output<typeof ApprovalsSchema>;

export const NO_APPROVALS: Approvals = { waiting: [], decisions: {}, standing: {} };

type DecisionFields = { toolCallId: string; always?: boolean | undefined; reason?: string | undefined; by?: string | undefined; digest?: string | undefined; run?: number | undefined };
export type ApprovalEvent = ({ type: 'approve' } & DecisionFields) | ({ type: 'deny' } & DecisionFields);

/** The decision that applies to a call: its own, else the session's standing one for its tool. */
export function decisionFor(approvals: Approvals, call: ToolCall): Decision | undefined {
  // Ids and names are the model's choice: `toString` or `constructor` must not find Object.prototype's.
  const own = Object.hasOwn(approvals.decisions, call.id) ? approvals.decisions[call.id] : undefined;
  if (own) return own;
  const standing = Object.hasOwn(approvals.standing, call.name) ? approvals.standing[call.name] : undefined;
  return standing && { approved: standing === 'approve', reason: 'standing decision for this session' };
}

export const isWaiting = (approvals: Approvals, call: ToolCall): boolean =>
  approvals.waiting.includes(call.id) && decisionFor(approvals, call) === undefined;

export const deniedResult = (call: ToolCall, decision: Decision): ToolMessage => ({
  role: 'tool',
  toolCallId: call.id,
  toolName: call.name,
  content: `denied: ${decision.reason ?? 'the user did not approve this tool call'}`,
  isError: true,
});

/** Records a decision once: a second decision for the same call, or for a call not in the batch, changes nothing. */
export function recordDecision(approvals: Approvals, calls: readonly PendingToolCall[], event: ApprovalEvent): Approvals {
  const call = calls.find((pending) => pending.call.id === event.toolCallId)?.call;
  if (!call || Object.hasOwn(approvals.decisions, call.id)) return approvals;
  const decision: Decision = {
    approved: event.type === 'approve',
    ...(event.reason !== undefined && { reason: event.reason }),
    ...(event.by !== undefined && { by: event.by }),
    digest: digestOf(call),
  };
  // Computed keys define own properties, `__proto__` included (a literal `__proto__:` would not).
  return {
    ...approvals,
    decisions: { ...approvals.decisions, [call.id]: decision },
    standing: event.always ? { ...approvals.standing, [call.name]: event.type === 'approve' ? 'approve' : 'deny' } : approvals.standing,
  };
}

/** Which undecided calls of a batch need approval, asking each tool's `needsApproval`. */
export async function callsNeedingApproval(
  calls: readonly PendingToolCall[],
  tools: ToolSet,
  approvals: Approvals,
  sessionId: string,
  finished: ReadonlySet<string>,
): Promise<string[]> {
  const waiting: string[] = [];
  for (const { call, preAnswered } of calls) {
    if (preAnswered || finished.has(call.id) || decisionFor(approvals, call)) continue;
    const rule = tools.get(call.name)?.needsApproval;
    if (rule === undefined || rule === false) continue;
    if (rule === true) {
      waiting.push(call.id);
      continue;
    }
    // Arguments the tool would reject never run, so they need no approval: the runner reports them.
    const args = parseToolArguments(tools.get(call.name)!, call.args);
    if (args.success && (await rule(args.data, { toolCallId: call.id, sessionId }))) waiting.push(call.id);
  }
  return waiting;
}

/** What a run holds that a decision is checked against. */
export interface DecisionState {
  brain: BrainState;
  toolJournal: readonly ToolMessage[];
  approvals: Approvals;
  runIndex: number;
}

/** The refusal of a decision: why, in words and as a code. */
export type Refusal = { reason: RefusalReason; detail: string };

/**
 * Takes a decision for one call of the batch, or refuses it (see `bindingRefusal`). With
 * `waitingOnly`, only a call that was asked about may be decided (a decision from outside the
 * process, which can only have seen a request).
 */
export function takeDecision(state: DecisionState, event: ApprovalEvent, waitingOnly = false): { approvals: Approvals } | { refusal: Refusal } {
  const batch = pendingCalls(state.brain);
  const refusal = bindingRefusal(
    {
      run: state.runIndex,
      batch,
      finished: new Set(state.toolJournal.map((result) => result.toolCallId)),
      decided: new Set(batch.filter(({ call }) => decisionFor(state.approvals, call) !== undefined).map(({ call }) => call.id)),
      history: state.brain.context.history,
      waiting: waitingOnly ? new Set(state.approvals.waiting) : null,
    },
    event,
  );
  return refusal ? { refusal } : { approvals: recordDecision(state.approvals, batch, event) };
}

/** A restored batch keeps only the decisions that prove themselves (fail closed): the others are asked again. */
export function restoredApprovals(approvals: Approvals, brain: BrainState): Approvals {
  const decisions = provenDecisions(approvals.decisions, pendingCalls(brain));
  // A dropped decision's call still waits (or is checked again): it is asked again.
  return decisions === approvals.decisions ? approvals : { ...approvals, decisions };
}

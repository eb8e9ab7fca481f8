/**
 * What people decided about the calls of the current batch, as the context keeps it: approvals
 * (calls waiting for a decision, the decisions, the session's standing ones) and calls in doubt
 * (waiting, decided, run again). Every batch of every agent reads this record to know which
 * calls run, wait or are answered without running (`driver-rules`' `runnable`, `run-rules`'
 * batch results), so it is the core's, as the speaker record is (`speakers.ts`). The approvals
 * and in-doubt slices write it: which calls need a person, and taking a person's decision.
 */
import { z } from 'zod';
import { ToolMessageSchema, type ToolCall, type ToolMessage } from '../../schemas.js';

/** A person's decision on one call (or the standing one a tool's calls get). */
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

/** The approvals of the current batch and the session's standing decisions. */
export const ApprovalsSchema = z.object({
  /** Calls of the current batch that wait for a decision. */
  waiting: z.array(z.string()),
  /** Decisions for calls of the current batch, by tool call id. */
  decisions: keyedByModel(DecisionSchema, true),
  /** "Always for this session": a standing decision per tool name. */
  standing: keyedByModel(z.enum(['approve', 'deny'])),
});
export type Approvals = z.output<typeof ApprovalsSchema>;

/** No call waits, nothing decided. */
export const NO_APPROVALS: Approvals = { waiting: [], decisions: {}, standing: {} };

/** The decision that applies to a call: its own, else the session's standing one for its tool. */
export function decisionFor(approvals: Approvals, call: ToolCall): Decision | undefined {
  // Ids and names are the model's choice: `toString` or `constructor` must not find Object.prototype's.
  const own = Object.hasOwn(approvals.decisions, call.id) ? approvals.decisions[call.id] : undefined;
  if (own) return own;
  const standing = Object.hasOwn(approvals.standing, call.name) ? approvals.standing[call.name] : undefined;
  return standing && { approved: standing === 'approve', reason: 'standing decision for this session' };
}

/** Whether the call waits for a person's approval (asked, not decided yet). */
export const isWaiting = (approvals: Approvals, call: ToolCall): boolean =>
  approvals.waiting.includes(call.id) && decisionFor(approvals, call) === undefined;

/** The result a denied call gets instead of running. */
export const deniedResult = (call: ToolCall, decision: Decision): ToolMessage => ({
  role: 'tool',
  toolCallId: call.id,
  toolName: call.name,
  content: `denied: ${decision.reason ?? 'the user did not approve this tool call'}`,
  isError: true,
});

/**
 * What a person decides for a call in doubt: run it again, give its result, or fail it.
 *
 * @example
 * ```ts
 * import { DoubtActionSchema } from 'loopchart/schemas';
 *
 * const action = DoubtActionSchema.parse(process.argv[2] ?? 'rerun'); // 'rerun' | 'result' | 'fail'
 * ```
 */
export const DoubtActionSchema = z.enum(['rerun', 'result', 'fail']);
export type DoubtAction = z.infer<typeof DoubtActionSchema>;

const count = z.number().int().nonnegative();

/** A decision taken for a call in doubt, bound to the call's digest; a hand result or a failure carries the call's result. */
export const DoubtDecisionSchema = z.object({
  action: DoubtActionSchema,
  by: z.string().optional(),
  reason: z.string().optional(),
  digest: z.string(),
  result: ToolMessageSchema.optional(),
});
export type DoubtDecision = z.infer<typeof DoubtDecisionSchema>;

/** The current batch's calls in doubt, their decisions and how often each was run again. */
export const DoubtStateSchema = z.object({
  /** Calls in doubt without a decision: the run waits for these. */
  waiting: z.array(z.string()),
  decisions: keyedByModel(DoubtDecisionSchema, true),
  /** Reruns decided per call: each rerun journals a start of its own (a crash during it is in doubt again). */
  reruns: keyedByModel(count),
});
export type DoubtState = z.output<typeof DoubtStateSchema>;

/** No call in doubt. */
export const NO_DOUBT: DoubtState = { waiting: [], decisions: {}, reruns: {} };

/** How often a person had the call run again (0: its first run). */
export const rerunsOf = (doubt: DoubtState | undefined, id: string): number => (doubt && Object.hasOwn(doubt.reruns, id) ? doubt.reruns[id]! : 0);

/** Whether the call is in doubt and waits for a person. */
export const isInDoubt = (doubt: DoubtState | undefined, id: string): boolean => doubt !== undefined && doubt.waiting.includes(id);

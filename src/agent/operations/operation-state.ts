import { z } from 'zod';
import { jsonValueProblem } from '../../json-value.js';
import { ModelReplySchema } from '../../model.js';

const count = z.number().int().nonnegative();

/** A value that must survive JSON as is: what operations keep and what their yields carry. */
export const JsonValueSchema = z.unknown().superRefine((value, ctx) => {
  const problem = jsonValueProblem(value);
  if (problem !== null) ctx.addIssue({ code: 'custom', message: problem });
});

/**
 * The points where operations run, in the order a turn reaches them.
 *
 * @example
 * ```ts
 * for (const hook of OPERATION_HOOKS) console.log(hook); // beforeModelCall, afterReply, beforeTools
 * ```
 */
export const OPERATION_HOOKS = ['beforeModelCall', 'afterReply', 'beforeTools'] as const;
export const OperationHookSchema = z.enum(OPERATION_HOOKS);
/**
 * One of the hook points.
 *
 * @example
 * ```ts
 * const hook: OperationHook = 'beforeTools';
 * ```
 */
export type OperationHook = z.infer<typeof OperationHookSchema>;

/**
 * What the operations of an agent hold in its context, persisted with the session (row
 * version 3): each operation's slice of application state, the hook point in progress, the last
 * point finished, and the operation the run waits on, if one yielded.
 *
 * @example
 * ```ts
 * const state: OperationsState = actor.getSnapshot().context.operations;
 * if (state.waiting) console.log(`${state.waiting.operation} waits for ${state.waiting.reason}`);
 * ```
 */
export const OperationsStateSchema = z.object({
  /** Each operation's slice, by operation name (names are checked at configuration: no `__proto__`). */
  slices: z.record(z.string(), JsonValueSchema),
  /** The hook point in progress: `next` operations of its list are done (their effects applied). */
  point: z
    .object({
      key: z.string(),
      hook: OperationHookSchema,
      next: count,
      /** The reply `afterReply` hooks are given (kept until that point is done, so a restore can give it again). */
      reply: ModelReplySchema.optional(),
    })
    .nullable(),
  /** The key of the last point whose operations all ran: it does not run again. */
  done: z.string().nullable(),
  /** The operation the run waits on after it yielded, with why and what it said. */
  waiting: z.object({ operation: z.string(), reason: z.string(), payload: JsonValueSchema, key: z.string() }).nullable(),
});
export type OperationsState = z.output<typeof OperationsStateSchema>;

/** The state of an agent with no operation state yet (and of a session stored before row version 3). */
export const NO_OPERATIONS: OperationsState = { slices: {}, point: null, done: null, waiting: null };

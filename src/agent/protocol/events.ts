import { z } from 'zod';
import { PolicySchema, UserMessageSchema } from '../../schemas.js';
import { BudgetLimitsSchema } from '../budget/budget.js';
import { DoubtActionSchema } from '../core/call-decisions.js';
import { doubtEventProblem } from '../in-doubt/in-doubt.js';

/**
 * The events anyone may send to an agent actor, as schemas: the one check every external event
 * passes before the chart acts on it. A refused event changes nothing; the actor emits
 * `event.rejected` with the event's type and the reason.
 */

/**
 * The longest reason an event may carry (a decision's, a seal's). A denial's reason is the result
 * the model reads for the call and a seal's is stored with the outcome, so a reason is a sentence
 * or a paragraph a person wrote, never a payload: a 5 MB reason is refused, not fed to the model.
 */
export const MAX_REASON_LENGTH = 10_000;
/** The longest id an event may name (a tool call's, a child's path): ids are echoed in refusals and traces. */
const MAX_ID_LENGTH = 1_000;

const message = z.union([z.string(), UserMessageSchema]);
const reason = z.string().max(MAX_REASON_LENGTH);
const decision = {
  toolCallId: z.string().min(1).max(MAX_ID_LENGTH),
  always: z.boolean().optional(),
  reason: reason.optional(),
  /** Who decided (a user name or id), recorded in the session's trace for the timeline. */
  by: z.string().max(200).optional(),
  /** The digest of the call as it was shown (`ApprovalRequest.digest`): the decision applies only to that call. */
  digest: z.string().regex(/^[0-9a-f]{64}$/, 'a sha256 digest in lowercase hex').optional(),
  /** The run the call was shown in (`ApprovalRequest.run`): a decision for another run is refused. */
  run: z.number().int().positive().optional(),
};

/** What a decision for a call in doubt names, besides its type. */
export const doubtFields = {
  toolCallId: decision.toolCallId,
  action: DoubtActionSchema,
  /** The call's result, given by hand (`action: 'result'`): any plain JSON value. */
  result: z.unknown().optional(),
  reason: decision.reason,
  by: decision.by,
  digest: decision.digest,
  run: decision.run,
};

/** A hand result must be plain JSON, and only a `result` decision has one. */
export function checkHandResult(ctx: { value: { action: 'rerun' | 'result' | 'fail'; result?: unknown }; issues: unknown[] }): void {
  const problem = doubtEventProblem(ctx.value);
  if (problem) ctx.issues.push({ code: 'custom', message: problem, input: ctx.value.result, path: ['result'] });
}

export const ExternalEventSchemas = {
  input: z.object({ type: z.literal('input'), message }),
  /** `graceMs`: how long to wait for an operation hook in flight to return what it received (default 1 s; 0: not at all). */
  cancel: z.object({ type: z.literal('cancel'), graceMs: z.number().int().nonnegative().max(60_000).optional() }),
  /** `target`: a child run's path (its parent call ids joined by '/'): the steer goes to that child. */
  steer: z.object({ type: z.literal('steer'), message, target: z.string().min(1).max(MAX_ID_LENGTH).optional() }),
  /** Ends the run Sealed with `reason`. `target`: a child run's path: that child's run is sealed instead (its call gets its outcome). */
  seal: z.object({ type: z.literal('seal'), reason, target: z.string().min(1).max(MAX_ID_LENGTH).optional() }),
  policy: z.object({ type: z.literal('policy'), policy: PolicySchema.partial() }),
  resume: z.object({ type: z.literal('resume') }),
  rewind: z.object({ type: z.literal('rewind'), len: z.number().int().nonnegative() }),
  /**
   * Raises the run's budget limits it names (a paused run continues once its limit is lifted).
   * `target`: a child run's path (its parent call ids joined by '/'): the raise goes to that child.
   */
  'budget.raise': z.object({ type: z.literal('budget.raise'), budget: BudgetLimitsSchema.strict(), target: z.string().min(1).max(MAX_ID_LENGTH).optional() }),
  approve: z.object({ type: z.literal('approve'), ...decision }),
  deny: z.object({ type: z.literal('deny'), ...decision }),
  /** Decides a call in doubt after a restart (`tool.inDoubt`): run it again, give its result (`result`, any JSON value), or fail it. */
  'doubt.decide': z.object({ type: z.literal('doubt.decide'), ...doubtFields }).check(checkHandResult),
  /**
   * Resumes the operation the run waits on; the payload is checked against the operation's own
   * schema. `target`: a child run's path: the resume goes to that child (see `operation.yielded`'s).
   */
  'operation.resume': z.object({ type: z.literal('operation.resume'), operation: z.string().min(1).max(MAX_ID_LENGTH), payload: z.unknown(), target: z.string().min(1).max(MAX_ID_LENGTH).optional() }),
} as const;

export type ExternalEventType = keyof typeof ExternalEventSchemas;
export type ExternalEvent = { [T in ExternalEventType]: z.input<(typeof ExternalEventSchemas)[T]> }[ExternalEventType];

const schemas = new Map<string, z.ZodType>(Object.entries(ExternalEventSchemas));

/**
 * The events `admitted` made: each copy (null) and each stand-in, with why the sent event could
 * not be read. A copy is read once: admitted again (a DurableSession's, then the chart's) it
 * passes as it is.
 */
const made = new WeakMap<object, string | null>();
const UNREADABLE = 'event.unreadable';

/**
 * The event the chart gets for one sent from outside: a plain-data copy, so no getter, Proxy or
 * later change of the sender's object runs inside a guard; or, for one that cannot be read as
 * data or has no string type, a stand-in the chart refuses with the reason (`event.rejected`)
 * instead of failing on it. Fields that are not data (a function, an actor ref) are left out of
 * the copy, as JSON leaves them out. Events the driver made itself (its IO's, XState's own) pass
 * as they are.
 *
 * @example
 * ```ts
 * const event = { type: 'input', get message(): string { throw new Error('no') } };
 * externalEventProblem(admitted(event)); // "the 'input' event cannot be read as data (no): ..."
 * ```
 */
export function admitted<E extends object>(event: E): E {
  if (made.has(event)) return event;
  let type: unknown;
  let copy: unknown;
  try {
    type = (event as { type?: unknown }).type;
    if (typeof type === 'string' && type.startsWith('xstate.')) return event;
    copy = plainCopy(event);
  } catch (error) {
    return standIn(type, `cannot be read as data (${error instanceof Error ? error.message : String(error)})`) as E;
  }
  if (typeof (copy as { type?: unknown } | null)?.type !== 'string') return standIn(type, 'has no string type') as E;
  made.set(copy as object, null);
  return copy as E;
}

/** A copy that keeps dates and the like; JSON's, which drops functions and refs, when that fails. */
function plainCopy(value: unknown): unknown {
  try {
    return structuredClone(value);
  } catch {
    const text = JSON.stringify(value);
    return text === undefined ? undefined : JSON.parse(text);
  }
}

function standIn(type: unknown, problem: string): object {
  const named = typeof type === 'string' ? `the '${type.slice(0, 100)}' event` : 'an event';
  const event = { type: UNREADABLE };
  made.set(event, `${named} ${problem}: send plain data with a string type (see ExternalEvent)`);
  return event;
}

const MALFORMED = 'event.malformed';
/** Copies `checkedExternal` found well formed. */
const wellFormed = new WeakSet<object>();

/**
 * The event the chart gets for one sent from outside, checked once where it enters: the
 * `admitted` copy when its payload is what its type needs; else a stand-in of type
 * `event.malformed` that names the type it was sent as (`of`) and carries the reason, which one
 * root handler refuses (`event.rejected`, or `policy.rejected` for a policy). So no transition of
 * the chart asks whether its event is well formed. XState's own events pass as they are, but for
 * a report of a child's failure when `children` (the agent's) shows no such failure (see
 * `childFailureProblem`).
 *
 * @example
 * ```ts
 * const event = checkedExternal({ type: 'approve', toolCallId: 42 });
 * console.log(event.type, externalEventProblem(event)); // "event.malformed" and why
 * ```
 */
export function checkedExternal<E extends object>(event: E, children?: ChildStatuses | undefined): E | MalformedEvent {
  if (wellFormed.has(event)) return event;
  const copy = admitted(event) as E & { type: string };
  if (typeof made.get(copy) === 'string') return copy;
  if (copy.type.startsWith('xstate.')) {
    const forged = children ? childFailureProblem(copy.type, children) : null;
    return forged === null ? copy : malformedOf(copy.type, forged);
  }
  const problem = externalEventProblem(copy);
  if (problem === null) {
    // A host that checked it (DurableSession.send) hands the same copy to the chart: parsed once.
    wellFormed.add(copy);
    return copy;
  }
  return malformedOf(copy.type, problem);
}

function malformedOf(type: string, problem: string): MalformedEvent {
  const malformed: MalformedEvent = { type: MALFORMED, of: type.slice(0, 100) };
  made.set(malformed, problem);
  return malformed;
}

/** The agent actor's children by id, as `snapshot.children` holds them: what `checkedExternal` reads of a child's failure. */
export type ChildStatuses = Readonly<Record<string, { getSnapshot(): { status: string } } | undefined>>;

const CHILD_FAILURE = 'xstate.error.actor.';

/**
 * Why an XState event reporting that the agent's child `<id>` failed (`xstate.error.actor.<id>`)
 * cannot be XState's own, or null. XState sends it to the agent once the child's snapshot is in
 * error; a copy sent from outside (by hand, or forwarded by a parent statechart with `sendTo`)
 * names a child that has not failed, or none, and would end the agent with status 'error', since
 * XState ends a machine on an error event no transition takes. Other `xstate.*` events pass: a
 * host arms the chart's delayed events with them (see `AgentStepper`), and XState takes
 * `xstate.stop` before any check (see docs/agent/hosts.md).
 *
 * @example
 * ```ts
 * childFailureProblem('xstate.error.actor.io', {}); // "… no child 'io' of the agent has failed …"
 * ```
 */
export function childFailureProblem(type: string, children: ChildStatuses): string | null {
  if (!type.startsWith(CHILD_FAILURE)) return null;
  const id = type.slice(CHILD_FAILURE.length);
  const child = new Map(Object.entries(children)).get(id);
  if (child?.getSnapshot().status === 'error') return null;
  return `XState's report of a failed child, but no child '${id.slice(0, 100)}' of the agent has failed: only XState sends these (one sent from outside would end the agent)`;
}

/** An event from outside whose payload does not fit its type, as the chart sees it (see `checkedExternal`). */
export type MalformedEvent = { type: typeof MALFORMED; of: string };

/** Why an external event is malformed, or null when its payload is what its type needs. */
export function externalEventProblem(event: { type: string }): string | null {
  const standsIn = made.get(event);
  if (typeof standsIn === 'string') return standsIn;
  const schema = schemas.get(event.type);
  if (!schema) return `unknown event type '${String(event.type).slice(0, 100)}'`;
  const parsed = schema.safeParse(event);
  return parsed.success ? null : z.prettifyError(parsed.error);
}

export const externalEventTypes = [...schemas.keys()] as ExternalEventType[];

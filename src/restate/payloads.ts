import { z } from 'zod';
import * as restate from '@restatedev/restate-sdk';
import { ExternalEventSchemas, checkHandResult, doubtFields } from '../agent/protocol/events.js';
import { ScopeSchema } from '../agent/protocol/scope.js';
import { sessionIdProblem } from '../stores/step.js';
import { ingressKeyProblem } from './ingress-url.js';

/**
 * What each handler of a session object accepts, as zod schemas: everything a client sends is
 * checked here, where it enters, and a bad payload is a `TerminalError` (HTTP 400) naming the
 * handler and the problem. Restate does not retry a terminal error, and nothing was stored, so
 * the session stays usable.
 */

const message = ExternalEventSchemas.input.shape.message;

/**
 * A handler's body as the agent event it posts, without its type: every field the in-process
 * event takes (a child's `target`, say) and none other, so a handler drops nothing an actor's
 * event would carry.
 */
const asEvent = <T extends z.ZodObject<{ type: z.ZodLiteral<string> }>>(schema: T) => schema.omit({ type: true }).strict();

/**
 * A body that may be left out (null or no body at all, read as `{}`). Not a union with null: a
 * union's refusal is reported at the root ("Invalid input"), this names the field that is wrong.
 */
function optionalBody<T extends z.ZodType>(body: T) {
  return z.preprocess((value) => value ?? {}, body);
}
const decision = ExternalEventSchemas.approve.omit({ type: true });

/**
 * @example
 * ```ts
 * import { HandlerPayloads } from 'loopchart/restate';
 * HandlerPayloads.send.parse({ message: 'Hello' }); // ok
 * HandlerPayloads.approve.safeParse({}).success; // false: toolCallId is missing
 * ```
 */
export const HandlerPayloads = {
  /** A user message; `scope`, the session's memory scope, is given when the session is made (another later is refused, none keeps it). */
  send: z.strictObject({ message, scope: ScopeSchema.optional() }),
  /** Steers the run; `target` (a child run's path of call ids, `c1` or `c1/e1`) steers that child instead. */
  steer: asEvent(ExternalEventSchemas.steer),
  approve: decision.strict(),
  deny: decision.strict(),
  /** Seals the run with `reason`; `target` (a child run's path) seals that child's run instead, its call getting the Sealed outcome. */
  seal: asEvent(ExternalEventSchemas.seal),
  /**
   * Raises the run's budget (`budget.raise`): the limits it names hold for the rest of the run, a
   * side effect in flight and a paused run included; `target` (a child run's path) raises that child's.
   */
  raise: asEvent(ExternalEventSchemas['budget.raise']),
  /** Resumes the operation a run waits on; `payload` is checked by that operation's own schema; `target` resumes a child's. */
  resumeOperation: asEvent(ExternalEventSchemas['operation.resume']),
  /** Decides a call in doubt (`tool.inDoubt` on the event stream): `{ toolCallId, action: 'rerun' | 'result' | 'fail', result?, digest?, run?, by?, reason? }`. */
  decideDoubt: z.strictObject(doubtFields).check(checkHandResult),
  /** Cancels the run; `graceMs` gives a hook in flight that long to return what it received, as the in-process `cancel` does. */
  cancel: optionalBody(asEvent(ExternalEventSchemas.cancel)),
  events: optionalBody(z.strictObject({ cursor: z.number().int().nonnegative().optional(), limit: z.number().int().min(1).max(1000).optional() })),
} as const;

export type HandlerName = keyof typeof HandlerPayloads;
export type HandlerPayload<H extends HandlerName> = z.output<(typeof HandlerPayloads)[H]>;

/** The payload, checked; a `TerminalError` (400) naming the handler and the problem otherwise. */
export function checkPayload<H extends HandlerName>(handler: H, payload: unknown): HandlerPayload<H> {
  const parsed = HandlerPayloads[handler].safeParse(payload);
  if (!parsed.success) {
    throw new restate.TerminalError(`${handler}: invalid payload: ${payloadIssues(parsed.error.issues, [], payload)}`, { errorCode: 400 });
  }
  return parsed.data as HandlerPayload<H>;
}

type Issue = z.core.$ZodIssue;

/**
 * Each issue under the field it concerns: a key the handler does not take is named as its own
 * field. A union (a message is a string or a user message) is told by the branch of the value's
 * own type, down to the field that is wrong in it (zod says "Invalid input" for the whole union),
 * or, when the value is of no branch's type, as the types expected and the one received.
 */
function payloadIssues(issues: readonly Issue[], base: readonly PropertyKey[], payload: unknown): string {
  return issues.flatMap((issue) => describeIssue(issue, [...base, ...issue.path], payload)).join('; ');
}

function describeIssue(issue: Issue, path: readonly PropertyKey[], payload: unknown): string[] {
  const at = path.map(String);
  const field = at.length > 0 ? at.join('.') : '(root)';
  if (issue.code === 'unrecognized_keys') return issue.keys.map((key) => `${[...at, key].join('.')}: not a field this handler takes`);
  if (issue.code === 'invalid_union' && issue.errors.length > 0) {
    const wrongType = (branch: readonly Issue[]) => branch.some((inner) => inner.path.length === 0 && inner.code === 'invalid_type');
    const ofItsType = issue.errors.find((branch) => !wrongType(branch));
    if (ofItsType) return [payloadIssues(ofItsType, path, payload)];
    const expected = issue.errors.flatMap((branch) => branch.flatMap((inner) => (inner.path.length === 0 && inner.code === 'invalid_type' ? [inner.expected] : [])));
    return [`${field}: expected ${[...new Set(expected)].join(' or ')}, received ${typeName(valueAt(payload, path))}`];
  }
  return [`${field}: ${issue.message}`];
}

function valueAt(payload: unknown, path: readonly PropertyKey[]): unknown {
  let value = payload;
  for (const key of path) value = typeof value === 'object' && value !== null ? (value as Record<PropertyKey, unknown>)[key] : undefined;
  return value;
}

function typeName(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  return typeof value;
}

/** The object key is the session id: it obeys the stores' one id rule. */
export function checkSessionKey(key: string): string {
  // A key no ingress path can hold ('..') could only come from a call inside Restate: refused too.
  const problem = sessionIdProblem(key) ?? ingressKeyProblem(key);
  if (problem) throw new restate.TerminalError(`invalid session id: ${problem}`, { errorCode: 400 });
  return key;
}

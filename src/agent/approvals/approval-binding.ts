import { createHash } from 'node:crypto';
import { z } from 'zod';
import type { Message, PendingToolCall, ToolCall } from '../../schemas.js';

/**
 * What a decision binds to (issue 26): the exact call a person was shown. A request names the
 * call id, the run and a digest of the tool name and its canonical arguments; a decision that
 * names another run, another digest, a call that is not waiting, one already decided or one
 * that already ran is refused with one of these reasons, and never counts as a decision.
 */

/** Why a decision was refused. */
export const RefusalReasonSchema = z.enum(['unknown-call', 'already-decided', 'already-ran', 'other-run', 'changed', 'not-waiting']);
export type RefusalReason = z.infer<typeof RefusalReasonSchema>;

/**
 * A call waiting for a person, as it is shown: decide it by passing this object back.
 *
 * @example
 * ```ts
 * import type { ApprovalRequest } from 'loopchart';
 *
 * const request: ApprovalRequest = { toolCallId: 'call_1', toolName: 'send_email', args: { to: 'a@b.c' }, digest: '…', run: 1, turn: 1 };
 * console.log(`${request.toolName} ${JSON.stringify(request.args)} (run ${request.run})`);
 * ```
 */
export interface ApprovalRequest {
  toolCallId: string;
  toolName: string;
  args: unknown;
  /** sha256 (hex) over the canonical JSON of `{ name, args }`: what the decision approves. */
  digest: string;
  /** The session's run the call belongs to (its index, from 1). */
  run: number;
  turn: number;
}

/** JSON with object keys sorted at every depth: the same value always gives the same text. */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  const keys = Object.keys(value).filter((key) => (value as Record<string, unknown>)[key] !== undefined).sort();
  return `{${keys.map((key) => `${JSON.stringify(key)}:${canonicalJson((value as Record<string, unknown>)[key])}`).join(',')}}`;
}

/** The digest a decision must name for this call: its tool name and arguments, nothing else. */
export function callDigest(call: Pick<ToolCall, 'name' | 'args'>): string {
  return createHash('sha256').update(canonicalJson({ name: call.name, args: call.args })).digest('hex');
}

const digests = new WeakMap<object, string>();
/** The digest of a call object, computed once per object (calls are never changed in place). */
export function digestOf(call: ToolCall): string {
  let digest = digests.get(call);
  if (digest === undefined) digests.set(call, (digest = callDigest(call)));
  return digest;
}

export function requestFor(call: ToolCall, run: number, turn: number): ApprovalRequest {
  return { toolCallId: call.id, toolName: call.name, args: call.args, digest: digestOf(call), run, turn };
}

/**
 * The `approve` or `deny` event that decides a request as it was shown: bound to its call id,
 * digest and run, with the verdict's other fields (`reason`, `by`, `always`) as given.
 *
 * @example
 * ```ts
 * actor.on('approval.requested', ({ requests }) => {
 *   for (const request of requests) actor.send(decisionEvent(request, { approved: false, reason: 'Not on Fridays.' }));
 * });
 * ```
 */
export function decisionEvent<V extends { approved: boolean }>(
  request: Pick<ApprovalRequest, 'toolCallId' | 'digest' | 'run'>,
  { approved, ...rest }: V,
): { type: 'approve' | 'deny'; toolCallId: string; digest: string; run: number } & Omit<V, 'approved'> {
  return { type: approved ? 'approve' : 'deny', toolCallId: request.toolCallId, digest: request.digest, run: request.run, ...rest };
}

/** What a decision names: the call id always; the run and digest when it is bound (see `bindingRefusal`). */
export interface DecisionTarget {
  toolCallId: string;
  digest?: string | undefined;
  run?: number | undefined;
}

/** Where a run stands, as far as deciding one call goes. */
export interface DecisionScope {
  run: number;
  /** The calls of the batch the run waits on (none outside a batch). */
  batch: readonly PendingToolCall[];
  /** Calls of the batch that have their result. */
  finished: ReadonlySet<string>;
  /** Calls of the batch that already have a decision. */
  decided: ReadonlySet<string>;
  /** Committed conversation: a call answered there already ran. */
  history: readonly Message[];
  /** Only decisions for calls on this list are taken (null: any call of the batch, as events may decide ahead). */
  waiting: ReadonlySet<string> | null;
}

/** Why a decision cannot apply (null: it applies). A decision without digest or run binds to the call as it stands now. */
export function bindingRefusal(scope: DecisionScope, target: DecisionTarget): { reason: RefusalReason; detail: string } | null {
  const id = target.toolCallId;
  if (target.run !== undefined && target.run !== scope.run) {
    return { reason: 'other-run', detail: `the decision is for run ${target.run}; the session is in run ${scope.run}` };
  }
  const pending = scope.batch.find((entry) => entry.call.id === id);
  if (!pending) {
    return answeredIn(scope.history, id)
      ? { reason: 'already-ran', detail: `call '${id}' was already answered` }
      : { reason: 'unknown-call', detail: `no call '${id}' waits in run ${scope.run}` };
  }
  if (target.digest !== undefined && target.digest !== digestOf(pending.call)) {
    return { reason: 'changed', detail: `call '${id}' is not the call the decision was made for (its tool or arguments differ)` };
  }
  if (scope.finished.has(id) || pending.preAnswered) return { reason: 'already-ran', detail: `call '${id}' already has its result` };
  if (scope.decided.has(id)) return { reason: 'already-decided', detail: `call '${id}' was already decided` };
  if (scope.waiting && !scope.waiting.has(id)) return { reason: 'not-waiting', detail: `call '${id}' does not wait for a decision` };
  return null;
}

function answeredIn(history: readonly Message[], id: string): boolean {
  for (let i = history.length - 1; i >= 0; i--) {
    const message = history[i]!;
    if (message.role === 'tool' && message.toolCallId === id) return true;
  }
  return false;
}

/**
 * The stored decisions that still prove themselves against the batch (fail closed after a
 * restore): each must name its call's digest; one that does not, or whose call changed, is
 * dropped and the call is asked again.
 */
export function provenDecisions<D extends { digest?: string | undefined }>(
  decisions: Record<string, D>,
  batch: readonly PendingToolCall[],
): Record<string, D> {
  const calls = new Map(batch.map((entry) => [entry.call.id, entry.call]));
  const kept = Object.entries(decisions).filter(([id, decision]) => {
    const call = calls.get(id);
    return call !== undefined && decision.digest === digestOf(call);
  });
  return kept.length === Object.keys(decisions).length ? decisions : Object.fromEntries(kept);
}

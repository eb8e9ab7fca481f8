import { jsonValueProblem } from '../../json-value.js';
import type { ToolCall, ToolMessage } from '../../schemas.js';
import { bindingRefusal, digestOf, provenDecisions, requestFor, type ApprovalRequest } from '../approvals/approval-binding.js';
import type { DecisionState, Refusal } from '../approvals/approvals.js';
import { pendingCalls } from '../core/brain-state.js';
import { NO_DOUBT, rerunsOf, type DoubtAction, type DoubtDecision, type DoubtState } from '../core/call-decisions.js';

/**
 * Tools in doubt (issue 26): a run that resumes and finds a call that was started and has no
 * result cannot know whether its effect happened. A tool says what to do then: `'rerun'` runs it
 * again with the same idempotency key (right for idempotent tools), `'ask'` makes the run wait
 * until a person decides: run it again, give its result by hand, or fail the call. To know a
 * call was started, an `'ask'` tool's start is journaled (a marker step through the executor)
 * before the tool runs; a call is in doubt when its marker comes from a journal written by an
 * earlier process (or an earlier attempt) and its result does not.
 *
 * This slice takes a person's decision and restores doubt after a restart. The record it writes
 * (calls waiting, decisions, reruns) is the core's, since every batch reads it
 * (`core/call-decisions.ts`); the marker's keys are protocol (`startKeys` in `protocol/keys.ts`), as
 * is the error the IO throws for a call in doubt (`ToolInDoubtError` in `protocol/failure.ts`).
 */

/** What a decision event carries (`{ type: 'doubt.decide', ... }`). */
export interface DoubtEvent {
  toolCallId: string;
  action: DoubtAction;
  result?: unknown;
  by?: string | undefined;
  reason?: string | undefined;
  digest?: string | undefined;
  run?: number | undefined;
}

/** The state once a call is found in doubt (again): it waits, an earlier decision for it is spent. */
export function markedInDoubt(doubt: DoubtState | undefined, id: string): DoubtState {
  const state = doubt ?? NO_DOUBT;
  if (state.waiting.includes(id)) return state;
  const decisions = Object.fromEntries(Object.entries(state.decisions).filter(([key]) => key !== id));
  return { ...state, waiting: [...state.waiting, id], decisions };
}

/** The calls of the batch that wait in doubt, as they are shown (decide each by its request). */
export function doubtRequests(state: DecisionState & { doubt?: DoubtState | undefined }): { calls: ToolCall[]; requests: ApprovalRequest[] } {
  const waiting = state.doubt?.waiting ?? [];
  const calls = pendingCalls(state.brain).filter(({ call }) => waiting.includes(call.id)).map(({ call }) => call);
  return { calls, requests: calls.map((call) => requestFor(call, state.runIndex, state.brain.context.turnsTaken)) };
}

/** The result a hand decision gives: a string as is, any other JSON value as JSON (as a tool's return value). */
export function handResult(call: ToolCall, value: unknown): ToolMessage {
  return { role: 'tool', toolCallId: call.id, toolName: call.name, content: typeof value === 'string' ? value : JSON.stringify(value) };
}

export const failedResult = (call: ToolCall, reason: string | undefined): ToolMessage => ({
  role: 'tool',
  toolCallId: call.id,
  toolName: call.name,
  content: `failed: ${reason ?? 'the call was in flight when the run stopped, and a person failed it instead of running it again'}`,
  isError: true,
});

/** Why a decision's hand result cannot be taken (null: it can). */
export function doubtEventProblem(event: Pick<DoubtEvent, 'action' | 'result'>): string | null {
  if (event.action !== 'result') return event.result === undefined ? null : `only a 'result' decision carries a result`;
  if (event.result === undefined) return `a 'result' decision needs a result (any JSON value)`;
  return jsonValueProblem(event.result, 'result');
}

/**
 * Takes a decision for a call in doubt, or refuses it: the call must be of this run's batch,
 * the one shown (its digest), without a result, and waiting in doubt undecided.
 */
export function takeDoubtDecision(
  state: DecisionState & { doubt?: DoubtState | undefined },
  event: DoubtEvent,
): { doubt: DoubtState; call: ToolCall; decision: DoubtDecision } | { refusal: Refusal } {
  const doubt = state.doubt ?? NO_DOUBT;
  const batch = pendingCalls(state.brain);
  const refusal = bindingRefusal(
    {
      run: state.runIndex,
      batch,
      finished: new Set(state.toolJournal.map((result) => result.toolCallId)),
      decided: new Set(Object.keys(doubt.decisions).filter((id) => !doubt.waiting.includes(id))),
      history: state.brain.context.history,
      waiting: new Set(doubt.waiting),
    },
    event,
  );
  if (refusal) return { refusal };
  const problem = doubtEventProblem(event);
  if (problem) return { refusal: { reason: 'not-waiting', detail: problem } };
  const call = batch.find((pending) => pending.call.id === event.toolCallId)!.call;
  const result = event.action === 'result' ? handResult(call, event.result) : event.action === 'fail' ? failedResult(call, event.reason) : undefined;
  const decision: DoubtDecision = {
    action: event.action,
    digest: digestOf(call),
    ...(event.by !== undefined && { by: event.by }),
    ...(event.reason !== undefined && { reason: event.reason }),
    ...(result && { result }),
  };
  const reruns = event.action === 'rerun' ? { ...doubt.reruns, [call.id]: rerunsOf(doubt, call.id) + 1 } : doubt.reruns;
  return {
    call,
    decision,
    doubt: { waiting: doubt.waiting.filter((id) => id !== call.id), decisions: { ...doubt.decisions, [call.id]: decision }, reruns },
  };
}

/**
 * A restored batch's doubt state, fail closed: a decision whose call changed (or that names no
 * digest) is dropped and its call waits again; results decided by hand or failed join the journal.
 */
export function restoredDoubt(
  doubt: DoubtState | undefined,
  state: Pick<DecisionState, 'brain' | 'toolJournal'>,
): { doubt?: DoubtState | undefined; toolJournal: readonly ToolMessage[] } {
  if (!doubt) return { toolJournal: state.toolJournal };
  const batch = pendingCalls(state.brain);
  const decisions = provenDecisions(doubt.decisions, batch);
  const dropped = Object.keys(doubt.decisions).filter((id) => !Object.hasOwn(decisions, id) && batch.some(({ call }) => call.id === id));
  const waiting = [...doubt.waiting, ...dropped.filter((id) => !doubt.waiting.includes(id))];
  const known = new Set(state.toolJournal.map((result) => result.toolCallId));
  const decided = Object.values(decisions).flatMap((decision) => (decision.result && !known.has(decision.result.toolCallId) ? [decision.result] : []));
  return { doubt: { ...doubt, waiting, decisions }, toolJournal: decided.length ? [...state.toolJournal, ...decided] : state.toolJournal };
}

/** What the agent emits about calls in doubt. */
export type DoubtEmitted =
  /** Calls in doubt after a restart: the run waits until each has a decision (`doubt.decide`, bound to its request). */
  | { type: 'tool.inDoubt'; calls: ToolCall[]; requests: ApprovalRequest[] }
  /** A decision was taken for a call in doubt. */
  | { type: 'doubt.decided'; run: number; toolCallId: string; digest: string; action: DoubtAction; by?: string | undefined; reason?: string | undefined }
  /** A decision was refused: it changed nothing (the call is not in doubt, unknown, finished, of another run or changed). */
  | { type: 'doubt.refused'; run: number; toolCallId: string; action: DoubtAction; refusal: Refusal['reason']; detail: string; by?: string | undefined; digest?: string | undefined };

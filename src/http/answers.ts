import { runInFlight } from '../agent/protocol/actor-types.js';
import { type AgentContext } from '../agent/core/context.js';
import { digestOf } from '../agent/approvals/approval-binding.js';
import { pendingCalls } from '../agent/core/brain-state.js';
import { innerKey, serviceKey } from '../agent/protocol/keys.js';
import { childSessionId, isAmbiguous, routeAmong } from '../agent/subagents/subagents.js';
import type { ApprovalAnswer } from './request.js';
import { chatDigest, parseApprovalId } from './ui-chunks.js';

/**
 * Whether a page's approval answers name calls that wait, as shown: a call of the chat's own
 * run or of a subagent (`c1/p1`, `c1/c2/p1`, found by walking down the calls in flight to the
 * child session that waits), waiting for its approval or in doubt after a restart (the page
 * asks "run it again?"). Read only: a forged, stale or foreign answer
 * changes nothing.
 */

/** A session's context, live or stored: `via` is the id the chat shows the child's calls under. */
export type ContextOf = (sessionId: string, via: string) => Promise<AgentContext | undefined>;

/** An answer, read: the call as the chat shows it, and whether it is a subagent's. */
export interface ReadAnswer extends ApprovalAnswer {
  toolCallId: string;
  digest: string;
  run: number;
  ofChild: boolean;
  /** What the call waits for: its approval, or a decision on a call in doubt (approved: run it again; denied: fail it). */
  kind: 'approval' | 'doubt';
}

/** The answers read and checked, or why they cannot be taken. */
export async function checkAnswers(
  chatId: string,
  context: AgentContext,
  answers: readonly ApprovalAnswer[],
  contextOf: ContextOf,
): Promise<{ answers: ReadAnswer[] } | { problem: string }> {
  const seen = new Set<string>();
  const read: ReadAnswer[] = [];
  for (const answer of answers) {
    const id = parseApprovalId(answer.approvalId);
    if (!id) return { problem: `approval '${answer.approvalId.slice(0, 100)}' is not one this chat asked for` };
    if (seen.has(id.toolCallId)) return { problem: `call '${id.toolCallId.slice(0, 100)}' is answered twice` };
    seen.add(id.toolCallId);
    const found = await waiting(chatId, chatId, context, id, '', contextOf);
    if (found === null) return { problem: `no call '${id.toolCallId.slice(0, 100)}' of run ${id.run} as shown waits for a decision` };
    read.push({ ...answer, ...id, digest: found.digest, ofChild: found.ofChild, kind: found.kind });
  }
  return { answers: read };
}

/**
 * Where the call waits, in this session or in a child down the tree, with its digest (the id shows
 * it bound to `chat`, the chat's session id); null when it waits nowhere.
 */
async function waiting(
  chat: string,
  sessionId: string,
  context: AgentContext,
  id: { run: number; digest: string; toolCallId: string },
  via: string,
  contextOf: ContextOf,
): Promise<{ ofChild: boolean; digest: string; kind: ReadAnswer['kind'] } | null> {
  if (!runInFlight(context.brain)) return null;
  const calls = pendingCalls(context.brain);
  // Routed as the agent routes it: by the calls of the batch (a model's call id may hold a '/').
  const route = routeAmong(id.toolCallId, calls.map((pending) => pending.call.id));
  if (isAmbiguous(route)) return null;
  const own = route === null ? calls.find((pending) => pending.call.id === id.toolCallId)?.call : undefined;
  if (own) {
    if (id.run !== context.runIndex || chatDigest(chat, digestOf(own)) !== id.digest) return null;
    if (context.approvals.waiting.includes(id.toolCallId) && !Object.hasOwn(context.approvals.decisions, id.toolCallId)) return { ofChild: false, digest: digestOf(own), kind: 'approval' };
    const inDoubt = context.doubt?.waiting.includes(id.toolCallId) ?? false;
    return inDoubt ? { ofChild: false, digest: digestOf(own), kind: 'doubt' } : null;
  }
  if (!route || !calls.some((pending) => pending.call.id === route.callId)) return null;
  let childId: string;
  try {
    childId = childSessionId(sessionId, innerKey(serviceKey(context, context.brain.context.turnsTaken, 'tools'), { kind: 'tool', call: route.callId, rerun: 0 }));
  } catch {
    return null;
  }
  const childVia = via ? `${via}/${route.callId}` : route.callId;
  const child = await contextOf(childId, childVia);
  if (!child) return null;
  const found = await waiting(chat, childId, child, { ...id, toolCallId: route.rest }, childVia, contextOf);
  return found && { ofChild: true, digest: found.digest, kind: found.kind };
}

/**
 * Why a page's resume of an operation cannot go to the subagent at `target` (the path of call
 * ids down from the chat's run: `c1`, `c1/c2`), or null when that child waits on `operation`.
 * Each step of the path is a call of the batch its session waits on, whose child session is
 * named under the chat's own session id (see `childSessionId`), so a path reaches children of
 * this chat only; the path is read as the agent routes it (by the calls of each level's batch,
 * see `routeAmong`: an ambiguous path reaches no one). Read only: a target that runs no child is refused here, never forwarded.
 */
export async function childWaitProblem(chatId: string, context: AgentContext, target: string, operation: string, contextOf: ContextOf): Promise<string | null> {
  const shownTarget = target.slice(0, 200);
  const none = `no subagent at '${shownTarget}' waits on an operation`;
  let sessionId = chatId;
  let session = context;
  let via = '';
  let rest = target;
  for (;;) {
    if (!runInFlight(session.brain)) return none;
    const calls = pendingCalls(session.brain).map((pending) => pending.call.id);
    const route = routeAmong(rest, calls);
    if (isAmbiguous(route)) return none;
    const callId = route ? route.callId : rest;
    if (!calls.includes(callId)) return none;
    let childId: string;
    try {
      childId = childSessionId(sessionId, innerKey(serviceKey(session, session.brain.context.turnsTaken, 'tools'), { kind: 'tool', call: callId, rerun: 0 }));
    } catch {
      return none;
    }
    via = via ? `${via}/${callId}` : callId;
    const child = await contextOf(childId, via);
    if (!child || !runInFlight(child.brain)) return none;
    if (route) {
      sessionId = childId;
      session = child;
      rest = route.rest;
      continue;
    }
    const waiting = child.operations.waiting?.operation;
    if (waiting === operation) return null;
    return waiting ? `the subagent at '${shownTarget}' waits on operation '${waiting}', not '${operation.slice(0, 100)}'` : none;
  }
}

/**
 * Calls in doubt in the driver: the chart's guards and actions for calls started before a
 * restart with no result, of tools that ask (see in-doubt.ts): the batch waits for a person's
 * decision beside the calls that run.
 */
import { assign, emit, rule, type Args, type ContextHook } from '../core/bind.js';
import type { CompiledAgent } from '../core/compile.js';
import type { AgentContext } from '../core/context.js';
import { toolFinished, type Effect } from '../core/effects.js';
import { journalResult } from '../core/run-rules.js';
import { as, type AgentEvent } from '../protocol/agent-event.js';
import { doubtRequests, markedInDoubt, restoredDoubt, takeDoubtDecision } from './in-doubt.js';

/** A person's decision for a call in doubt, bound to the call as shown; a refused one changes nothing. */
export function decideDoubt(_agent: CompiledAgent, context: AgentContext, event: AgentEvent): Effect[] {
  const out: Effect[] = [];
  const { toolCallId, action, by, reason, digest } = as(event, 'doubt.decide');
  const taken = takeDoubtDecision(context, as(event, 'doubt.decide'));
  const who = by !== undefined ? { by } : {};
  if ('refusal' in taken) {
    const { reason: refusal, detail } = taken.refusal;
    out.push({ emit: { type: 'doubt.refused', run: context.runIndex, toolCallId, action, refusal, detail, ...who, ...(digest !== undefined && { digest }) } });
    return [...out, { emit: { type: 'event.rejected', event: 'doubt.decide', reason: `${refusal}: ${detail}` } }];
  }
  const { result } = taken.decision;
  out.push({ assign: { doubt: taken.doubt, ...(result && { toolJournal: journalResult(context.toolJournal, result) }) } });
  out.push({ emit: { type: 'doubt.decided', run: context.runIndex, toolCallId, digest: taken.decision.digest, action, ...who, ...(reason !== undefined && { reason }) } });
  if (result) out.push({ emit: toolFinished(context, taken.call, result) });
  return out;
}

/** The guards and actions the chart names for calls in doubt. */
export const inDoubtImplementations = {
  // Calls started before a restart with no result are in doubt (see in-doubt.ts).
  restore: ((_agent, context) => restoredDoubt(context.doubt, context)) satisfies ContextHook,
  guards: {
    someoneInDoubt: ({ context }: Args) => (context.doubt?.waiting.length ?? 0) > 0,
    nothingInDoubt: ({ context }: Args) => (context.doubt?.waiting.length ?? 0) === 0,
  },
  actions: {
    markInDoubt: assign({ doubt: ({ context, event }) => markedInDoubt(context.doubt, as(event, 'io.toolInDoubt').call.id) }),
    emitInDoubt: emit(({ context }) => ({ type: 'tool.inDoubt' as const, ...doubtRequests(context) })),
    decideDoubt: rule.effects(decideDoubt),
  },
};

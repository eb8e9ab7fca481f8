import type { AssistantMessage, Message, ToolMessage } from '../schemas.js';
import { isInterruptedResult } from '../tools/run-tools.js';

/*
 * Replay's content checks: a recorded result (a tool result, a model reply) must be what the
 * brain was fed. Two records say what it was fed: the next model call's prompt delta (what the
 * model was given that was new since the previous call: the results and the reply fed since
 * then are in it) and, for a session at rest, the stored message log.
 * Each check names the first field that differs; null when everything compared matches.
 */

/** The first content difference: which field, what the brain was fed, what the trace records. */
export interface ContentMismatch {
  field: string;
  fed: string;
  recorded: string;
}

/** What replay fed the brain since the previous model call of the run. */
export interface FedSinceModel {
  results: Map<string, ToolMessage>;
  reply?: { turn: number; message: AssistantMessage } | undefined;
}

const PRUNED_PREFIX = '[pruned: ';
const quoted = (text: string): string => JSON.stringify(text.length > 200 ? `${text.slice(0, 200)}…` : text);
const callsOf = (message: AssistantMessage): string => JSON.stringify(message.toolCalls ?? []);

/**
 * The fed results checked against the next model call's prompt delta. A result it shows pruned
 * (a marker) or not at all (a compaction or an operation dropped it) cannot be compared.
 */
export function checkAgainstPrompt(fed: FedSinceModel, prompt: readonly Message[]): ContentMismatch | null {
  for (const message of prompt) {
    if (message.role !== 'tool' || message.content.startsWith(PRUNED_PREFIX)) continue;
    const recorded = fed.results.get(message.toolCallId);
    if (recorded) {
      const mismatch = toolMismatch(`tool result ${message.toolCallId}`, message, recorded);
      if (mismatch) return mismatch;
    }
  }
  if (!fed.reply) return null;
  const { turn, message: recorded } = fed.reply;
  const firstCall = recorded.toolCalls?.[0]?.id;
  const shown = prompt.findLast((m): m is AssistantMessage => m.role === 'assistant' && (firstCall === undefined || m.toolCalls?.[0]?.id === firstCall));
  return shown ? assistantMismatch(`reply of turn ${turn}`, shown, recorded) : null;
}

/**
 * The messages fed since the last point where the stored log was rewritten (a compaction, a
 * rewind, a fork's copied prefix) against the end of the stored log, one by one.
 */
export function checkAgainstLog(fedTail: readonly Message[], stored: readonly Message[]): ContentMismatch | null {
  if (stored.length < fedTail.length) {
    return { field: 'the message log', fed: `${stored.length} messages stored`, recorded: `${fedTail.length} messages recorded since the log was last rewritten` };
  }
  const offset = stored.length - fedTail.length;
  for (let i = 0; i < fedTail.length; i++) {
    const mismatch = messageMismatch(`log message ${offset + i}`, stored[offset + i]!, fedTail[i]!);
    if (mismatch) return mismatch;
  }
  return null;
}

function messageMismatch(where: string, fed: Message, recorded: Message): ContentMismatch | null {
  if (fed.role !== recorded.role) return { field: `${where}: role`, fed: fed.role, recorded: recorded.role };
  if (fed.role === 'tool' && recorded.role === 'tool') {
    if (fed.toolCallId !== recorded.toolCallId) return { field: `${where}: toolCallId`, fed: fed.toolCallId, recorded: recorded.toolCallId };
    return fed.content.startsWith(PRUNED_PREFIX) ? null : toolMismatch(where, fed, recorded);
  }
  if (fed.role === 'assistant' && recorded.role === 'assistant') return assistantMismatch(where, fed, recorded);
  return fed.content === recorded.content ? null : { field: `${where}: content`, fed: quoted(fed.content), recorded: quoted(recorded.content) };
}

function toolMismatch(where: string, fed: ToolMessage, recorded: ToolMessage): ContentMismatch | null {
  // Both interrupted answers: the trace does not always tell whether the call had started (an
  // aborted call records its end after the run's), so their wording may differ, not the decision.
  if (isInterruptedResult(fed) && isInterruptedResult(recorded)) return null;
  if (fed.content !== recorded.content) return { field: `${where}: content`, fed: quoted(fed.content), recorded: quoted(recorded.content) };
  if (Boolean(fed.isError) !== Boolean(recorded.isError)) return { field: `${where}: isError`, fed: String(Boolean(fed.isError)), recorded: String(Boolean(recorded.isError)) };
  return null;
}

function assistantMismatch(where: string, fed: AssistantMessage, recorded: AssistantMessage): ContentMismatch | null {
  if (fed.content !== recorded.content) return { field: `${where}: content`, fed: quoted(fed.content), recorded: quoted(recorded.content) };
  if (callsOf(fed) !== callsOf(recorded)) return { field: `${where}: toolCalls`, fed: callsOf(fed), recorded: callsOf(recorded) };
  return null;
}

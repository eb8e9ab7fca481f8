import type { Message } from '../schemas.js';
import { estimateMessageTokens } from '../tokens.js';

export interface PruneOptions {
  /** Tokens at the end of the conversation whose tool results are never pruned. */
  protectTokens: number;
}

export interface PruneResult {
  messages: Message[];
  /** How many tool results were replaced by a marker. */
  pruned: number;
  /** Estimated tokens the markers saved. */
  tokensSaved: number;
}

const MARKER_PREFIX = '[pruned: old tool result of ~';

/** The short text an old tool result is replaced with. Recognisable, so nothing is pruned twice. */
export const prunedMarker = (tokens: number) => `${MARKER_PREFIX}${tokens} tokens]`;

/**
 * Replaces the contents of old tool results outside a protected recent tail with a short
 * marker. The tail is the shortest suffix holding `protectTokens` tokens, and always includes
 * the results that follow the last assistant message (the model has not seen them yet).
 * Message count, roles and tool-call ids stay as they were, so no tool call is ever separated
 * from its result and the brain can adopt the result with `adoptPruned`.
 * Pure; returns `pruned: 0` (and the same array) when there is nothing to prune.
 *
 * @example
 * ```ts
 * const { messages: pruned, pruned: count, tokensSaved } = pruneToolResults(messages, { protectTokens: 4_000 });
 * ```
 */
export function pruneToolResults(messages: readonly Message[], options: PruneOptions): PruneResult {
  let tail = 0;
  let boundary = messages.length;
  while (boundary > 0 && tail < options.protectTokens) {
    boundary -= 1;
    tail += estimateMessageTokens(messages[boundary]!);
  }
  // Results after the model's last message are ones it has not read yet: never old, whatever
  // their size (a parallel call's large last result must not cost its siblings their content).
  boundary = Math.min(boundary, lastAssistant(messages) + 1);
  let out: Message[] | undefined;
  let pruned = 0;
  let tokensSaved = 0;
  for (let i = 0; i < boundary; i++) {
    const message = messages[i]!;
    if (message.role !== 'tool' || message.content.startsWith(MARKER_PREFIX)) continue;
    const before = estimateMessageTokens(message);
    const replacement = { ...message, content: prunedMarker(before) };
    const saved = before - estimateMessageTokens(replacement);
    if (saved <= 0) continue;
    out ??= messages.slice();
    out[i] = replacement;
    pruned += 1;
    tokensSaved += saved;
  }
  return { messages: out ?? (messages as Message[]), pruned, tokensSaved };
}

function lastAssistant(messages: readonly Message[]): number {
  for (let i = messages.length - 1; i >= 0; i--) if (messages[i]!.role === 'assistant') return i;
  return -1;
}

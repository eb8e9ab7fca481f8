import type { ToolDefinition, Model } from '../model.js';
import type { CompactionReason, Message } from '../schemas.js';

/** What the driver hands a {@link Compactor}: the conversation to rewrite and the budget it must fit. */
export interface CompactionRequest {
  /** The whole conversation (history + pending) to compact. */
  messages: readonly Message[];
  reason: CompactionReason;
  /** The brain's estimate of the next request, tool definitions and prompt parts included. */
  tokensBefore: number;
  /** The window the compacted conversation must fit, for a compactor that sizes its own requests. */
  contextWindow: number;
  /** The tools the agent advertises (the driver counts them into the estimate itself). */
  tools: readonly ToolDefinition[];
  /** Stable across a restore that repeats this compaction: pass it on to the summary call. */
  idempotencyKey: string;
  model: Model;
  signal: AbortSignal;
}

/**
 * A compacted conversation and the estimate of its messages alone (`estimateTokens(messages)`;
 * the driver adds the tool definitions), or null when the compactor changed nothing.
 */
export type CompactionResult = { messages: Message[]; tokensAfter: number } | null;

/**
 * Rewrites a conversation that fills the window. Plain function: replace it freely. A compactor
 * that fails without touching the conversation (a summary that came back empty, say) throws an
 * error with `changedNothing: true`: the driver then treats the pass as one that changed nothing
 * and lets the brain's stall rule decide, instead of failing the run.
 *
 * @example
 * ```ts
 * import { createAgentMachine, estimateTokens, type Compactor } from 'loopchart';
 * import { scriptedModel } from 'loopchart/testing';
 *
 * // Keeps the first message (the task) and the last six.
 * const keepEnds: Compactor = async ({ messages }) => {
 *   if (messages.length <= 7) return null;
 *   const kept = [messages[0]!, ...messages.slice(-6)];
 *   return { messages: kept, tokensAfter: estimateTokens(kept) };
 * };
 * const agent = createAgentMachine({ model: scriptedModel([{ text: 'hi' }]), compactor: keepEnds });
 * ```
 */
export type Compactor = (request: CompactionRequest) => Promise<CompactionResult>;

/** Whether a compactor's thrown error says the conversation was left as it was (see {@link Compactor}). */
export function changedNothing(error: unknown): boolean {
  return typeof error === 'object' && error !== null && (error as { changedNothing?: unknown }).changedNothing === true;
}

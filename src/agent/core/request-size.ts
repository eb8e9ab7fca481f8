import type { ToolDefinition } from '../../model.js';
import type { MessageLog } from '../../brain/message-log.js';
import type { Message } from '../../schemas.js';
import { estimateMessageTokens, estimateTokens } from '../../tokens.js';
import { objectSlot } from '../../object-slot.js';

/**
 * The one measure of a model request (seed 000: "the compaction trigger always sees the true
 * size of the next request"): the system parts it carries (instructions and the operations'
 * prompt parts), the conversation and the tool definitions. Every decision reads it: the
 * compaction lines, both sides of the no-progress guard, the trace. The system parts are passed
 * as their own token count where the driver keeps them apart from the conversation.
 *
 * @example
 * ```ts
 * const tokens = requestTokens({
 *   system: [{ role: 'system', content: 'Be brief.' }],
 *   messages: [{ role: 'user', content: 'Hi' }],
 *   tools: [],
 * });
 * ```
 */
export function requestTokens(request: {
  system: readonly Message[] | number;
  messages: readonly Message[];
  tools: readonly ToolDefinition[];
}): number {
  const system = typeof request.system === 'number' ? request.system : systemTokens(request.system);
  return system + estimateTokens(request.messages, request.tools);
}

const logTokens = objectSlot<MessageLog, number>();

/**
 * The tokens of a conversation's messages, without the request's framing: memoized by the log,
 * which never changes (snapshots are values), so the measure of a growing conversation costs
 * O(1) per turn once `rememberAppend` has linked each log to the one it extends.
 */
export function conversationTokens(log: MessageLog): number {
  let tokens = logTokens.get(log);
  if (tokens === undefined) {
    tokens = 0;
    for (let i = 0; i < log.length; i++) tokens += estimateMessageTokens(log.at(i)!);
    logTokens.set(log, tokens);
  }
  return tokens;
}

/**
 * Records the measure of `log`, which the caller made by appending to `base`: the base's measure
 * plus the new messages'. A log that is not `base` plus a tail is left to be measured in full.
 */
export function rememberAppend(log: MessageLog, base: MessageLog): void {
  const known = logTokens.get(base);
  if (known === undefined || logTokens.has(log) || log.commonPrefix(base) < base.length) return;
  let tokens = known;
  for (let i = base.length; i < log.length; i++) tokens += estimateMessageTokens(log.at(i)!);
  logTokens.set(log, tokens);
}

/**
 * Tokens of messages added to a request that is already measured: each message's own count, without
 * the request's framing (the reply priming), which the measure it joins counted once already.
 */
export function messagesTokens(messages: readonly Message[]): number {
  let tokens = 0;
  for (const message of messages) tokens += estimateMessageTokens(message);
  return tokens;
}

/** Tokens of the system parts a request carries before its conversation. */
export const systemTokens = messagesTokens;

/**
 * The size a provider reported, as a calibration of the measure: it may raise the estimate
 * (the provider's tokenizer counts more), never lower it below what the request is measured to
 * carry (a provider that reports too little, or leaves the system text out).
 */
export const calibrated = (measured: number, reported: number | undefined): number =>
  reported === undefined || !Number.isFinite(reported) ? measured : Math.max(measured, Math.floor(reported));

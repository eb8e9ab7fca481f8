import { createHash } from 'node:crypto';
import { coherentCut } from '../brain/conversation.js';
import { ModelError, type FinishReason, type Model, type ModelReply } from '../model.js';
import type { Message } from '../schemas.js';
import { estimateMessageTokens, estimateTokens } from '../tokens.js';
import type { Compactor } from './contract.js';

export interface SummarizingCompactorOptions {
  /** Recent tokens kept verbatim after the summary. Default 2,000. */
  keepTokens?: number | undefined;
  /** The model that writes the summary; default: the agent's own model. */
  model?: Model | undefined;
  /** Instructions for the summary. */
  instructions?: string | undefined;
  /**
   * How many times to ask for a summary when the model answers with an empty one. Default 2.
   * A summary cut short is not asked again: the same request would be cut again.
   */
  attempts?: number | undefined;
}

const DEFAULT_INSTRUCTIONS =
  'Summarize the conversation below for your own future use: the task, decisions made, facts ' +
  'learned from tools (with exact values), files touched, and what remains to do. Be concise.';

/**
 * A compactor that asks a model to summarize everything before a coherent cut and keeps the
 * recent tail verbatim. Leading system messages and the first user message (the task) are
 * kept as they are. The summary is an assistant message, so when the tail opens with an
 * assistant turn the brain's coalescer folds the two into one.
 * Returns null (nothing rewritten) when there is nothing before the tail to summarize.
 * An empty summary is asked for again (`attempts`, default 2); one still empty, or one cut short,
 * throws InvalidSummaryError: the summarized turns would be lost, so the compaction fails and
 * the driver's failure path decides what happens.
 *
 * @example
 * ```ts
 * const agent = createAgentMachine({
 *   model,
 *   policy: { contextWindow: 128_000, compactThreshold: 80 },
 *   compactor: summarizingCompactor({ keepTokens: 2_000 }),
 * });
 * ```
 */
export function summarizingCompactor(options: SummarizingCompactorOptions = {}): Compactor {
  const keepTokens = options.keepTokens ?? 2_000;
  const attempts = options.attempts ?? 2;
  if (!Number.isInteger(attempts) || attempts < 1) throw new RangeError(`attempts must be a positive integer, got ${String(attempts)}`);
  return async ({ messages, model, signal }) => {
    const frame = leadingSystems(messages);
    const cut = tailStart(messages, frame, keepTokens);
    // The task: kept verbatim when it would otherwise be summarized away, even when an assistant
    // greeting comes before it. Beyond the cut it is part of the tail anyway.
    const task = firstUser(messages, frame);
    const keepTask = task !== -1 && task < cut;
    const summarized = messages.slice(frame, cut).filter((_, i) => !keepTask || frame + i !== task);
    if (summarized.length === 0) return null;
    const text = transcript(summarized);
    const instructions = options.instructions ?? DEFAULT_INSTRUCTIONS;
    const summaryModel = options.model ?? model;
    const key = `summary:${digest(instructions, text)}`;
    let reply: ModelReply | undefined;
    for (let attempt = 1; ; attempt++) {
      reply = await summaryModel.generate({
        messages: [
          { role: 'system', content: instructions },
          { role: 'user', content: text },
        ],
        tools: [],
        signal,
        // Stable across retries and a restore that repeats the pass (same conversation, same key),
        // and different for every other conversation: a key built from positions alone repeats
        // when a later pass sees a conversation of the same shape, and an idempotent provider
        // would then answer with the earlier summary. A new attempt after an empty summary needs
        // its own key for the same reason.
        idempotencyKey: attempt === 1 ? key : `${key}:attempt-${attempt}`,
      });
      const problem = summaryProblem(reply.message.content, reply.finishReason);
      if (problem === null) break;
      if (problem.reason === 'truncated' || attempt >= attempts) throw problem;
    }
    const summary: Message = { role: 'assistant', content: `Summary of the earlier conversation:\n${reply.message.content}` };
    const compacted = [
      ...messages.slice(0, frame),
      ...(keepTask ? [messages[task]!] : []),
      summary,
      ...messages.slice(cut),
    ];
    return { messages: compacted, tokensAfter: estimateTokens(compacted) };
  };
}

/**
 * The model's summary could not replace the turns it was asked to summarize: it was empty
 * (`reason: 'empty'`, retryable, another attempt may well answer) or cut short by the output
 * limit or a content filter (`reason: 'truncated'`, not retryable, the same request would be cut
 * again). Nothing is rewritten.
 *
 * @example
 * ```ts
 * const compactor = summarizingCompactor({ keepTokens: 4_000 });
 * const signal = AbortSignal.timeout(60_000);
 * try {
 *   await compactor({ messages, reason: 'ThresholdExceeded', tokensBefore: 120_000, contextWindow: 128_000, tools: [], idempotencyKey: 'c1', model, signal });
 * } catch (error) {
 *   if (error instanceof InvalidSummaryError && error.reason === 'truncated') {
 *     // raise the summary model's output limit, or keep more turns verbatim (keepTokens)
 *   }
 * }
 * ```
 */
export class InvalidSummaryError extends ModelError {
  /** The conversation is as it was: the driver lets the brain's stall rule decide (see {@link Compactor}). */
  readonly changedNothing = true;
  readonly reason: 'empty' | 'truncated';
  readonly finishReason: FinishReason;
  constructor(reason: 'empty' | 'truncated', finishReason: FinishReason) {
    super(
      reason === 'empty'
        ? 'compaction failed: the model returned an empty summary'
        : `compaction failed: the summary was cut short (finish reason "${finishReason}")`,
      { retryable: reason === 'empty' },
    );
    this.reason = reason;
    this.finishReason = finishReason;
  }
}

function summaryProblem(content: string, finishReason: FinishReason): InvalidSummaryError | null {
  if (finishReason === 'length' || finishReason === 'content-filter') return new InvalidSummaryError('truncated', finishReason);
  if (content.trim() === '') return new InvalidSummaryError('empty', finishReason);
  return null;
}

/** How many system messages open the conversation: the frame the summary must not lose. */
function leadingSystems(messages: readonly Message[]): number {
  let i = 0;
  while (i < messages.length && messages[i]!.role === 'system') i++;
  return i;
}

function firstUser(messages: readonly Message[], from: number): number {
  for (let i = from; i < messages.length; i++) if (messages[i]!.role === 'user') return i;
  return -1;
}

/** Where the verbatim tail starts: about `keepTokens` from the end, snapped to a coherent cut. */
function tailStart(messages: readonly Message[], head: number, keepTokens: number): number {
  let kept = 0;
  let start = messages.length;
  while (start > head && kept < keepTokens) {
    start -= 1;
    kept += estimateMessageTokens(messages[start]!);
  }
  // The summary replaces [head, cut); cutting coherently keeps every tool call with its result,
  // so a tool-call group straddling `start` moves into the tail whole.
  return Math.max(head, coherentCut(messages, start));
}

function digest(instructions: string, text: string): string {
  return createHash('sha256').update(instructions).update('\0').update(text).digest('hex').slice(0, 32);
}

function transcript(messages: readonly Message[]): string {
  return messages
    .map((m) => {
      if (m.role === 'tool') return `[tool ${m.toolName} result${m.isError ? ' (error)' : ''}]: ${m.content}`;
      if (m.role === 'assistant' && m.toolCalls?.length) {
        const calls = m.toolCalls.map((c) => `${c.name}(${c.args === undefined ? '' : JSON.stringify(c.args)})`).join(', ');
        return `assistant: ${m.content}${m.content ? ' ' : ''}[called ${calls}]`;
      }
      return `${m.role}: ${m.content}`;
    })
    .join('\n');
}

import { coherentCut } from '../conversation.js';
import type { Model } from '../model.js';
import type { Message } from '../schemas.js';
import { estimateMessageTokens, estimateTokens } from '../tokens.js';
import type { Compactor } from '../agent/config.js';

export interface SummarizingCompactorOptions {
  /** Recent tokens kept verbatim after the summary. Default 2,000. */
  keepTokens?: number;
  /** The model that writes the summary; default: the agent's own model. */
  model?: Model;
  /** Instructions for the summary. */
  instructions?: string;
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
 */
export function summarizingCompactor(options: SummarizingCompactorOptions = {}): Compactor {
  const keepTokens = options.keepTokens ?? 2_000;
  return async ({ messages, model, signal }) => {
    const head = leadingContext(messages);
    const cut = tailStart(messages, head, keepTokens);
    if (cut <= head) return null;
    const reply = await (options.model ?? model).generate({
      messages: [
        { role: 'system', content: options.instructions ?? DEFAULT_INSTRUCTIONS },
        { role: 'user', content: transcript(messages.slice(head, cut)) },
      ],
      tools: [],
      signal,
      idempotencyKey: `summary:${cut}:${messages.length}`,
    });
    const summary: Message = { role: 'assistant', content: `Summary of the earlier conversation:\n${reply.message.content}` };
    const compacted = [...messages.slice(0, head), summary, ...messages.slice(cut)];
    return { messages: compacted, tokensAfter: estimateTokens(compacted) };
  };
}

/** System messages at the start and the first user message: the frame the summary must not lose. */
function leadingContext(messages: readonly Message[]): number {
  let i = 0;
  while (i < messages.length && messages[i]!.role === 'system') i++;
  return i < messages.length && messages[i]!.role === 'user' ? i + 1 : i;
}

/** Where the verbatim tail starts: about `keepTokens` from the end, snapped to a coherent cut. */
function tailStart(messages: readonly Message[], head: number, keepTokens: number): number {
  let kept = 0;
  let start = messages.length;
  while (start > head && kept < keepTokens) {
    start -= 1;
    kept += estimateMessageTokens(messages[start]!);
  }
  // The summary replaces [head, cut); cutting coherently keeps every tool call with its result.
  return coherentCut(messages, start);
}

function transcript(messages: readonly Message[]): string {
  return messages
    .map((m) => {
      if (m.role === 'tool') return `[tool ${m.toolName} result${m.isError ? ' (error)' : ''}]: ${m.content}`;
      if (m.role === 'assistant' && m.toolCalls?.length) {
        const calls = m.toolCalls.map((c) => `${c.name}(${JSON.stringify(c.args)})`).join(', ');
        return `assistant: ${m.content}${m.content ? ' ' : ''}[called ${calls}]`;
      }
      return `${m.role}: ${m.content}`;
    })
    .join('\n');
}

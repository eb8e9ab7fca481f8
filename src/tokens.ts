import { countTokens as countO200k } from 'gpt-tokenizer/encoding/o200k_base';
import type { ToolDefinition } from './model.js';
import type { Message } from './schemas.js';

/**
 * Token estimates for a model request, for the compaction lines when a provider reports no usage.
 *
 * Encoding: o200k_base, the tokenizer of every current OpenAI model (GPT-4o, 4.1, 5, o-series).
 * cl100k_base only matches retired GPT-4/3.5 models. For other providers no public tokenizer
 * exists, so any choice is an estimate; o200k's larger vocabulary lands closer to today's
 * tokenizers than cl100k's does.
 *
 * Framing follows OpenAI's counting guide: every message costs 3 tokens of role markers on top of
 * its content, and every request 3 more that prime the reply. Tool calls and tool definitions are
 * counted as their JSON, which over-counts slightly against the provider's own rendering: the safe
 * side for a number that decides when to compact.
 */

const PER_MESSAGE = 3;
const REPLY_PRIMING = 3;
/** Call framing (id, `function` wrapper) around a tool call's name and arguments. */
const PER_TOOL_CALL = 3;
/** The tool section header a provider puts around the definitions, once per request. */
const TOOLS_PREAMBLE = 12;
const PER_TOOL = 7;

/**
 * Conversation text is data, not control: a user pasting `<|endoftext|>` must be counted as plain
 * text, whereas the tokenizer's default throws on special tokens.
 */
const PLAIN_TEXT = { disallowedSpecial: new Set<string>() };

export function countTextTokens(text: string): number {
  return text === '' ? 0 : countO200k(text, PLAIN_TEXT);
}

/**
 * Messages are immutable once in history, so each one's count is kept beside it: re-estimating a
 * growing conversation every step then tokenizes only the new messages. A WeakMap lets compacted
 * messages be collected with their counts.
 */
const perMessage = new WeakMap<Message, number>();

export function estimateMessageTokens(message: Message): number {
  const cached = perMessage.get(message);
  if (cached !== undefined) return cached;
  let tokens = PER_MESSAGE + countTextTokens(message.content);
  if (message.role === 'assistant' && message.toolCalls) {
    for (const call of message.toolCalls) {
      const args = call.args === undefined ? '' : JSON.stringify(call.args);
      tokens += PER_TOOL_CALL + countTextTokens(call.name) + countTextTokens(args);
    }
  }
  perMessage.set(message, tokens);
  return tokens;
}

/** Same reasoning: `defineTool` builds each definition once, so the same objects come back every step. */
const perTool = new WeakMap<ToolDefinition, number>();

function estimateToolDefinition(tool: ToolDefinition): number {
  let tokens = perTool.get(tool);
  if (tokens === undefined) {
    tokens =
      PER_TOOL +
      countTextTokens(tool.name) +
      countTextTokens(tool.description) +
      countTextTokens(JSON.stringify(tool.inputSchema));
    perTool.set(tool, tokens);
  }
  return tokens;
}

export function estimateToolTokens(tools: readonly ToolDefinition[]): number {
  if (tools.length === 0) return 0;
  let tokens = TOOLS_PREAMBLE;
  for (const tool of tools) tokens += estimateToolDefinition(tool);
  return tokens;
}

/** Estimated input tokens of a request carrying `messages` and `tools`. */
export function estimateTokens(messages: readonly Message[], tools: readonly ToolDefinition[] = []): number {
  let tokens = REPLY_PRIMING + estimateToolTokens(tools);
  for (const message of messages) tokens += estimateMessageTokens(message);
  return tokens;
}

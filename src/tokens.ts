import { createRequire } from 'node:module';
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

type CountTokens = (text: string, options: { disallowedSpecial: Set<string> }) => number;
let tokenizer: CountTokens | undefined;
/**
 * The o200k tokenizer, loaded on first use: its tables take a few hundred milliseconds to load,
 * which `import 'loopchart'` should not pay for users who never estimate (the brain alone, the
 * stores, the CLI). Synchronous because estimates are (`createRequire`; the CommonJS build
 * gets `import.meta.url` from tsup's shims).
 */
function countO200k(text: string, options: { disallowedSpecial: Set<string> }): number {
  if (!tokenizer) {
    const load = createRequire(import.meta.url);
    tokenizer = (load('gpt-tokenizer/encoding/o200k_base') as { countTokens: CountTokens }).countTokens;
  }
  return tokenizer(text, options);
}

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

/**
 * Why the text is cut before the tokenizer sees it: byte-pair merging is quadratic in the length
 * of one pre-tokenized piece, and a run of one character (`=`, `中`, spaces) is a single piece, so
 * 128K `=` took 20 s and 128K random CJK minutes. Pieces of at most SEGMENT characters keep the
 * merge cost per character constant; cutting just before a space that follows a word keeps
 * ordinary text exactly as the tokenizer would split it.
 */
const SEGMENT = 128;
const CUT_SEARCH = 32;
/** Up to this length a text is counted exactly (the slowest text, random CJK, takes about 20 ms). */
const EXACT_LIMIT = 4096;
/** Longer texts are estimated from this many evenly spread windows of SEGMENT characters. */
const SAMPLE_WINDOWS = 32;

/**
 * o200k token count of `text`: exact up to EXACT_LIMIT characters; beyond, the count of
 * SAMPLE_WINDOWS evenly spread windows (each snapped to word starts) scaled to the whole length.
 * The cost of a call is bounded whatever the length (about 1 ms for prose or code, about 20 ms
 * for the slowest text, random CJK), so no call stalls the event loop. Homogeneous text (a file,
 * a log, JSON) lands within a few percent; mixed text is as good as its sample.
 *
 * @example
 * ```ts
 * countTextTokens('hello world'); // 2
 * ```
 */
export function countTextTokens(text: string): number {
  if (text === '') return 0;
  if (text.length <= SHORT_TEXT) return countShort(text);
  if (text.length <= EXACT_LIMIT) return countSegments(text);
  const step = (text.length - SEGMENT) / (SAMPLE_WINDOWS - 1);
  let sampledChars = 0;
  let sampledTokens = 0;
  for (let k = 0; k < SAMPLE_WINDOWS; k++) {
    const start = wordStart(text, Math.floor(k * step));
    const window = text.slice(start, segmentEnd(text, start));
    sampledChars += window.length;
    sampledTokens += countO200k(window, PLAIN_TEXT);
  }
  return Math.ceil((sampledTokens * text.length) / sampledChars);
}

/** Texts this short recur (tool names, small results, argument shapes): their counts are kept. */
const SHORT_TEXT = 64;
/** Bound on the kept counts; past it the table starts over (the texts are someone else's). */
const SHORT_COUNTS_MAX = 4096;
const shortCounts = new Map<string, number>();

function countShort(text: string): number {
  let tokens = shortCounts.get(text);
  if (tokens === undefined) {
    tokens = countO200k(text, PLAIN_TEXT);
    if (shortCounts.size >= SHORT_COUNTS_MAX) shortCounts.clear();
    shortCounts.set(text, tokens);
  }
  return tokens;
}

/** Exact count, fed to the tokenizer in segments of at most SEGMENT characters. */
function countSegments(text: string): number {
  let tokens = 0;
  let start = 0;
  while (start < text.length) {
    const end = segmentEnd(text, start);
    tokens += countO200k(start === 0 && end === text.length ? text : text.slice(start, end), PLAIN_TEXT);
    start = end;
  }
  return tokens;
}

function segmentEnd(text: string, start: number): number {
  const limit = start + SEGMENT;
  if (limit >= text.length) return text.length;
  // Prefer the start of a " word": the tokenizer's own pieces begin there.
  for (let i = limit; i > limit - CUT_SEARCH; i--) {
    if (isSpace(text.charCodeAt(i)) && !isSpace(text.charCodeAt(i - 1))) return i;
  }
  return isHighSurrogate(text.charCodeAt(limit - 1)) ? limit - 1 : limit;
}

/** The first word start at or after `from` (within CUT_SEARCH), never inside a surrogate pair. */
function wordStart(text: string, from: number): number {
  for (let i = from; i < from + CUT_SEARCH && i < text.length; i++) {
    if (isSpace(text.charCodeAt(i)) && !isSpace(text.charCodeAt(i - 1))) return i;
  }
  return isLowSurrogate(text.charCodeAt(from)) ? from + 1 : from;
}

function isSpace(code: number): boolean {
  return code === 32 || code === 10 || code === 9 || code === 13;
}

function isHighSurrogate(code: number): boolean {
  return code >= 0xd800 && code <= 0xdbff;
}

function isLowSurrogate(code: number): boolean {
  return code >= 0xdc00 && code <= 0xdfff;
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

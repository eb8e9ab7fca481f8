import type { ToolCall } from '../schemas.js';
import type { ModelReply } from '../model.js';
import { jsonValueProblem } from '../json-value.js';
import { ModelError, parseModelReply } from '../model.js';
import { MalformedStreamError } from './errors.js';
import { replyFinishReason } from './finish-reason.js';
import { isRetryableStatus, providerMessage } from './http-status.js';

/**
 * Folds parsed Chat Completions chunks into one assistant reply: text deltas in order, tool calls
 * assembled by `index` (id and name arrive first, arguments in pieces), finish reason, usage.
 * Knows nothing about HTTP or SSE so the same code handles a streamed and a non-streamed body.
 */

interface PartialCall {
  id: string | undefined;
  name: string | undefined;
  args: string;
}

type Json = Record<string, unknown>;

function isObject(value: unknown): value is Json {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/**
 * A delta's `content` as text: a string, or (as some servers send it) an array of content parts,
 * whose `text` parts are joined; null or absent is no text. Anything else (a number, an object) is a
 * broken server: dropping it would turn the answer into ''.
 */
function textOf(content: unknown): string {
  if (content == null) return '';
  if (typeof content === 'string') return content;
  if (Array.isArray(content) && content.every((part) => isObject(part) && (part.type !== 'text' || typeof part.text === 'string'))) {
    return content.map((part) => (part.type === 'text' ? (part.text as string) : '')).join('');
  }
  throw new MalformedStreamError(`"content" is neither a string nor a list of content parts: ${preview(content)}`);
}

export class ChatChunkAssembler {
  private text = '';
  private readonly calls: PartialCall[] = [];
  private readonly byIndex = new Map<number, PartialCall>();
  private rawFinishReason: string | undefined;
  private sawChoice = false;
  /** The provider's usage fields as sent; `parseModelReply` judges them once, in `reply()`. */
  private usage: { inputTokens: unknown; outputTokens: unknown } | undefined;
  private readonly onTextDelta: ((delta: string) => void) | undefined;
  /** Prefix for ids a server left out; deterministic so a repeated call produces the same ids. */
  private readonly fallbackIdPrefix: string;

  constructor(options: { onTextDelta?: ((delta: string) => void) | undefined; fallbackIdPrefix: string }) {
    this.onTextDelta = options.onTextDelta;
    this.fallbackIdPrefix = options.fallbackIdPrefix;
  }

  /** True once a choice carried a finish reason: the reply is complete even if `[DONE]` never comes. */
  get finished(): boolean {
    return this.rawFinishReason !== undefined;
  }

  /** True once a chunk carried a choice: a stream of usage alone (or nothing) holds no reply. */
  get hasChoice(): boolean {
    return this.sawChoice;
  }

  push(chunk: unknown): void {
    if (!isObject(chunk)) throw new MalformedStreamError(`expected a JSON object, got ${preview(chunk)}`);
    if (chunk.error != null) throw streamedError(chunk.error);
    if (isObject(chunk.usage)) this.takeUsage(chunk.usage);
    const choices = chunk.choices;
    // vLLM and others send the final usage chunk with `choices: null` or without the key.
    if (choices == null) return;
    if (!Array.isArray(choices)) throw new MalformedStreamError(`"choices" is not an array: ${preview(choices)}`);
    for (const choice of choices) {
      if (!isObject(choice)) throw new MalformedStreamError(`a choice is not an object: ${preview(choice)}`);
      // We never ask for n > 1; a stray second choice must not be mixed into the first.
      if (typeof choice.index === 'number' && choice.index !== 0) continue;
      this.sawChoice = true;
      const delta = isObject(choice.delta) ? choice.delta : isObject(choice.message) ? choice.message : undefined;
      if (delta !== undefined) this.takeDelta(delta);
      if (typeof choice.finish_reason === 'string') this.rawFinishReason = choice.finish_reason;
      if (this.usage === undefined && isObject(choice.usage)) this.takeUsage(choice.usage);
    }
  }

  /** The assembled reply. Throws MalformedStreamError for a tool call that never got a name. */
  reply(): ModelReply {
    const toolCalls: ToolCall[] = this.calls.map((call, i) => {
      if (call.name === undefined) {
        throw new MalformedStreamError(`tool call #${i} (${call.id ?? 'no id'}) never received a function name`);
      }
      return { id: call.id ?? `${this.fallbackIdPrefix}_${i}`, name: call.name, args: parseArguments(call.args) };
    });
    return parseModelReply({
      message:
        toolCalls.length > 0
          ? { role: 'assistant', content: this.text, toolCalls }
          : { role: 'assistant', content: this.text },
      finishReason: replyFinishReason(this.rawFinishReason, toolCalls.length > 0),
      usage: this.usage,
    });
  }

  private takeDelta(delta: Json): void {
    const content = textOf(delta.content);
    if (content.length > 0) {
      this.text += content;
      this.onTextDelta?.(content);
    }
    const toolCalls = delta.tool_calls;
    if (Array.isArray(toolCalls)) {
      for (let position = 0; position < toolCalls.length; position++) {
        const raw: unknown = toolCalls[position];
        if (!isObject(raw)) throw new MalformedStreamError(`a tool call delta is not an object: ${preview(raw)}`);
        this.takeToolDelta(raw, position);
      }
    }
  }

  private takeToolDelta(delta: Json, position: number): void {
    // Servers that send each call whole (no `index`) are keyed by their position in the array.
    const index = typeof delta.index === 'number' ? delta.index : position;
    const id = typeof delta.id === 'string' && delta.id !== '' ? delta.id : undefined;
    const fn = isObject(delta.function) ? delta.function : undefined;
    const name = typeof fn?.name === 'string' && fn.name !== '' ? fn.name : undefined;
    const rawArgs = fn?.arguments;
    // Some servers send arguments as an object instead of a JSON string.
    const args = typeof rawArgs === 'string' ? rawArgs : rawArgs == null ? '' : JSON.stringify(rawArgs);

    let call = this.byIndex.get(index);
    // A different id at a known index starts a new call: some servers reuse index 0 for every call.
    if (call === undefined || (id !== undefined && call.id !== undefined && id !== call.id)) {
      call = { id, name, args };
      this.calls.push(call);
      this.byIndex.set(index, call);
      return;
    }
    // The first id and name win: some servers repeat them on every delta, none split them.
    if (call.id === undefined) call.id = id;
    if (call.name === undefined) call.name = name;
    call.args += args;
  }

  private takeUsage(usage: Json): void {
    if (usage.prompt_tokens === undefined && usage.completion_tokens === undefined) return;
    this.usage = { inputTokens: usage.prompt_tokens, outputTokens: usage.completion_tokens };
  }
}

/**
 * The joined argument text as JSON. Empty means "no arguments" (models send "" for parameterless
 * tools). Unparsable text, and JSON nested deeper than `MAX_JSON_DEPTH`, stay the raw string so
 * the tool validator reports exactly what came and the run goes on.
 */
export function parseArguments(text: string): unknown {
  if (text.trim() === '') return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(text) as unknown;
  } catch {
    return text;
  }
  return jsonValueProblem(parsed) === null ? parsed : text;
}

/** An `{"error": …}` object inside an otherwise healthy stream (OpenAI and vLLM send these). */
export function streamedError(error: unknown): ModelError {
  const message = typeof error === 'string' ? error : providerMessage(JSON.stringify(error)) ?? 'unknown error';
  const fields = isObject(error) ? error : {};
  const code = fields.code ?? fields.status;
  const status = typeof code === 'number' && code >= 400 && code < 600 ? code : undefined;
  const kind = `${String(fields.type ?? '')} ${String(fields.code ?? '')}`.toLowerCase();
  // Overload and server-side failures mid-stream are transient; anything else (a policy or
  // validation error) would fail again identically.
  const retryable =
    (status !== undefined && isRetryableStatus(status)) ||
    /server_error|overloaded|rate_limit|timeout|internal|unavailable/.test(kind);
  return new ModelError(`the provider reported an error mid-stream: ${message}`, { status, retryable, cause: error });
}

export function preview(value: unknown): string {
  const text = typeof value === 'string' ? value : JSON.stringify(value) ?? String(value);
  return text.length > 200 ? `${text.slice(0, 200)}…` : text;
}

import type { FinishReason } from '../model.js';

/**
 * Maps a provider's finish reason to ours. Both wire spellings are accepted because the HTTP
 * adapter sees OpenAI's (`tool_calls`, `content_filter`) and the AI SDK adapter sees the SDK's
 * (`tool-calls`, `content-filter`); one table keeps the two adapters from drifting apart.
 */
export function normalizeFinishReason(raw: string | null | undefined): FinishReason {
  switch (raw) {
    case 'stop':
    case 'end_turn': // Anthropic-style servers behind an OpenAI-compatible proxy
      return 'stop';
    case 'length':
    case 'max_tokens':
      return 'length';
    case 'content_filter':
    case 'content-filter':
    case 'refusal':
      return 'content-filter';
    case 'tool_calls':
    case 'tool-calls':
    case 'function_call':
    case 'tool_use':
      return 'tool-calls';
    case 'aborted':
    case 'cancelled':
    case 'canceled':
      return 'cancelled';
    default:
      return 'other';
  }
}

/**
 * The finish reason to report for a reply. Some servers (Ollama, older vLLM) say `stop` even when
 * the reply carries tool calls; the loop acts on the calls either way, but a caller reading the
 * finish reason should not be told the model "stopped" when it is waiting for tool results.
 */
export function replyFinishReason(raw: string | null | undefined, hasToolCalls: boolean): FinishReason {
  const reason = normalizeFinishReason(raw);
  return hasToolCalls && (reason === 'stop' || reason === 'other') ? 'tool-calls' : reason;
}

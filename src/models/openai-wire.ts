import type { Message } from '../schemas.js';
import type { ResponseFormat, ToolDefinition } from '../model.js';

/** Our messages and tools in the Chat Completions request format. */

export type WireMessage =
  | { role: 'system' | 'user'; content: string }
  | { role: 'assistant'; content: string | null; tool_calls?: WireToolCall[] | undefined }
  | { role: 'tool'; tool_call_id: string; content: string };

export interface WireToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

export interface WireTool {
  type: 'function';
  function: { name: string; description: string; parameters: Record<string, unknown> };
}

export function toWireMessages(messages: readonly Message[]): WireMessage[] {
  return messages.map(toWireMessage);
}

function toWireMessage(message: Message): WireMessage {
  switch (message.role) {
    case 'system':
    case 'user':
      return { role: message.role, content: message.content };
    case 'assistant': {
      const calls = message.toolCalls;
      if (calls === undefined || calls.length === 0) return { role: 'assistant', content: message.content };
      return {
        role: 'assistant',
        // The API documents content as nullable when tool_calls are present; an empty string is
        // rejected by some strict servers, null by none.
        content: message.content === '' ? null : message.content,
        tool_calls: calls.map((call) => ({
          id: call.id,
          type: 'function',
          function: { name: call.name, arguments: wireArguments(call.args) },
        })),
      };
    }
    case 'tool':
      // No `name` field: OpenAI's schema for tool messages has none and strict validators reject
      // unknown keys. `isError` has no wire form; the content already says what went wrong.
      return { role: 'tool', tool_call_id: message.toolCallId, content: message.content };
  }
}

/**
 * `arguments` is always valid JSON so that servers which parse it (Ollama, vLLM, proxies to other
 * APIs) accept the request. Arguments the model sent unparsable are stored as the raw string, so
 * they go back as a JSON string literal; the tool's error result already told the model why.
 */
export function wireArguments(args: unknown): string {
  return JSON.stringify(args === undefined ? {} : args);
}

export function toWireTools(tools: readonly ToolDefinition[]): WireTool[] {
  return tools.map((tool) => ({
    type: 'function',
    function: { name: tool.name, description: tool.description, parameters: tool.inputSchema },
  }));
}

/**
 * A request's answer format as Chat Completions' `response_format`. `strict` is left to the
 * server's default: OpenAI's strict mode refuses optional fields, and loopchart validates the
 * answer itself either way.
 */
export function toWireResponseFormat(format: ResponseFormat): { type: 'json_schema'; json_schema: Record<string, unknown> } {
  return {
    type: 'json_schema',
    json_schema: { name: format.name, ...(format.description !== undefined && { description: format.description }), schema: format.schema },
  };
}

import type { Message } from '../schemas.js';
import type { ToolDefinition } from '../model.js';

/*
 * Our messages and tools in the AI SDK's provider-level prompt format. The shapes below are the
 * part of it we produce, and they are the same in V2, V3 and V4: each is assignable to every
 * version's own prompt type (test/models/ai-sdk.test.ts compiles a model of each major).
 */

type TextPart = { type: 'text'; text: string };
type ToolCallPart = { type: 'tool-call'; toolCallId: string; toolName: string; input: unknown };
type ToolResultPart = {
  type: 'tool-result';
  toolCallId: string;
  toolName: string;
  output: { type: 'text' | 'error-text'; value: string };
};

/** A provider-level prompt as the adapter builds it. */
export type AiSdkPrompt = Array<
  | { role: 'system'; content: string }
  | { role: 'user'; content: TextPart[] }
  | { role: 'assistant'; content: Array<TextPart | ToolCallPart> }
  | { role: 'tool'; content: ToolResultPart[] }
>;

/** A function tool as the adapter declares it; `inputSchema` is the tool's JSON Schema. */
export type AiSdkFunctionTool = { type: 'function'; name: string; description?: string | undefined; inputSchema: object };

export function toLanguageModelPrompt(messages: readonly Message[]): AiSdkPrompt {
  const prompt: AiSdkPrompt = [];
  for (const message of messages) {
    switch (message.role) {
      case 'system':
        prompt.push({ role: 'system', content: message.content });
        break;
      case 'user':
        prompt.push({ role: 'user', content: [{ type: 'text', text: message.content }] });
        break;
      case 'assistant': {
        const calls = message.toolCalls ?? [];
        prompt.push({
          role: 'assistant',
          content: [
            // An assistant turn that only calls tools has no text part; one with neither keeps
            // its (empty) text so the turn is not dropped.
            ...(message.content !== '' || calls.length === 0 ? [{ type: 'text' as const, text: message.content }] : []),
            ...calls.map((call) => ({
              type: 'tool-call' as const,
              toolCallId: call.id,
              toolName: call.name,
              // Providers serialize `input` with JSON.stringify, so raw unparsable text goes back
              // as a JSON string, exactly as the HTTP adapter sends it.
              input: call.args === undefined ? {} : call.args,
            })),
          ],
        });
        break;
      }
      case 'tool': {
        const part: ToolResultPart = {
          type: 'tool-result',
          toolCallId: message.toolCallId,
          toolName: message.toolName,
          // `error-text` lets providers with a native error flag (Anthropic's is_error) set it.
          output: message.isError ? { type: 'error-text', value: message.content } : { type: 'text', value: message.content },
        };
        // One tool message per batch of results, the shape the SDK itself produces for a step.
        const last = prompt[prompt.length - 1];
        if (last?.role === 'tool') last.content.push(part);
        else prompt.push({ role: 'tool', content: [part] });
        break;
      }
    }
  }
  return prompt;
}

export function toLanguageModelTools(tools: readonly ToolDefinition[]): AiSdkFunctionTool[] {
  return tools.map((tool) => ({ type: 'function', name: tool.name, description: tool.description, inputSchema: tool.inputSchema }));
}

import type {
  LanguageModelV2FunctionTool,
  LanguageModelV2Prompt,
  LanguageModelV2ToolResultPart,
} from '@ai-sdk/provider';
import type { Message } from '../schemas.js';
import type { ToolDefinition } from '../model.js';

/** Our messages and tools in the AI SDK's provider-level (LanguageModelV2) prompt format. */

export function toLanguageModelPrompt(messages: readonly Message[]): LanguageModelV2Prompt {
  const prompt: LanguageModelV2Prompt = [];
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
        const part: LanguageModelV2ToolResultPart = {
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

export function toLanguageModelTools(tools: readonly ToolDefinition[]): LanguageModelV2FunctionTool[] {
  return tools.map((tool) => ({
    type: 'function',
    name: tool.name,
    description: tool.description,
    inputSchema: tool.inputSchema as LanguageModelV2FunctionTool['inputSchema'],
  }));
}

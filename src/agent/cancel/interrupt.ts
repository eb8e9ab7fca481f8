import type { ToolCall, ToolMessage } from '../../schemas.js';
import { INTERRUPTED_CONTENT } from '../../tools/run-tools.js';

/** The result a call gets when the run stops before it finished: history stays coherent. */
export const interruptedResult = (call: ToolCall): ToolMessage => ({
  role: 'tool',
  toolCallId: call.id,
  toolName: call.name,
  content: INTERRUPTED_CONTENT,
  isError: true,
});

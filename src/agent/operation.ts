import type { ModelReply, ToolDefinition } from '../model.js';
import type { Message, PendingToolCall } from '../schemas.js';
import type { Tool } from '../tools/define-tool.js';

/** What an operation sees at each point: the conversation so far, read-only. */
export interface OperationContext {
  readonly sessionId: string;
  readonly turn: number;
  readonly messages: readonly Message[];
}

/** The request about to go to the model; `beforeModelCall` may return a rewritten one. */
export interface PreparedRequest {
  messages: Message[];
  tools: ToolDefinition[];
}

/**
 * One composable piece of agent behaviour (seed 003's operations). The driver asks every
 * operation, in list order, for tools and prompt parts before each model call, and calls its
 * hooks at the named points. Changing the agent means changing the list, not the machines.
 * Prompt parts are sent with the request but never stored in the conversation.
 */
export interface Operation {
  readonly name: string;
  readonly tools?: readonly Tool[];
  /** System text to send before the conversation on this call. */
  prompt?(ctx: OperationContext): string | undefined;
  beforeModelCall?(request: PreparedRequest, ctx: OperationContext): PreparedRequest | void;
  afterReply?(reply: ModelReply, ctx: OperationContext): void;
  beforeTools?(calls: readonly PendingToolCall[], ctx: OperationContext): void;
}
